#!/usr/bin/env bash
# The demo and the suites that differ by release on another Debian release, in a root of its own
# (run by scripts/test.sh):
#   bash scripts/test.sh --distro trixie [pytest args]
# As root: builds with debootstrap (installed from Debian's packages when absent) a Debian 13
# root once and caches it in $NL2SQL_DISTRO_CACHE/<release>/root (default /var/cache/nl2sql,
# outside the clone: CI starts from a clean one; --fresh builds it again), copies this checkout
# into it (its git history too: the upgrade test needs the released commits), installs nl2sql
# with scripts/install.sh as a user would (the release's own PostgreSQL, 17 on trixie, with its
# Python, 3.13), runs the demo, then the suite inside it (chroot in new mount and PID namespaces
# with /proc, /sys and /dev; the suite also in a network namespace that has only loopback).
# Beside trixie's PostgreSQL 17, bookworm's postgresql-15 with nl2sql installed for it (as on a
# machine upgraded from Debian 12) for the pg_upgrade test.
# The ONNX model is a build artifact: this machine's exported file is copied into the root's
# cache, so the root needs no torch. Prints the server's version, pytest's summary and the time
# of each step.
# --no-suite stops before the suite; --suite-only runs the suite alone in the root such a run set
# up (.ci/run: the set-up first, then this suite beside scripts/majors_test.sh).
#   bash scripts/test.sh --distro bookworm --fresh --no-onnx [pytest args]
# The fresh-machine check of README's first command: --no-onnx copies no ONNX file (install.sh
# installs the torch extra and exports it) into a root of its own ($NL2SQL_DISTRO_CACHE/<release>-fresh)
# and runs bash scripts/demo.sh alone, as README says, then the suite. On bookworm (Debian 12:
# PostgreSQL 15, Python 3.11) there is no older server beside it: the pg_upgrade test skips.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DISTRO="${1:?usage: distro_test.sh RELEASE [--fresh] [--no-onnx] [--no-suite | --suite-only] [pytest args]}"
shift
FRESH=0
NO_ONNX=0
SETUP=1
SUITE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --fresh) FRESH=1; shift ;;
    --no-onnx) NO_ONNX=1; shift ;;
    --no-suite) SUITE=0; shift ;;
    --suite-only) SETUP=0; shift ;;
    *) break ;;
  esac
done
case "$DISTRO" in
  trixie|bookworm) ;;
  *) echo "distro_test.sh: only trixie (Debian 13) and bookworm (Debian 12) are set up, not $DISTRO" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "distro_test.sh: run as root (debootstrap, chroot)" >&2; exit 1; }
CACHE="${NL2SQL_DISTRO_CACHE:-/var/cache/nl2sql}/$DISTRO$([ "$NO_ONNX" = 0 ] || echo -fresh)"
R="$CACHE/root"
HOST_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
ONNX_FILE=all-MiniLM-L6-v2.onnx
now() { date +%s; }
say() { printf '\n=== [%s] %s\n' "$DISTRO" "$*"; }

t0=$(now)
if [ "$SETUP" = 0 ]; then
  # --suite-only: the root as an earlier --no-suite run left it (checkout, install, wheelhouse)
  # (the venv's python links to the root's /usr/bin: not a path the host resolves)
  [ -f "$R/.nl2sql-root" ] && [ -f "$R/opt/nl2sql/venv/share/nl2sql/pg_bindir" ] \
    || { echo "distro_test.sh: --suite-only needs the root set up: run it with --no-suite first" >&2; exit 1; }
  . "$ROOT/scripts/_in_root.sh"  # in_root [--no-net] COMMAND
  t1=$t0 t2=$t0 t3=$t0 t35=$t0 t36=$t0
  UPGRADE_ENV=""
  if [ "$DISTRO" != bookworm ]; then
    UPGRADE_ENV="export NL2SQL_PG_UPGRADE_FROM=/usr/lib/postgresql/15/bin NL2SQL_PG_UPGRADE_VENV=/opt/nl2sql/venv-15;"
  fi
else  # the set-up, steps 1 to 4b (left out by --suite-only)
# 1. The root (cached) ---------------------------------------------------------------------------
if [ "$FRESH" = 1 ]; then rm -rf "$R"; fi
if [ ! -f "$R/.nl2sql-root" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  # the Debian archive this machine's apt already uses (deb822 or one-line format)
  MIRROR="$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
  [ -n "$MIRROR" ] || MIRROR="$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
  [ -n "$MIRROR" ] || { echo "distro_test.sh: no Debian archive in /etc/apt/sources.list*" >&2; exit 1; }
  say "debootstrap $DISTRO into $R"
  rm -rf "$R.tmp"
  mkdir -p "$CACHE"
  debootstrap --variant=minbase --include=ca-certificates,procps,git "$DISTRO" "$R.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  touch "$R.tmp/.nl2sql-root"
  mv "$R.tmp" "$R"
fi
t1=$(now)

# 2. This checkout, its history and the ONNX model, into the root --------------------------------
rm -rf "$R/src/nl2sql"
mkdir -p "$R/src"
git clone -q --no-checkout "$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir)" "$R/src/nl2sql"
git -C "$R/src/nl2sql" checkout -q "$(git -C "$ROOT" rev-parse HEAD)" 2>/dev/null
# the working tree as it is (uncommitted changes too), as a clone would hold it
git -C "$ROOT" ls-files -co --exclude-standard -z \
  | (cd "$ROOT" && tar --null -T - -cf - 2>/dev/null) | tar -C "$R/src/nl2sql" -xf -
if [ "$NO_ONNX" = 0 ]; then
  mkdir -p "$R/var/cache/nl2sql"
  if [ ! -f "$R/var/cache/nl2sql/$ONNX_FILE" ]; then
    for f in "$HOST_VENV/share/nl2sql/$ONNX_FILE" "/var/cache/nl2sql/$ONNX_FILE"; do
      [ -f "$f" ] && { cp "$f" "$R/var/cache/nl2sql/$ONNX_FILE"; break; }
    done
  fi
  [ -f "$R/var/cache/nl2sql/$ONNX_FILE" ] || { echo "distro_test.sh: no exported $ONNX_FILE on this machine: run bash scripts/install.sh here first" >&2; exit 1; }
fi
cp /etc/resolv.conf "$R/etc/resolv.conf"
# this machine's own certificate authorities (a network that inspects TLS needs them for pip)
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$R/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/"
  chroot "$R" update-ca-certificates >/dev/null 2>&1 || true
fi

# in_root [--no-net] CMD: CMD by bash -c in the root, with /proc, /sys, /dev; its processes end
# with it (own PID namespace); --no-net: a network namespace with loopback only
. "$ROOT/scripts/_in_root.sh"  # in_root [--no-net] COMMAND

# 3. Install as a user would, then the demo ------------------------------------------------------
# (--scripted: the local model's demo runs on the host, in .ci/run; here the release's install)
if [ "$NO_ONNX" = 1 ]; then
  # README's first command alone, on the fresh root (install.sh inside it exports the ONNX model)
  say "bash scripts/demo.sh (README's set-up command: install, ONNX export, demo)"
  in_root "cd /src/nl2sql && bash scripts/demo.sh --scripted"
  t2=$(now)
  in_root "cd /src/nl2sql && bash scripts/stop.sh --delete"
else
  say "scripts/install.sh (the release's PostgreSQL and Python)"
  in_root "apt-get update -qq && cd /src/nl2sql && bash scripts/install.sh"
  t2=$(now)
  say "scripts/demo.sh"
  in_root "cd /src/nl2sql && bash scripts/demo.sh --scripted && bash scripts/stop.sh --delete"
fi
t3=$(now)

# 4. The older server beside it, for the pg_upgrade test (tests/upgrade/test_pg_upgrade.py):
# bookworm's postgresql-15 as a machine upgraded from Debian 12 keeps it, with nl2sql installed
# for it by install.sh --pg-config and a venv of its Python (3.11)
UPGRADE_ENV=""
if [ "$DISTRO" = bookworm ]; then
  say "PGXS and make for make installcheck (no older server beside PostgreSQL 15)"
  in_root "dpkg-query -W postgresql-server-dev-15 make >/dev/null 2>&1 || apt-get install -y -qq postgresql-server-dev-15 make >/dev/null"
else
UPGRADE_ENV="export NL2SQL_PG_UPGRADE_FROM=/usr/lib/postgresql/15/bin NL2SQL_PG_UPGRADE_VENV=/opt/nl2sql/venv-15;"
say "PostgreSQL 15 beside it (bookworm's packages; install.sh --pg-config)"
in_root "set -e
  if [ ! -f /etc/apt/sources.list.d/bookworm.list ]; then
    mirror=\$(awk '\$1 == \"deb\" && \$3 == \"$DISTRO\" {print \$2; exit}' /etc/apt/sources.list)
    echo \"deb \$mirror bookworm main\" > /etc/apt/sources.list.d/bookworm.list
    apt-get update -qq
  fi
  # bookworm's python3.11-venv needs a python3 older than 3.12: a venv without pip, and pip
  # put into it by the 3.13 venv's pip (pip --python)
  if [ ! -x /opt/nl2sql/venv-15/bin/pip ]; then
    apt-get install -y -qq python3.11 >/dev/null
    python3.11 -m venv --without-pip /opt/nl2sql/venv-15
    /opt/nl2sql/venv/bin/pip --python /opt/nl2sql/venv-15/bin/python install -q pip
  fi
  cd /src/nl2sql && NL2SQL_VENV=/opt/nl2sql/venv-15 bash scripts/install.sh --pg-config /usr/lib/postgresql/15/bin/pg_config
  # PGXS and make for tests/db/test_installcheck.py (make installcheck) on the release's server
  major=\$(\$(cat /opt/nl2sql/venv/share/nl2sql/pg_bindir)/pg_config --version | sed 's/[^0-9]*\([0-9]*\).*/\1/')
  dpkg-query -W postgresql-server-dev-\$major >/dev/null 2>&1 || apt-get install -y -qq postgresql-server-dev-\$major make >/dev/null"
fi
t35=$(now)

# 4b. The client's wheels and the wheels they depend on, for the release's Python (network here;
# cached in the root while pyproject.toml's dependencies are unchanged): the suite's
# tests/beside/test_wheel_user.py installs them as an unprivileged user, offline
say "the client's wheelhouse (scripts/build_wheels.sh --wheelhouse)"
in_root "cd /src/nl2sql && py=\$(/opt/nl2sql/venv/bin/python -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])')
  bash scripts/build_wheels.sh --out /tmp/nl2sql-dist --wheelhouse /var/cache/nl2sql/client-wheels/py\$py && rm -rf /tmp/nl2sql-dist"
t36=$(now)
fi
if [ "$SUITE" = 0 ]; then
  say "times: root $((t1 - t0)) s, install $((t2 - t1)) s, demo $((t3 - t2)) s, PostgreSQL 15 beside / PGXS $((t35 - t3)) s, client wheelhouse $((t36 - t35)) s; the suite left out (--no-suite)"
  exit 0
fi

# 5. The suite, loopback only --------------------------------------------------------------------
say "server: $(in_root 'pg=$(cat /opt/nl2sql/venv/share/nl2sql/pg_bindir); $pg/postgres --version; /opt/nl2sql/venv/bin/python --version')"
say "the suite (network namespace: loopback only)"
# the suites whose result can differ by distribution (docs/install.md "Which suites run where"):
# tests/db, tests/upgrade and tests/beside, unless tests or --unit are named. Not tests/unit: the
# host runs it; here the same modules run under this release's Python inside the server and in
# the clients of tests/beside
suites=(tests/db tests/upgrade tests/beside)
for a in "$@"; do
  case "$a" in tests/* | --unit) suites=() ;; esac
done
args=(${suites[@]+"${suites[@]}"} -q -p no:cacheprovider --ignore=tests/db/test_bench_smoke.py "$@")
set +e
# the llama.cpp suite runs in the host's suite (.ci/run), not here: its build is the host's; the
# benches' smoke runs (tests/db/test_bench_smoke.py) too: they check the developer's tools on
# the developer's machine, not what the release or major changes. One pytest process unless
# NL2SQL_ROOT_TEST_WORKERS names workers: three were tried (docs/install.md) and gained a minute
# (the suite is CPU-bound here) while a client's 2 s and 8 s claims missed under their load
in_root --no-net "$UPGRADE_ENV export NL2SQL_LLAMACPP=off NL2SQL_TEST_WORKERS=${NL2SQL_ROOT_TEST_WORKERS:-0};
  cd /src/nl2sql && bash scripts/test.sh $(printf '%q ' "${args[@]}")"
rc=$?
set -e
t4=$(now)
if [ "$NO_ONNX" = 1 ]; then steps="demo.sh (install + export + demo) $((t2 - t1)) s"; else steps="install $((t2 - t1)) s, demo $((t3 - t2)) s"; fi
say "times: root $((t1 - t0)) s, $steps, PostgreSQL 15 beside / PGXS $((t35 - t3)) s, client wheelhouse $((t36 - t35)) s, suite $((t4 - t36)) s; pytest exit $rc"
exit "$rc"
