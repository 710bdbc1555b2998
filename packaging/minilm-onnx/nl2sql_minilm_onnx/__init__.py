"""all-MiniLM-L6-v2's ONNX files, tokenizer and license for the nl2sql client: data only; nl2sql
finds this directory by importing the package (nl2sql.embedding.encode)."""

from pathlib import Path

FILES = Path(__file__).resolve().parent
