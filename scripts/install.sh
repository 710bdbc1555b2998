#!/usr/bin/env bash
# Installs everything nl2sql needs on a Debian bookworm machine, as root:
#   PostgreSQL 15 + PL/Python + pg_cron + server headers (Debian packages),
#   pgvector 0.8 built from Debian trixie's source package,
#   a Python venv (Debian's system python3, the one PL/Python embeds) with the
#   project's Python packages and their dependencies (torch pinned to the CPU 2.13.0),
#   the extension's control/SQL files into PostgreSQL's extension directory.
# Safe to run twice: each step is skipped when already done.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
export DEBIAN_FRONTEND=noninteractive

log() { printf '\n==> %s\n' "$*"; }
# pip warns once per package about index locations of this machine's pip config that do not
# exist; keep everything else (errors included).
quiet_pip() { grep -v "is ignored: it is neither a file nor a directory" || true; }

if [ "$(id -u)" != 0 ]; then
  echo "install.sh: run as root (it installs Debian packages and PostgreSQL extension files)" >&2
  exit 1
fi

# 1. Debian packages ---------------------------------------------------------
PKGS=(postgresql-15 postgresql-contrib postgresql-plpython3-15 postgresql-server-dev-15
      postgresql-15-cron python3-venv python3-dev build-essential dpkg-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  log "Debian packages already installed"
fi

# 2. pgvector 0.8 from Debian trixie's source package -------------------------
EXTDIR="$("$PG_CONFIG" --sharedir)/extension"
if [ ! -f "$EXTDIR/vector.control" ]; then
  log "building pgvector from Debian trixie's source package"
  # Mirror URI taken from this machine's own Debian sources (deb822 or one-line format).
  MIRROR="$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
  if [ -z "$MIRROR" ]; then
    MIRROR="$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
  fi
  [ -n "$MIRROR" ] || { echo "install.sh: no Debian mirror found in /etc/apt/sources.list*" >&2; exit 1; }
  SRCDIR="$(mktemp -d /tmp/nl2sql-apt.XXXXXX)"
  mkdir -p "$SRCDIR/lists/partial" "$SRCDIR/archives/partial"
  echo "deb-src [trusted=yes] $MIRROR trixie main" > "$SRCDIR/trixie-src.list"
  APT_OPTS=(-o Dir::Etc::SourceList="$SRCDIR/trixie-src.list" -o Dir::Etc::SourceParts=/dev/null
            -o Dir::State::Lists="$SRCDIR/lists" -o Dir::Cache::Archives="$SRCDIR/archives"
            -o APT::Sandbox::User=root)
  apt-get "${APT_OPTS[@]}" update -qq
  (cd "$SRCDIR" && apt-get "${APT_OPTS[@]}" source --download-only -qq pgvector && dpkg-source -x --no-check pgvector_*.dsc build >/dev/null)
  make -s -C "$SRCDIR/build" PG_CONFIG="$PG_CONFIG" >/dev/null
  make -s -C "$SRCDIR/build" PG_CONFIG="$PG_CONFIG" install >/dev/null
  rm -rf "$SRCDIR"
else
  log "pgvector already installed ($(grep default_version "$EXTDIR/vector.control"))"
fi

# 3. Python venv the server's PL/Python imports from ---------------------------
if [ ! -x "$NL2SQL_VENV/bin/python" ]; then
  log "creating venv $NL2SQL_VENV with Debian's /usr/bin/python3 (the interpreter PL/Python embeds)"
  mkdir -p "$(dirname "$NL2SQL_VENV")"
  /usr/bin/python3 -m venv "$NL2SQL_VENV"
fi
if ! "$NL2SQL_VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
  log "pip install torch==2.13.0 (CPU wheel)"
  "$NL2SQL_VENV/bin/pip" install -q torch==2.13.0 2>&1 | quiet_pip
fi
log "pip install the project (py_udf + indexer) and its dependencies"
"$NL2SQL_VENV/bin/pip" install -q "$ROOT[test]" 2>&1 | quiet_pip
log "exporting the embedding model for ONNX Runtime (once; checked against torch)"
HF_HUB_OFFLINE=1 "$NL2SQL_VENV/bin/python" -m nl2sql.embedding.encode --export-onnx 2>&1 \
  | grep -v -i -E "warn|^\s*$|is_causal|padding_length|opset9" || true
chmod -R o+rX "$(dirname "$NL2SQL_VENV")"

# 4. Extension files ----------------------------------------------------------
log "installing extension files into $EXTDIR"
"$NL2SQL_VENV/bin/python" "$ROOT/scripts/build_extension.py" --install "$EXTDIR"
log "install done: venv $NL2SQL_VENV"
