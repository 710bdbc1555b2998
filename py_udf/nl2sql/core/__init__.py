"""The core every stage uses: errors, the dataclasses between stages, settings, SQL through SPI,
stage timing, the schema catalog, name resolution, candidate parsing and
checks, secret redaction, the query log's writer.
"""

__all__ = [
    "catalog",
    "errors",
    "names",
    "query_log",
    "redaction",
    "settings",
    "settings_export",
    "spi",
    "sqlcheck",
    "timing",
    "types",
]
