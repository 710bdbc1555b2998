"""Unit tests of nl2sql.net: every outbound path under one deadline and under cancel."""
