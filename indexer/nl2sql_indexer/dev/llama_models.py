"""Real instruct code models for the llama.cpp suite and ``bench/live.py``, by the names the
server answers under (``qwen2.5-coder-0.5b-instruct``, ``qwen2.5-coder-1.5b-instruct``).

The models, their pins and how their files are fetched and checked are the product's own
(``nl2sql.client.local_model``: ``nl2sql model install`` serves the same files); this module
keeps the names the tests and benches use.

    python -m nl2sql_indexer.dev.llama_models fetch [NAME ...]   # prints each GGUF's path
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nl2sql.client.local_model._fetch import fetch_catalog
from nl2sql.client.local_model._service import server_flags
from nl2sql.client.local_model.catalog import MODELS, GgufModel

__all__ = ["INSTRUCT", "GgufModel", "fetch", "model_path", "server_flags"]

INSTRUCT: dict[str, GgufModel] = {m.alias: m for m in MODELS.values()}


def _cache() -> Path:
    return Path(os.environ.get("NL2SQL_CACHE", "/var/cache/nl2sql"))


def model_path(name: str, cache: Path | None = None) -> Path:
    """Where the GGUF file of ``INSTRUCT[name]`` lies once fetched (it may not exist yet).

    Raises:
        KeyError: ``name`` is not one of :data:`INSTRUCT`.
    """
    return (cache or _cache()) / "models" / INSTRUCT[name].file


def fetch(name: str, cache: Path | None = None) -> Path:
    """The GGUF file of ``INSTRUCT[name]``, downloaded and assembled once into the cache
    (``local_model._fetch.fetch_catalog``, without progress bars).

    Raises:
        KeyError: an unknown name. LocalModelError: a download or the check failed.
    """
    cache = cache or _cache()
    return fetch_catalog(INSTRUCT[name], cache / "models", cache, quiet=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "fetch":
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for name in args[1:] or list(INSTRUCT):
        if name not in INSTRUCT:
            print(f"unknown model {name!r}; one of: {', '.join(INSTRUCT)}", file=sys.stderr)
            return 2
        print(fetch(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
