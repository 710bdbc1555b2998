"""The network floor: every read nl2sql makes over a socket, under one overall deadline and under
cancel (docs/internals/net.md): ``deadline`` (the rule and the wait), ``fetch`` (HTTP requests
with the standard library, their sockets watched by the deadline)."""

__all__ = ["deadline", "fetch"]
