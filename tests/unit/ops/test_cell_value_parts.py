"""``_cell_values.in_part``: the parts of a table indexed by several workers
(sql/incremental/027-reindex-parts.sql) split its strings without overlap or gap."""

from __future__ import annotations

import random
import string
import subprocess
import sys

import pytest

from nl2sql.ops._cell_values import WHOLE, in_part

STRINGS = [
    "".join(random.Random(k).choices(string.ascii_letters + " éß中\u00a0", k=1 + k % 17))
    for k in range(2000)
] + ["", "a\udcffb"]  # an empty string and a lone surrogate (PL/Python can hand either over)


@pytest.mark.parametrize("n", [2, 3, 8])
def test_every_string_in_exactly_one_part(n):
    counts = [sum(in_part(s, (k, n)) for k in range(n)) for s in STRINGS]
    assert counts == [1] * len(STRINGS)
    shares = [sum(in_part(s, (k, n)) for s in STRINGS) for k in range(n)]
    assert min(shares) > len(STRINGS) / n * 0.8  # each part a fair share


def test_the_whole_table_is_one_part():
    assert all(in_part(s, WHOLE) for s in STRINGS)


def test_a_string_falls_in_the_same_part_in_another_process():
    """Workers are separate processes: the split must not depend on ``hash``'s random seed."""
    code = (
        "import sys; sys.path[:0] = sys.argv[1:2]; from nl2sql.ops._cell_values import in_part; "
        "print(''.join(str(k) for s in ['Valletta', 'Kotor', 'Piraeus', 'São Paulo'] "
        "for k in range(5) if in_part(s, (k, 5))))"
    )
    path = sys.modules["nl2sql"].__path__[0].rsplit("/", 1)[0]
    runs = {
        subprocess.run(
            [sys.executable, "-c", code, path],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    here = "".join(
        str(k)
        for s in ["Valletta", "Kotor", "Piraeus", "São Paulo"]
        for k in range(5)
        if in_part(s, (k, 5))
    )
    assert runs == {here + "\n"}
