"""A private local model as a service of the database's machine: llama.cpp's ``llama-server``
(built once per CPU) serving a Qwen2.5-Coder GGUF under supervisord, registered with
``nl2sql.add_model`` (``nl2sql model …``; docs/models.md, "A private local model")."""

from .catalog import DEFAULT, MODELS, GgufModel, resolve
from .manage import Installed, install, register, start, status, stop

__all__ = [
    "DEFAULT",
    "MODELS",
    "GgufModel",
    "Installed",
    "install",
    "register",
    "resolve",
    "start",
    "status",
    "stop",
]
