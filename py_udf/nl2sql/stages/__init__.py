"""The stages of one question, as ``pipeline.STAGES`` lists them, the run object, and what
retrieval gathers for them and the prompts show of it (``gather``, ``prompt_parts``)."""

__all__ = [
    "before_models",
    "choose",
    "finsql",
    "gather",
    "judge",
    "presql",
    "prompt_parts",
    "run",
    "start",
    "trace",
]
