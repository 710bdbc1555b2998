"""The extension's build (scripts/build_extension.py): versions agree, released files stay as
released, the committed install script is what the sources build, upgrade scripts exist for
every release. No database needed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location(
    "build_extension", ROOT / "scripts/build_extension.py"
)
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)


def test_package_control_file_and_pyproject_agree_on_the_version():
    import nl2sql

    control = (ROOT / "extension/nl2sql.control").read_text()
    assert f"default_version = '{nl2sql.__version__}'" in control
    assert build.version() == nl2sql.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"]["attr"] == "nl2sql.__version__"


def test_committed_scripts_are_what_the_sources_build(tmp_path):
    v = build.version()
    targets = [
        ROOT / "extension" / f"nl2sql--{v}.sql",
        ROOT / "extension/nl2sql.control",
        build.BESIDE_SOURCES,  # what nl2sql install (without PL/Python) applies
    ]
    before = [t.read_text() for t in targets]
    subprocess.run(
        [sys.executable, str(ROOT / "scripts/build_extension.py")], check=True, capture_output=True
    )
    assert [t.read_text() for t in targets] == before, (
        "run scripts/build_extension.py and commit the result"
    )


def test_released_install_scripts_and_incremental_files_are_frozen():
    releases = json.loads((ROOT / "extension/releases.json").read_text())
    frozen = build.frozen()
    for version, info in releases.items():
        script = ROOT / "extension" / f"nl2sql--{version}.sql"
        assert hashlib.sha256(script.read_bytes()).hexdigest() == info["script_sha256"], (
            f"{script.name} was released and must not change"
        )
        for name in info["incremental"]:
            assert name in frozen, f"{name} was released in {version} but is not frozen"
            assert build.sha256(build.INCREMENTAL / name) == frozen[name], f"{name} changed"
            # what the release ran is inside its install script, unchanged
            assert (build.INCREMENTAL / name).read_text() in script.read_text()


def test_a_changed_frozen_incremental_file_stops_the_build(tmp_path, monkeypatch):
    inc = tmp_path / "incremental"
    shutil.copytree(build.INCREMENTAL, inc)
    monkeypatch.setattr(build, "INCREMENTAL", inc)
    monkeypatch.setattr(build, "FROZEN", inc / "frozen.txt")
    assert [f.name for f in build.incremental_files()]  # intact: builds
    first = sorted(build.frozen())[0]
    (inc / first).write_text((inc / first).read_text() + "\n-- an edit\n")
    with pytest.raises(build.BuildError, match="frozen"):
        build.incremental_files()


def test_every_migration_runs_once_and_upgrade_scripts_record_untracked_releases():
    install = build.install_script()
    for f in build.incremental_files():
        assert f"$nl2sql_name${f.name}$nl2sql_name$" in install
    assert "@SETTINGS_VALUES@" not in install
    for prior, info in build.releases().items():
        up = build.upgrade_script(prior, info, install)
        if not info.get("tracked", True):
            # the prior release's migrations are recorded as applied right after head.sql
            head_end = up.index("$nl2sql_head$;\n")
            backfill = up.index("INSERT INTO nl2sql.migration")
            first_migration = up.index("-- ==== incremental")
            assert head_end < backfill < first_migration
            for name in info["incremental"]:
                assert f"$nl2sql_name${name}$nl2sql_name$, '{prior}'" in up


def test_pyproject_lists_every_package_of_the_tree():
    """setuptools installs only the packages pyproject.toml lists: a new subpackage missing
    there would be absent from the server's venv."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    dirs = project["tool"]["setuptools"]["package-dir"]
    found = set()
    for top, src in dirs.items():
        for init in (ROOT / src).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / src).parts
            found.add(".".join((top, *rel)))
    assert found == listed, (
        f"not in pyproject: {sorted(found - listed)}; gone: {sorted(listed - found)}"
    )
