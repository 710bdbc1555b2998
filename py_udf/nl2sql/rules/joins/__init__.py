"""Repair rules on how a query relates its tables, as the schema's foreign keys and columns show:
compared off the one key that links them, a key's column joined to a table it does not refer
to, a join that was not needed, an inner join held NULL for a negated question, an IN subquery
selecting the outer query's column. One rule a module; ``rules.RULES`` orders them."""

__all__ = ["anti_joined", "bridged", "off_key_link", "outer_bound", "rehomed", "unjoined"]
