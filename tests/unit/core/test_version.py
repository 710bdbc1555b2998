"""The version check of an entry point: the extension's version, or, where nl2sql is installed
beside the database (issue 32: no extension, schema nl2sql from ``nl2sql install``), the
version that install recorded."""

from __future__ import annotations

import pytest

from nl2sql import __version__, version
from nl2sql.core import spi
from nl2sql.core.errors import VersionMismatch


class FakePlpy:
    """Answers the version check's two statements from what it was given."""

    def __init__(self, ext: str | None, note: str | None = None):
        self.ext, self.note = ext, note
        self.asked: list[str] = []

    def prepare(self, sql, types):
        return sql

    def execute(self, sql, args=()):
        self.asked.append(sql)
        return [{"ext": self.ext, "note": self.note}]


@pytest.fixture(autouse=True)
def _fresh_plans(monkeypatch):
    monkeypatch.setattr(spi, "_PLANS", {})


def test_the_extensions_version_is_checked():
    version.check(FakePlpy(__version__))
    with pytest.raises(VersionMismatch) as e:
        version.check(FakePlpy("0.0.1"))
    assert "ALTER EXTENSION nl2sql UPDATE" in e.value.hint


def test_nothing_installed_says_how_to_install():
    with pytest.raises(VersionMismatch) as e:
        version.check(FakePlpy(None, "some schema of the same name"))
    assert "CREATE EXTENSION" in e.value.hint


def beside(v: str) -> str:
    return f"nl2sql {v}, installed beside the database (nl2sql install)"


def test_beside_the_database_the_recorded_version_is_checked():
    same = FakePlpy(None, beside(__version__))
    version.check(same)
    version.check(same)  # once per plpy: not asked again
    assert len(same.asked) == 1
    with pytest.raises(VersionMismatch) as e:
        version.check(FakePlpy(None, beside("0.0.1")))
    assert str(e.value).startswith("nl2sql") and "nl2sql upgrade" in e.value.hint
    assert version.beside_version(beside("1.2.3")) == "1.2.3"
