"""scripts/install.sh's checks (``--check``: nothing installed) against a fake server in a temp
dir: a pg_config script naming the major and folders, control files with the versions to check,
a copy of this machine's plpython3.so (so ``ldd`` names the Python it embeds). Each refusal names
the version found, the one needed and how to get it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install.sh"
# a real plpython3.so of this machine's server (any major): ldd reads its libpython
PLPYTHON = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/lib/plpython3.so"))), None)


def fake_server(
    tmp: Path,
    version: str,
    plpython: bool = True,
    pgvector: str | None = "0.8.1",
    pg_cron: str | None = None,
) -> Path:
    """A pg_config for ``version`` with its lib/ and share/extension/ under ``tmp``.

    Returns:
        The path of the fake pg_config.
    """
    for d in ("bin", "lib", "share/extension"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    cfg = tmp / "bin" / "pg_config"
    cfg.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  --version) echo "PostgreSQL {version}";;\n'
        f'  --pkglibdir) echo "{tmp}/lib";;\n'
        f'  --sharedir) echo "{tmp}/share";;\n'
        f'  --bindir) echo "{tmp}/bin";;\n'
        "esac\n"
    )
    cfg.chmod(0o755)
    if plpython:
        if PLPYTHON is None:
            pytest.skip("no plpython3.so on this machine to copy")
        (tmp / "lib" / "plpython3.so").write_bytes(PLPYTHON.read_bytes())
    for name, v in (("vector", pgvector), ("pg_cron", pg_cron)):
        if v is not None:
            (tmp / "share/extension" / f"{name}.control").write_text(
                f"comment = 'fake'\ndefault_version = '{v}'\n"
            )
    return cfg


def check(cfg: Path, tmp: Path, venv: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NL2SQL_VENV": str(venv or tmp / "no-venv"), "PG_CONFIG": ""}
    return subprocess.run(
        ["bash", str(INSTALL), "--check", "--pg-config", str(cfg)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def not_refused_as(r: subprocess.CompletedProcess, *parts: str) -> list[str]:
    """What a refusal lacks: the exit status 1, and each of ``parts`` in its message."""
    lacks = [] if r.returncode == 1 else [f"exit status {r.returncode}, not 1"]
    return lacks + [p for p in parts if p not in r.stderr]


def test_a_server_with_what_nl2sql_needs_passes_and_names_its_python(tmp_path):
    r = check(fake_server(tmp_path, "17.6", pgvector="0.8.0", pg_cron="1.6"), tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PostgreSQL 17" in r.stdout
    assert "PL/Python embeds Python 3." in r.stdout
    assert "check done" in r.stdout


def test_missing_plpython_is_refused_with_how_to_get_it(tmp_path):
    r = check(fake_server(tmp_path, "17.6", plpython=False), tmp_path)
    assert not not_refused_as(
        r, "plpython3u is missing", "found: none", "PostgreSQL 17", "--with-python"
    ), r.stdout + r.stderr


def test_too_old_pgvector_is_refused_naming_found_and_needed(tmp_path):
    r = check(fake_server(tmp_path, "17.6", pgvector="0.7.4"), tmp_path)
    assert not not_refused_as(
        r, "pgvector 0.7.4 found", "needs pgvector >= 0.8.0", "git clone --branch v0.8.0"
    ), r.stdout + r.stderr


def test_pgvector_080_is_too_old_on_18(tmp_path):
    r = check(fake_server(tmp_path, "18.1", pgvector="0.8.0"), tmp_path)
    assert not not_refused_as(r, "pgvector 0.8.0 found", "PostgreSQL 18 needs pgvector >= 0.8.1"), (
        r.stdout + r.stderr
    )


def test_absent_pgvector_outside_debian_layout_is_refused(tmp_path):
    r = check(fake_server(tmp_path, "16.4", pgvector=None), tmp_path)
    assert not not_refused_as(
        r, "pgvector is not installed (found: none; needed: >= 0.8.0", "make PG_CONFIG="
    ), r.stdout + r.stderr


def test_too_old_pg_cron_on_18_is_refused_and_absent_is_only_a_note(tmp_path):
    r = check(fake_server(tmp_path, "18.1", pg_cron="1.5"), tmp_path)
    assert not not_refused_as(
        r, "pg_cron 1.5 found", "needs pg_cron >= 1.6.6", "postgresql-18-cron"
    ), r.stdout + r.stderr
    r = check(fake_server(tmp_path / "b", "18.1"), tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert "pg_cron is not installed for PostgreSQL 18 (optional" in r.stderr


def test_a_major_before_15_is_refused(tmp_path):
    r = check(fake_server(tmp_path, "14.12"), tmp_path)
    assert not not_refused_as(r, "PostgreSQL 14 found", "needs PostgreSQL 15 or later"), (
        r.stdout + r.stderr
    )


def test_a_venv_of_another_python_is_refused(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").write_text("#!/bin/sh\necho 3.9\n")
    (venv / "bin/python").chmod(0o755)
    r = check(fake_server(tmp_path, "17.6"), tmp_path, venv)
    assert not not_refused_as(
        r, "the venv", "has Python 3.9", "PL/Python embeds Python 3.", "remove the venv"
    ), r.stdout + r.stderr
