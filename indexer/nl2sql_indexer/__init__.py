"""nl2sql indexer CLI."""
