"""The semantic model: logical tables, their dimensions, facts, metrics and filters, and the
relationships between tables (docs/semantic-model.md); read by the question's stages
(``model``), imported from and exported to Cortex Analyst YAML (``cortex``)."""

__all__ = [
    "cortex",
    "model",
]
