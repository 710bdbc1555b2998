"""The model boundary: configured models, prompts, the gate, the OpenAI-compatible calls."""

__all__ = [
    "config",
    "gate",
    "llm",
    "openai_call",
    "probe",
    "prompts",
]
