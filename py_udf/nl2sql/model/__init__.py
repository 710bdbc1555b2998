"""The model boundary: prompts, the gate every text bound for a model passes, and the
OpenAI-compatible calls.
"""

__all__ = [
    "gate",
    "llm",
    "prompts",
]
