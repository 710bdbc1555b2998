"""``python -m nl2sql_indexer.mcp``: the same as the ``nl2sql-mcp`` command."""

import sys

from . import main

sys.exit(main())
