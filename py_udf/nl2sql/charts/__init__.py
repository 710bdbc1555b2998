"""Charts of an answer (docs/charts.md): the result's shape (``shape``), the chart chosen by
rule (``choice``), dates binned and long tails folded (``binning``), the Vega-Lite v5 spec
(``spec``), and the image drawn from it (``render``, imported only where an image is wanted)."""

__all__ = ["binning", "choice", "render", "shape", "spec"]
