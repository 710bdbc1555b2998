"""The seam beside the database (``nl2sql.client._plpy``): parameters as PL/Python converts
them for their declared types, PostgreSQL's literal quoting, psycopg's errors as ``SPIError``
subclasses with their SQLSTATE."""

from __future__ import annotations

import psycopg
import pytest

from nl2sql.client import _plpy as P

TEXT, BOOL, BYTEA, TEXT_ARRAY = 25, 16, 17, 1009


@pytest.mark.parametrize(
    "value,oid,is_array,expected",
    [
        (True, BOOL, False, "t"),
        (0, BOOL, False, "f"),
        (b"\x00\xff", BYTEA, False, "\\x00ff"),
        (["a", None, 'say "hi"', "back\\slash"], TEXT_ARRAY, True,
         '{"a",NULL,"say \\"hi\\"","back\\\\slash"}'),
        ([["a"], ["b"]], TEXT_ARRAY, True, '{{"a"},{"b"}}'),
        ("{x}", TEXT_ARRAY, True, "{x}"),  # already an array literal
        ([0.5, 1.0], 0, False, "[0.5, 1.0]"),  # a list for a vector: its text, as PL/Python
        (1.5, TEXT, False, "1.5"),
    ],
)  # fmt: skip
def test_parameters_are_converted_as_plpython_converts_them(value, oid, is_array, expected):
    assert P.as_text(value, oid, is_array) == expected


@pytest.mark.parametrize(
    "text,expected",
    [("it's", "'it''s'"), ("a\\b", "E'a\\\\b'"), ("", "''")],
)
def test_quote_literal_is_postgresqls(text, expected):
    assert P.quote_literal(text) == expected
    assert P.Plpy.quote_nullable(None) == "NULL"


def test_psycopg_errors_become_spi_errors_with_their_sqlstate():
    err = P.spi_error(psycopg.errors.QueryCanceled("canceling statement due to user request"))
    assert isinstance(err, P.SPIError) and isinstance(err, P.spiexceptions.QueryCanceled)
    assert err.sqlstate == "57014" and err.spidata[0] == "57014"
    assert not isinstance(err, P.Error)  # as in PL/Python: SPIError is no plpy.Error
    plain = P.spi_error(psycopg.OperationalError("connection lost"))
    assert type(plain) is P.SPIError and plain.sqlstate is None


def test_error_raises_with_its_diagnostics():
    with pytest.raises(P.Error) as e:
        P.Plpy.error(None, "nl2sql: no", hint="do this", sqlstate="42501")
    assert (str(e.value), e.value.hint, e.value.sqlstate) == ("nl2sql: no", "do this", "42501")
