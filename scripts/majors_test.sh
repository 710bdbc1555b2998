#!/usr/bin/env bash
# The majors Debian 13 ships no binary for, each built from Debian's source (scripts/build_pg.sh,
# cached) and tested in the Debian 13 root of scripts/distro_test.sh (run after it in .ci/run):
#   bash scripts/majors_test.sh [MAJOR...]     (default: 18 19)
# As root. For each major: nl2sql installed with scripts/install.sh --pg-config into a venv of its
# own (/opt/nl2sql/venv-MAJOR, Python 3.13), the demo through the extension and beside the
# database, then the suites that differ by major — tests/db, tests/upgrade (pg_upgrade from the
# previous major: 17 -> 18 from Debian 13's postgresql-17, 18 -> 19 from the built 18) and
# tests/beside — with loopback only. tests/unit and tests/llamacpp do not depend on the server's
# major and run once (host and Debian 13). A major whose source cannot be had is reported
# BLOCKED with why and does not fail the run; a failing build or suite does. Prints each step's time.
# NL2SQL_MAJORS_TESTS: other pytest arguments instead of the three suites (a test file, -k ...).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ "$(id -u)" = 0 ] || { echo "majors_test.sh: run as root (chroot)" >&2; exit 1; }
[ $# -gt 0 ] || set -- 18 19
R="${NL2SQL_DISTRO_CACHE:-/var/cache/nl2sql}/trixie/root"
[ -f "$R/.nl2sql-root" ] || { echo "majors_test.sh: no Debian 13 root at $R: run bash scripts/test.sh --distro trixie first" >&2; exit 1; }
SRC=/src/nl2sql-majors   # inside the root (distro_test.sh's /src/nl2sql is left to it)
now() { date +%s; }
say() { printf '\n=== [majors] %s\n' "$*"; }
. "$ROOT/scripts/_in_root.sh"  # in_root [--no-net] COMMAND

# This checkout (its history too: the upgrade tests need the released commits) into the root
rm -rf "${R:?}$SRC"
mkdir -p "$R/src"
git clone -q --no-checkout "$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir)" "$R$SRC"
git -C "$R$SRC" checkout -q "$(git -C "$ROOT" rev-parse HEAD)" 2>/dev/null
git -C "$ROOT" ls-files -co --exclude-standard -z \
  | (cd "$ROOT" && tar --null -T - -cf - 2>/dev/null) | tar -C "$R$SRC" -xf -
cp /etc/resolv.conf "$R/etc/resolv.conf"
# the previous major's server and venv, for pg_upgrade: Debian 13's 17 with /opt/nl2sql/venv
# (distro_test.sh installed it; installed here when absent)
in_root "[ -x /opt/nl2sql/venv/bin/python ] && [ -f /opt/nl2sql/venv/share/nl2sql/pg_bindir ] \
  || (cd $SRC && bash scripts/install.sh)"
prev_bin=/usr/lib/postgresql/17/bin prev_venv=/opt/nl2sql/venv
summary=()
fail=0
for M in "$@"; do
  t0=$(now)
  say "PostgreSQL $M: the server, pgvector and pg_cron (scripts/build_pg.sh, cached)"
  set +e; bash "$ROOT/scripts/build_pg.sh" "$M"; rc=$?; set -e
  t1=$(now)
  if [ "$rc" = 3 ]; then summary+=("$M: BLOCKED (its source cannot be had; see above), build $((t1 - t0)) s"); continue; fi
  [ "$rc" = 0 ] || { summary+=("$M: the build FAILED (exit $rc)"); fail=1; continue; }
  bin=/var/cache/nl2sql/pg/$M/bin venv=/opt/nl2sql/venv-$M
  say "PostgreSQL $M: scripts/install.sh --pg-config $bin/pg_config (venv $venv)"
  in_root "cd $SRC && NL2SQL_VENV=$venv bash scripts/install.sh --pg-config $bin/pg_config"
  t2=$(now)
  say "PostgreSQL $M: the demo, through the extension and beside the database"
  in_root "cd $SRC && export NL2SQL_VENV=$venv && $venv/bin/python -m nl2sql_indexer.dev.demo --scripted \
    && $venv/bin/python -m nl2sql_indexer.dev.demo --beside --scripted; rc=\$?; bash scripts/stop.sh --delete; exit \$rc"
  t3=$(now)
  say "PostgreSQL $M: $(in_root "$bin/postgres --version"); tests/db tests/upgrade tests/beside, pg_upgrade from $prev_bin"
  set +e
  # one pytest process (NL2SQL_ROOT_TEST_WORKERS: workers), without the benches' smoke runs,
  # as scripts/distro_test.sh says
  in_root --no-net "export NL2SQL_VENV=$venv NL2SQL_LLAMACPP=off NL2SQL_PG_UPGRADE_FROM=$prev_bin NL2SQL_PG_UPGRADE_VENV=$prev_venv NL2SQL_TEST_WORKERS=${NL2SQL_ROOT_TEST_WORKERS:-0}
    cd $SRC && bash scripts/test.sh ${NL2SQL_MAJORS_TESTS:-tests/db tests/upgrade tests/beside --ignore=tests/db/test_bench_smoke.py} -q -p no:cacheprovider"
  rc=$?
  set -e
  t4=$(now)
  [ "$rc" = 0 ] || fail=1
  summary+=("$M: build $((t1 - t0)) s, install $((t2 - t1)) s, demo $((t3 - t2)) s, suites $((t4 - t3)) s; pytest exit $rc")
  prev_bin=$bin prev_venv=$venv
done
say "times and results:"
printf '  %s\n' "${summary[@]}"
exit "$fail"
