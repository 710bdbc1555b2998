"""The core every stage uses: errors, the dataclasses between stages, settings, SQL through SPI,
stage timing, the schema catalog, name resolution, candidate parsing and
checks, secret redaction.
"""

__all__ = [
    "catalog",
    "errors",
    "names",
    "redaction",
    "setting_declaration",
    "settings",
    "settings_export",
    "spi",
    "sqlcheck",
    "timing",
    "types",
]
