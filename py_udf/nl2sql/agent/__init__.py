"""The agent door: what nl2sql hands a reader that is a model (``view``: the asking role's value
rules on rows, SQL, samples and errors), the agent's own SQL run as a candidate is (``execute``)
and what agents look up before they write (``lookup``: cell values, one table's description)
(docs/mcp.md)."""

__all__ = [
    "execute",
    "lookup",
    "view",
]
