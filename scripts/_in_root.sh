# Sourced by distro_test.sh and majors_test.sh: run a command as root inside the debootstrap
# root $R, in its own mount and PID namespaces (proc, sys and dev mounted there; --no-net: in a
# network namespace of its own, only its loopback up).
#   in_root [--no-net] 'COMMAND'
in_root() {
  local net=()
  if [ "$1" = --no-net ]; then net=(--net); shift; fi
  unshare --mount --pid --fork "${net[@]}" bash -c '
    set -e
    R="$1"; shift
    ip link set lo up 2>/dev/null || true
    mount -t proc proc "$R/proc"
    mount -t sysfs sysfs "$R/sys"
    mount --rbind /dev "$R/dev"
    exec chroot "$R" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$1"
  ' in_root "$R" "$1"
}
