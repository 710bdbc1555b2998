"""A spec drawn as an image with vl-convert (Vega-Lite → PNG or SVG without a browser); nothing
is fetched: a spec's data is inline (``allowed_base_urls`` empty). Imported only where an
image is wanted (the CLI, nl2sql-mcp, the Python API), never on a server backend's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import vl_convert as vlc

from ..core.errors import QuestionError

FORMATS = ("png", "svg")
PNG_SCALE = 2.0
"""Pixels per Vega-Lite unit in a PNG (2: sharp on a high-density screen)."""


def to_png(spec: dict[str, Any], scale: float = PNG_SCALE) -> bytes:
    """The spec drawn as a PNG.

    Args:
        spec: a Vega-Lite v5 spec. scale: pixels per unit.

    Returns:
        The PNG's bytes.
    """
    return vlc.vegalite_to_png(spec, scale=scale, allowed_base_urls=[])


def to_svg(spec: dict[str, Any]) -> str:
    """The spec drawn as SVG.

    Args:
        spec: a Vega-Lite v5 spec.

    Returns:
        The SVG text.
    """
    return vlc.vegalite_to_svg(spec, allowed_base_urls=[])


def image_format(path: str | Path) -> str:
    """The image format a file name asks for.

    Args:
        path: the file's path.

    Returns:
        ``png`` or ``svg``.

    Raises:
        QuestionError: another suffix.
    """
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise QuestionError(f"nl2sql: a chart is written as .png or .svg, not {Path(path).name!r}")
    return fmt


def write(spec: dict[str, Any], path: str | Path) -> Path:
    """Draw the spec into a file, PNG or SVG by its suffix.

    Args:
        spec: a Vega-Lite v5 spec. path: the file.

    Returns:
        The path written.
    """
    path = Path(path)
    if image_format(path) == "png":
        path.write_bytes(to_png(spec))
    else:
        path.write_text(to_svg(spec), encoding="utf-8")
    return path
