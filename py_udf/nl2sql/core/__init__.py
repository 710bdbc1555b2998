"""The core every stage uses: errors, stage dataclasses, settings, SPI, timing, the schema
catalog, name resolution, candidate checks, redaction, the query log's writer."""

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
