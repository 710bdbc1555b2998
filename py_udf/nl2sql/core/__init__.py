"""The core every stage uses: errors, the dataclasses between stages, settings, SQL through SPI,
stage timing, the schema catalog, name resolution, candidate parsing and
checks, secret redaction.
"""

__all__ = [
    "catalog",
    "errors",
    "names",
    "redaction",
    "settings",
    "spi",
    "sqlcheck",
    "timing",
    "types",
]
