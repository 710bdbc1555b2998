"""The model boundary: the configured models, prompts, the gate every text bound for a model
passes, and the OpenAI-compatible calls.
"""

__all__ = [
    "config",
    "gate",
    "llm",
    "openai_call",
    "prompts",
]
