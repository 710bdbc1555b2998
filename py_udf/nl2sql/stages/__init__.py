"""The stages of one question, as ``pipeline.STAGES`` lists them, and the run object."""

__all__ = [
    "before_models",
    "choose",
    "finsql",
    "presql",
    "run",
    "start",
    "trace",
]
