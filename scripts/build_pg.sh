#!/usr/bin/env bash
# A PostgreSQL major Debian ships no binary package for here (18, 19), built once per machine from
# Debian's source packages, with pgvector and pg_cron built against it:
#   bash scripts/build_pg.sh MAJOR
# As root. It builds inside the Debian 13 root that scripts/distro_test.sh caches
# ($NL2SQL_DISTRO_CACHE/trixie/root, default /var/cache/nl2sql; run `bash scripts/test.sh --distro
# trixie` first when it is absent): there Python is 3.13 and PostgreSQL 17 is installed, so
# pg_upgrade 17 -> 18 and 18 -> 19 run between real servers, and this machine's own apt state and
# PostgreSQL 15 are left alone. The server goes to /var/cache/nl2sql/pg/MAJOR inside that root
# (upstream's ./configure --with-python --with-icu, no docs, no regression run; of contrib only
# what nl2sql and its tests use: pg_trgm, pg_stat_statements, dblink, auto_explain). Sources come
# from a temporary deb-src list (Debian sid and experimental) with its own apt lists and cache,
# apt-get source --download-only: the upstream tarball (the .orig) is what is built, Debian's
# packaging patches are not applied. Each tarball
# is kept in $NL2SQL_CACHE/pg-src (default /var/cache/nl2sql/pg-src) so a rebuild needs no network;
# a source the archive does not serve is fetched from its pool path at the pinned version below.
# Cached: a second run with the same versions does nothing. Exit 3 (not 1) when the server's
# source cannot be had (the reason printed): callers report that major as blocked.
set -euo pipefail
MAJOR="${1:?usage: build_pg.sh MAJOR (18 or later)}"
[ "$(id -u)" = 0 ] || { echo "build_pg.sh: run as root (chroot)" >&2; exit 1; }
R="${NL2SQL_DISTRO_CACHE:-/var/cache/nl2sql}/trixie/root"
SRC_CACHE="${NL2SQL_CACHE:-/var/cache/nl2sql}/pg-src"
PREFIX="/var/cache/nl2sql/pg/$MAJOR"   # inside the root
PGVECTOR_PIN=0.8.6   # fetched from the pool when apt's current one is not served
PG_CRON_PIN=1.6.7
# the mirror: this machine's own apt source (as install.sh takes it), else NL2SQL_DEBIAN_MIRROR
MIRROR="${NL2SQL_DEBIAN_MIRROR:-$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)}"
[ -n "$MIRROR" ] || MIRROR="$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
[ -n "$MIRROR" ] || { echo "build_pg.sh: no Debian mirror in this machine's apt sources; set NL2SQL_DEBIAN_MIRROR" >&2; exit 1; }
[ -f "$R/.nl2sql-root" ] || { echo "build_pg.sh: no Debian 13 root at $R: run bash scripts/test.sh --distro trixie first" >&2; exit 1; }
say() { printf '=== [build_pg %s] %s\n' "$MAJOR" "$*"; }
in_root() {
  chroot "$R" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$1"
}

# 1. The sources (cached) -------------------------------------------------------------------------
mkdir -p "$SRC_CACHE"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/lists/partial" "$T/cache/archives/partial"
printf 'deb-src [trusted=yes] %s %s main\n' "$MIRROR" sid "$MIRROR" experimental > "$T/src.list"
APT=(-o "Dir::Etc::SourceList=$T/src.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$T/lists" -o "Dir::Cache=$T/cache" -qq)
# get PACKAGE PIN: the newest .orig of PACKAGE into $SRC_CACHE (apt first, else the pool at PIN);
# prints the tarball's path
get() {
  local pkg="$1" pin="$2" f
  f="$(ls -t "$SRC_CACHE/${pkg}"_*.orig.tar.* 2>/dev/null | head -n1 || true)"
  if [ -z "$f" ]; then
    [ -f "$T/lists/.updated" ] || { apt-get "${APT[@]}" update >/dev/null 2>&1 || true; touch "$T/lists/.updated"; }
    (cd "$T" && apt-get "${APT[@]}" source --download-only "$pkg" >"$T/apt-$pkg.log" 2>&1) || true
    f="$(ls "$T/${pkg}"_*.orig.tar.* 2>/dev/null | head -n1 || true)"
    if [ -z "$f" ] && [ -n "$pin" ]; then
      local d="${pkg:0:1}/$pkg" ext
      for ext in gz xz bz2; do
        curl -sf -o "$T/${pkg}_$pin.orig.tar.$ext" "$MIRROR/pool/main/$d/${pkg}_$pin.orig.tar.$ext" \
          && { f="$T/${pkg}_$pin.orig.tar.$ext"; break; }
        rm -f "$T/${pkg}_$pin.orig.tar.$ext"
      done
    fi
    [ -n "$f" ] || return 1
    cp "$f" "$SRC_CACHE/" && f="$SRC_CACHE/$(basename "$f")"
  fi
  echo "$f"
}
PG_TAR="$(get "postgresql-$MAJOR" "")" || {
  echo "build_pg.sh: BLOCKED: no source of postgresql-$MAJOR could be had (apt-get source from Debian sid/experimental: $(grep -m1 -E '^E:' "$T/apt-postgresql-$MAJOR.log" 2>/dev/null || echo 'no answer')); PostgreSQL $MAJOR is not built" >&2
  exit 3; }
VEC_TAR="$(get pgvector "$PGVECTOR_PIN")" || { echo "build_pg.sh: no pgvector source (apt or pool $PGVECTOR_PIN)" >&2; exit 1; }
CRON_TAR="$(get pg-cron "$PG_CRON_PIN")" || CRON_TAR=""
CONTRIB="pg_trgm pg_stat_statements dblink auto_explain"
STAMP="$(basename "$PG_TAR") $(basename "$VEC_TAR") $(basename "${CRON_TAR:-no-pg-cron}") contrib: $CONTRIB"
if [ "$(cat "$R$PREFIX/.nl2sql-built" 2>/dev/null)" = "$STAMP" ]; then
  say "cached: $R$PREFIX ($STAMP)"; exit 0
fi

# 2. Build tools in the root (bison and flex: release tarballs ship no generated parser since 17)
in_root "dpkg-query -W bison flex libicu-dev libreadline-dev zlib1g-dev python3-dev pkg-config make gcc >/dev/null 2>&1 \
  || { apt-get update -qq && apt-get install -y -qq --no-install-recommends bison flex libicu-dev libreadline-dev zlib1g-dev python3-dev pkg-config make gcc perl >/dev/null; }"

# 3. The server, contrib's modules, pgvector, pg_cron --------------------------------------------
B="/var/tmp/nl2sql-build-pg$MAJOR"   # inside the root
rm -rf "$R$B" "$R$PREFIX"
mkdir -p "$R$B"
for t in "$PG_TAR" "$VEC_TAR" $CRON_TAR; do cp "$t" "$R$B/"; done
say "building $STAMP into $PREFIX (in $R)"
t0=$(date +%s)
in_root "set -e; cd $B
  for t in *.orig.tar.*; do mkdir \"\${t%%_*}\" && tar -xf \"\$t\" -C \"\${t%%_*}\" --strip-components=1; done
  cd postgresql-$MAJOR
  PYTHON=/usr/bin/python3 ./configure -q --prefix=$PREFIX --with-python --with-icu --without-llvm >../configure.log 2>&1 \
    || { tail -30 ../configure.log; exit 1; }
  make -s -j2 >../make.log 2>&1 || { tail -40 ../make.log; exit 1; }
  make -s install >>../make.log 2>&1
  for c in $CONTRIB; do make -s -C contrib/\$c install >>../make.log 2>&1; done
  for x in pgvector pg-cron; do
    [ -d ../\$x ] || continue
    make -s -C ../\$x PG_CONFIG=$PREFIX/bin/pg_config OPTFLAGS= >../\$x.log 2>&1 || { tail -30 ../\$x.log; exit 1; }
    make -s -C ../\$x PG_CONFIG=$PREFIX/bin/pg_config install >>../\$x.log 2>&1
  done"
echo "$STAMP" > "$R$PREFIX/.nl2sql-built"
rm -rf "$R$B"
say "built in $(( $(date +%s) - t0 )) s: $(in_root "$PREFIX/bin/postgres --version")"
