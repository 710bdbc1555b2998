"""The stages of one question, as ``pipeline.STAGES`` lists them: the run object every stage
reads and writes (``run``), the stages by phase (``start``, ``before_models``, ``presql``,
``finsql``, ``choose``) and the trace rendered from the run at the end (``trace``).
"""

__all__ = [
    "before_models",
    "choose",
    "finsql",
    "presql",
    "run",
    "start",
    "trace",
]
