"""For demos and tests only, never for production: the demo (``python -m
nl2sql_indexer.dev.demo``, what ``scripts/demo.sh`` runs), its concert database and questions
(``demo_data``), and the scripted OpenAI-compatible server (``loopback``, the
``nl2sql-loopback`` command) whose answers are written ahead of time by a person or a script,
never a model's. The tests, the benchmarks and the demo start it on 127.0.0.1.

Modules: ``demo``, ``demo_data``, ``loopback`` (with its private ``_loopback_script``: rules,
replays and replies; ``_loopback_http``: the HTTP server and handler).
"""

__all__ = ["demo", "demo_data", "loopback"]
