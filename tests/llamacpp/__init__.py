"""The llama.cpp suite: llama.cpp's llama-server with Gemma 3 270M (conftest.py starts it): the
server's protocol as nl2sql relies on it (test_protocol.py) and nl2sql asked through it on the
demo database (test_nl2sql.py, in the cluster of tests/conftest.py)."""
