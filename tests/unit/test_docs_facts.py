"""The docs state what the code does: every version requirement and every default or limit that
README.md, docs/*.md and docker/README.md state is read here from the code that enforces it, so
a change of requirement in the code fails this test until the docs say it.

``FACTS`` is the table: a doc, the phrase that states the fact with ``{}`` where each value
stands (whitespace matches any whitespace, the docs wrap their lines), a function returning the
code's value(s) as the docs write them, and where the code states it. Python constants are read
from their module's source (``ast``, nothing imported) and shell variables from their
``NAME=value`` line. docs/settings.md's table is generated from the settings declaration and
checked whole by test_docs.py; here the settings' defaults stated in the prose of the other
pages, plus a sweep of every ``` `setting` (default N) ``` or ``` `setting` (N) ``` statement,
so that a new one is checked too. docs/benchmarks.md records what was measured then and is left
out."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT
from nl2sql.core.settings import BY_NAME

DOCS = ROOT / "docs"
PKG = ROOT / "py_udf" / "nl2sql"
INSTALL_SH = ROOT / "scripts" / "install.sh"

# --- reading the code -------------------------------------------------------------------------


@cache
def _module_constants(path: Path) -> dict[str, object]:
    """The module-level ``NAME = <literal>`` assignments of a Python file, without importing it."""
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name):
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                continue  # not a literal
    return found


def const(rel: str, name: str) -> object:
    """The literal value of module-level ``name`` in ``rel`` (a path under the repository)."""
    consts = _module_constants(ROOT / rel)
    assert name in consts, f"{rel} has no module-level literal {name}: the docs test reads it"
    return consts[name]


def sh_var(path: Path, name: str) -> str:
    """A shell script's ``NAME=value`` (or ``NAME="${NAME:-default}"``: the default)."""
    m = re.search(rf'^{name}=(?:"\$\{{{name}:-([^}}]*)\}}"|(\S+))', path.read_text(), re.M)
    assert m, f"{path.relative_to(ROOT)} has no line {name}=…: the docs test reads it"
    return m.group(1) if m.group(1) is not None else m.group(2)


@cache
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def requires_python() -> str:
    """The least Python of ``requires-python`` (``>=3.11`` → ``3.11``)."""
    spec = pyproject()["project"]["requires-python"]
    m = re.fullmatch(r">=\s*(\d+\.\d+)", spec)
    assert m, f"pyproject.toml's requires-python {spec!r} is not of the form >=X.Y"
    return m.group(1)


def pin(extra: str, package: str) -> str:
    """The version pinned with ``==`` for ``package`` in pyproject.toml's ``extra``."""
    for req in pyproject()["project"]["optional-dependencies"][extra]:
        name, sep, version = req.partition("==")
        if name.strip() == package and sep:
            return version.strip()
    raise AssertionError(f"pyproject.toml's {extra} extra pins no {package}==…")


def boot_venv_default() -> str:
    """The venv ``nl2sql._boot()`` uses when the server setting ``nl2sql.venv`` is unset."""
    text = (ROOT / "sql" / "idempotent" / "001-functions.sql").read_text()
    m = re.search(r"current_setting\('nl2sql\.venv', true\).*? or \"([^\"]+)\"", text)
    assert m, "sql/idempotent/001-functions.sql: no default for an unset nl2sql.venv found"
    return m.group(1)


def dockerfile_arg(name: str) -> str:
    m = re.search(rf"^ARG {name}=(\S+)", (ROOT / "docker" / "Dockerfile").read_text(), re.M)
    assert m, f"docker/Dockerfile has no ARG {name}=…"
    return m.group(1)


def setting(name: str) -> str:
    """A setting's default as the declaration writes it (``0.93``, ``on``, ``fastest``)."""
    return BY_NAME[name].default_text


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def n(x: float) -> str:
    """A whole number with thousands separators, as the docs write it (``1,000,000``)."""
    assert float(x) == int(x), f"{x} is not a whole number"
    return f"{int(x):,}"


def g(x: float) -> str:
    """A number of seconds as the docs write it (5.0 → ``5``)."""
    return f"{x:g}"


def mib(x: int) -> str:
    assert x % 2**20 == 0, f"{x} bytes is not a whole number of MiB"
    return str(x // 2**20)


# --- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    doc: str  # path under the repository
    phrase: str  # the statement, {} where each value stands
    code: Callable[[], str | tuple[str, ...]]  # the code's value(s), as the docs write them
    where: str  # where the code states it


def _install_sh(name: str) -> Callable[[], str]:
    return lambda: sh_var(INSTALL_SH, name)


def PG_RANGE() -> tuple[str, str]:
    return sh_var(INSTALL_SH, "PG_MIN_MAJOR"), sh_var(INSTALL_SH, "PG_MAX_MAJOR")


def PGVECTOR() -> tuple[str, str]:
    return sh_var(INSTALL_SH, "PGVECTOR_MIN"), sh_var(INSTALL_SH, "PGVECTOR_MIN_PG18")


def BESIDE() -> str:
    return dotted(const("py_udf/nl2sql/client/install.py", "MIN_PGVECTOR"))


PG_RANGE_AT = "scripts/install.sh PG_MIN_MAJOR, PG_MAX_MAJOR"
PGVECTOR_AT = "scripts/install.sh PGVECTOR_MIN, PGVECTOR_MIN_PG18"
BESIDE_AT = "py_udf/nl2sql/client/install.py MIN_PGVECTOR (checked by nl2sql install)"
PROBE = "py_udf/nl2sql/model/probe.py"
EMBED = "py_udf/nl2sql/embedding/client.py"
CAP = "py_udf/nl2sql/model/capability.py"
MCP_TOOLS = "indexer/nl2sql_indexer/mcp/_tools.py"
FAST_PATH = "py_udf/nl2sql/curated/fast_path.py"


def _setting(doc: str, phrase: str, *names: str, fmt: Callable[[str], str] = lambda x: x) -> Fact:
    return Fact(
        doc,
        phrase,
        lambda: tuple(fmt(setting(x)) for x in names),
        "py_udf/nl2sql/core/settings.py SETTINGS: " + ", ".join(names),
    )


FACTS: list[Fact] = [
    # PostgreSQL majors
    Fact("README.md", "PostgreSQL extension ({} to {})", PG_RANGE, PG_RANGE_AT),
    Fact("docs/install.md", "PostgreSQL extension ({} to {})", PG_RANGE, PG_RANGE_AT),
    Fact(
        "docs/install.md", "{} to {} are supported (older ones are refused", PG_RANGE, PG_RANGE_AT
    ),
    Fact("docs/install.md", "- PostgreSQL {} to {} with PL/Python", PG_RANGE, PG_RANGE_AT),
    # pgvector in the server (the extension) and beside it
    Fact("README.md", "pgvector ≥ {} (≥ {} on PostgreSQL 18)", PGVECTOR, PGVECTOR_AT),
    Fact("docs/install.md", "pgvector ≥ {}, ≥ {} on 18 (", PGVECTOR, PGVECTOR_AT),
    Fact(
        "docs/install.md",
        "pgvector {} or later ({} or later on PostgreSQL 18",
        PGVECTOR,
        PGVECTOR_AT,
    ),
    Fact(
        "docs/install.md",
        "checks pgvector ≥ {} and pg_cron ≥ {} (",
        lambda: (sh_var(INSTALL_SH, "PGVECTOR_MIN_PG18"), sh_var(INSTALL_SH, "PG_CRON_MIN_PG18")),
        "scripts/install.sh PGVECTOR_MIN_PG18, PG_CRON_MIN_PG18",
    ),
    Fact(
        "docs/sql-reference.md",
        "too old for the server (pgvector {}, {} on PostgreSQL 18)",
        lambda: const("py_udf/nl2sql/ops/_doctor_rows.py", "MINIMUM")["vector"],
        "py_udf/nl2sql/ops/_doctor_rows.py MINIMUM['vector'] (doctor())",
    ),
    Fact(
        "docs/install.md",
        "It needs pgvector (≥ {}; ≥ {} on PostgreSQL 18; ≥ {} beside",
        lambda: (*PGVECTOR(), BESIDE()),
        f"{PGVECTOR_AT}; {BESIDE_AT}",
    ),
    Fact("docs/install.md", "What the database needs: **pgvector {} or later**", BESIDE, BESIDE_AT),
    Fact("docs/install.md", "where pgvector is missing or older than {},", BESIDE, BESIDE_AT),
    # pg_cron
    Fact(
        "docs/install.md",
        "any version before 18, ≥ {} on 18;",
        _install_sh("PG_CRON_MIN_PG18"),
        "scripts/install.sh PG_CRON_MIN_PG18",
    ),
    Fact(
        "docs/install.md",
        "pg_cron ({} or later on PostgreSQL 18)",
        _install_sh("PG_CRON_MIN_PG18"),
        "scripts/install.sh PG_CRON_MIN_PG18",
    ),
    # Python and the pinned packages
    Fact(
        "docs/install.md",
        "runs on Python {} or later (`requires-python`",
        requires_python,
        "pyproject.toml requires-python",
    ),
    Fact(
        "docs/install.md",
        "(`torch=={}`,",
        lambda: pin("torch", "torch"),
        "pyproject.toml [torch] extra",
    ),
    # paths and their defaults
    Fact(
        "docs/install.md",
        "`NL2SQL_VENV` (default `{}`)",
        _install_sh("NL2SQL_VENV"),
        "scripts/install.sh NL2SQL_VENV",
    ),
    Fact(
        "docs/install.md",
        "the cache `NL2SQL_CACHE` (default `{}/`)",
        _install_sh("NL2SQL_CACHE"),
        "scripts/install.sh NL2SQL_CACHE",
    ),
    Fact(
        "docs/install.md",
        "reads the server setting `nl2sql.venv` (default `{}`)",
        boot_venv_default,
        "sql/idempotent/001-functions.sql nl2sql._boot()",
    ),
    Fact(
        "docs/install.md",
        "unset, `{}` is used.",
        boot_venv_default,
        "sql/idempotent/001-functions.sql nl2sql._boot()",
    ),
    Fact(
        "docs/settings.md",
        "adds to `sys.path` (default `{}`)",
        boot_venv_default,
        "sql/idempotent/001-functions.sql nl2sql._boot()",
    ),
    Fact(
        "docs/operations.md",
        "the default is `{}`)",
        boot_venv_default,
        "sql/idempotent/001-functions.sql nl2sql._boot()",
    ),
    Fact(
        "docs/install.md",
        "(`PG_MAJOR`, default {})",
        lambda: dockerfile_arg("PG_MAJOR"),
        "docker/Dockerfile ARG PG_MAJOR",
    ),
    Fact(
        "docker/README.md",
        "picks the server (default {});",
        lambda: dockerfile_arg("PG_MAJOR"),
        "docker/Dockerfile ARG PG_MAJOR",
    ),
    # limits in the code
    Fact(
        "docs/install.md",
        "nested deeper than {} levels",
        lambda: n(const("py_udf/nl2sql/core/sqlcheck.py", "MAX_PARSE_NESTING")),
        "py_udf/nl2sql/core/sqlcheck.py MAX_PARSE_NESTING",
    ),
    Fact(
        "docs/install.md",
        "at most {} s in all",
        lambda: g(const(PROBE, "TOTAL_S")),
        f"{PROBE} TOTAL_S",
    ),
    Fact(
        "docs/sql-reference.md",
        "no connection, no answer within {} s,",
        lambda: g(const(PROBE, "PER_MODEL_S")),
        f"{PROBE} PER_MODEL_S",
    ),
    Fact(
        "docs/install.md",
        "the worker reconnects ({}, {}, {}, {}, then every {} s)",
        lambda: tuple(map(g, const("py_udf/nl2sql/client/worker.py", "RECONNECT_S"))),
        "py_udf/nl2sql/client/worker.py RECONNECT_S",
    ),
    Fact(
        "docs/install.md",
        "`llama-server --parallel {}`",
        lambda: str(const("tests/llamacpp/conftest.py", "PARALLEL")),
        "tests/llamacpp/conftest.py PARALLEL",
    ),
    Fact(
        "docs/install.md",
        "`--ctx-size {}` for Gemma 3 270M ({} tokens a request",
        lambda: tuple(
            str(const("tests/llamacpp/conftest.py", "GEMMA_CTX") // d)
            for d in (1, const("tests/llamacpp/conftest.py", "PARALLEL"))
        ),
        "tests/llamacpp/conftest.py GEMMA_CTX, PARALLEL",
    ),
    Fact(
        "docs/install.md",
        "`--ctx-size {}` for the instruct model ({} a request)",
        lambda: tuple(
            str(const("tests/llamacpp/conftest.py", "CTX_SIZE") // d)
            for d in (1, const("tests/llamacpp/conftest.py", "PARALLEL"))
        ),
        "tests/llamacpp/conftest.py CTX_SIZE, PARALLEL",
    ),
    Fact(
        "docs/curated.md",
        "its text is returned (at most {} characters)",
        lambda: n(const("py_udf/nl2sql/curated/narrate.py", "ANSWER_MAX_CHARS")),
        "py_udf/nl2sql/curated/narrate.py ANSWER_MAX_CHARS",
    ),
    Fact(
        "docs/sql-reference.md",
        "`data.values` inline (at most {} rows)",
        lambda: n(const("py_udf/nl2sql/charts/spec.py", "MAX_VALUES")),
        "py_udf/nl2sql/charts/spec.py MAX_VALUES",
    ),
    Fact(
        "docs/charts.md",
        "at most {} rows of the result are carried",
        lambda: n(const("py_udf/nl2sql/charts/spec.py", "MAX_VALUES")),
        "py_udf/nl2sql/charts/spec.py MAX_VALUES",
    ),
    Fact(
        "docs/charts.md",
        "past {} bars or {} pie slices",
        lambda: (
            n(const("py_udf/nl2sql/charts/binning.py", "BAR_CATEGORIES")),
            n(const("py_udf/nl2sql/charts/binning.py", "PIE_SLICES")),
        ),
        "py_udf/nl2sql/charts/binning.py BAR_CATEGORIES, PIE_SLICES",
    ),
    Fact(
        "docs/sql-reference.md",
        "three sentences, at most {} characters)",
        lambda: n(const("py_udf/nl2sql/curated/narrate.py", "ANSWER_MAX_CHARS")),
        "py_udf/nl2sql/curated/narrate.py ANSWER_MAX_CHARS",
    ),
    Fact(
        "docs/operations.md",
        "request in time ({} s plus {} ms per text, at most {} s)",
        lambda: (
            g(const(EMBED, "TIMEOUT_BASE_S")),
            g(const(EMBED, "TIMEOUT_PER_TEXT_S") * 1000),
            g(const(EMBED, "REQUEST_TIMEOUT_S")),
        ),
        f"{EMBED} TIMEOUT_BASE_S, TIMEOUT_PER_TEXT_S, REQUEST_TIMEOUT_S",
    ),
    Fact(
        "docs/operations.md",
        "no answer within {} s, an HTTP error)",
        lambda: g(const(EMBED, "START_TIMEOUT_S")),
        f"{EMBED} START_TIMEOUT_S",
    ),
    Fact(
        "docs/operations.md",
        "tries the shared process again after {} s.",
        lambda: g(const(EMBED, "RETRY_AFTER_S")),
        f"{EMBED} RETRY_AFTER_S",
    ),
    Fact(
        "docs/operations.md",
        "for that call and the next {} s;",
        lambda: g(const(EMBED, "RETRY_AFTER_S")),
        f"{EMBED} RETRY_AFTER_S",
    ),
    Fact(
        "docs/models.md",
        "| {} for a model that answers at once,",
        lambda: str(const(CAP, "PLAIN_CAP")),
        f"{CAP} PLAIN_CAP",
    ),
    Fact(
        "docs/models.md",
        "**default** — `max_tokens` {},",
        lambda: str(const(CAP, "PLAIN_CAP")),
        f"{CAP} PLAIN_CAP",
    ),
    Fact(
        "docs/mcp.md",
        "`max_rows` (1..{}, default {})",
        lambda: (str(const(MCP_TOOLS, "MAX_ROWS")), str(const(MCP_TOOLS, "ASK_ROWS"))),
        f"{MCP_TOOLS} MAX_ROWS, ASK_ROWS",
    ),
    # settings' defaults and bounds, in the prose
    _setting("README.md", "`embedder = '{}'` (the default)", "embedder"),
    _setting("README.md", "`query_log_retention_days` ({} days;", "query_log_retention_days"),
    _setting(
        "docs/curated.md", "`verified_min_similarity` ({}) similar", "verified_min_similarity"
    ),
    _setting("docs/curated.md", "`verified_examples` ({}) nearest", "verified_examples"),
    Fact(
        "docs/curated.md",
        "at most {} below it",
        lambda: str(const(FAST_PATH, "OTHER_WORDS_MARGIN")),
        f"{FAST_PATH} OTHER_WORDS_MARGIN",
    ),
    Fact(
        "docs/internals/curated.md",
        "`OTHER_WORDS_MARGIN` ({}) less",
        lambda: str(const(FAST_PATH, "OTHER_WORDS_MARGIN")),
        f"{FAST_PATH} OTHER_WORDS_MARGIN",
    ),
    _setting("docs/curated.md", "`term_min_similarity` ({}) similar", "term_min_similarity"),
    _setting(
        "docs/curated.md",
        "`term_top_k` ({}) terms; the `instruction_top_k` ({}) instructions",
        "term_top_k",
        "instruction_top_k",
    ),
    _setting("docs/curated.md", "`conversation_turns` (default {}) earlier", "conversation_turns"),
    _setting("docs/curated.md", "`narrate_rows` (default {}) rows", "narrate_rows"),
    _setting(
        "docs/guardrails.md",
        "`max_plan_cost` = {} and `max_plan_rows` = {}.",
        "max_plan_cost",
        "max_plan_rows",
        fmt=lambda x: n(float(x)),
    ),
    _setting(
        "docs/indexing.md",
        "`values_per_column`** (default {} per column",
        "values_per_column",
        fmt=lambda x: n(int(x)),
    ),
    _setting(
        "docs/indexing.md",
        "`value_sample_rows` rows (default {})",
        "value_sample_rows",
        fmt=lambda x: n(int(x)),
    ),
    _setting(
        "docs/models.md",
        "`llm_reasoning_max_tokens` ({}) for one that thinks",
        "llm_reasoning_max_tokens",
    ),
    _setting(
        "docs/models.md", "`llm_reasoning_max_tokens` ({}) unless", "llm_reasoning_max_tokens"
    ),
    _setting("docs/models.md", "`llm_max_output_tokens` ({}).", "llm_max_output_tokens"),
    _setting(
        "docs/operations.md",
        "`query_log_retention_days` (default {}) bounds it",
        "query_log_retention_days",
    ),
    _setting(
        "docs/operations.md",
        "chooses the embedding model file: `{}` (the default",
        "embedding_precision",
    ),
    _setting("docs/pipeline.md", "so with `value_trgm_min` {} a word", "value_trgm_min"),
    _setting("docs/pipeline.md", "(`reliability_vote`, {} by default)", "reliability_vote"),
    _setting(
        "docs/pipeline.md",
        "`presql_votes` {}, `confidence_threshold` {}, `value_alignment` {}, `repair_rounds` {}, `tie_break` {}, `selection` {},",
        "presql_votes",
        "confidence_threshold",
        "value_alignment",
        "repair_rounds",
        "tie_break",
        "selection",
    ),
    _setting("docs/pipeline.md", "hardness routing, `model_rounds` {}.", "model_rounds"),
    _setting("docs/pipeline.md", "fits prompt_token_budget {}:", "prompt_token_budget"),
    _setting("docs/pipeline.md", "`abstain_below` set (0..1; default {} = off)", "abstain_below"),
    _setting("docs/pipeline.md", "`abstain_readings` (default {}) in all", "abstain_readings"),
    Fact(
        "docs/pipeline.md",
        "`repair_rounds`, at most {})",
        lambda: g(BY_NAME["repair_rounds"].maximum),
        "py_udf/nl2sql/core/settings.py SETTINGS: repair_rounds maximum",
    ),
    _setting(
        "docs/safety.md",
        "(`max_result_bytes`, default {} bytes)",
        "max_result_bytes",
        fmt=lambda x: n(int(x)),
    ),
    _setting(
        "docs/safety.md", "`query_log_retention_days` ({}) and pruned", "query_log_retention_days"
    ),
    _setting(
        "docs/semantic-model.md",
        "`semantic_model_max_bytes` (default {} MiB,",
        "semantic_model_max_bytes",
        fmt=lambda x: mib(int(x)),
    ),
    _setting(
        "docs/sql-reference.md",
        "`query_log_retention_days` (default {};",
        "query_log_retention_days",
    ),
    _setting(
        "docs/sql-reference.md",
        "`semantic_model_max_bytes` ({} MiB),",
        "semantic_model_max_bytes",
        fmt=lambda x: mib(int(x)),
    ),
]


def _pattern(phrase: str) -> re.Pattern:
    """The phrase as a regex: ``{}`` captures a value (no whitespace), whitespace matches any."""
    assert not phrase.endswith("{}"), f"a phrase must not end with its value: {phrase!r}"
    parts = [re.sub(r"(\\\s)+|\s+", r"\\s+", re.escape(p)) for p in phrase.split("{}")]
    start = r"(?<!\S)" if phrase.startswith("{}") else ""
    return re.compile(start + r"(\S+?)".join(parts))


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f"{f.doc}: {f.phrase[:60]}")
def test_the_docs_state_what_the_code_does(fact: Fact):
    text = (ROOT / fact.doc).read_text()
    want = fact.code()
    want = (want,) if isinstance(want, str) else tuple(str(x) for x in want)
    found = [m.groups() for m in _pattern(fact.phrase).finditer(text)]
    assert found, (
        f"{fact.doc} no longer says “{fact.phrase}” (with {', '.join(want)} for the {{}}): state "
        f"it there again, or change this row of tests/unit/test_docs_facts.py"
    )
    for got in found:
        assert got == want, (
            f"{fact.doc} says “{fact.phrase.format(*got)}”; the code ({fact.where}) says "
            f"“{fact.phrase.format(*want)}”: correct the doc"
        )


# --- every default a page states for a setting -------------------------------------------------

_NUM = r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?"
_SETTING_DEFAULT = re.compile(
    rf"`(?P<name>\w+)`\**\s+\((?:default\s+(?P<d>{_NUM})(?P<du>\s+MiB)?(?=[);,\s])"
    rf"|(?P<p>{_NUM})(?P<pu>\s+MiB)?\))"
)


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "docker" / "README.md", *sorted(DOCS.glob("*.md"))]
    return [p for p in pages if p.name != "benchmarks.md"]


def test_every_setting_default_stated_in_the_docs_is_the_declared_one():
    """`` `name` (default N)`` or `` `name` (N)``, for a setting ``name``, anywhere in the docs
    but docs/settings.md's generated table (test_docs.py) and docs/benchmarks.md."""
    wrong = []
    for page in _pages():
        text = page.read_text()
        begin, end = "<!-- settings:begin -->", "<!-- settings:end -->"
        if begin in text:
            text = text[: text.index(begin)] + text[text.index(end) :]
        for m in _SETTING_DEFAULT.finditer(text):
            s = BY_NAME.get(m["name"])
            if s is None or isinstance(s.default, (bool, str, tuple, dict)):
                continue
            value = float((m["d"] or m["p"]).replace(",", ""))
            if m["du"] or m["pu"]:
                value *= 2**20
            if value != float(s.default):
                wrong.append(f"{page.relative_to(ROOT)}: “{m[0]}”, declared {s.default_text}")
    assert not wrong, "docs state another default than the declaration:\n  " + "\n  ".join(wrong)


# --- what the docs said wrongly before ----------------------------------------------------------


def test_the_old_beside_requirement_is_gone():
    """Beside the database nl2sql needed pgvector 0.5.0 until the value index became
    ``halfvec(384)`` (sql/incremental/023-value-halfvec.sql), which needs 0.7.0."""
    stale = []
    for page in _pages():
        text = re.sub(r"\s+", " ", page.read_text())
        for pattern in (
            r"pgvector (?:\*\*)?0\.5\.0",
            r"older than 0\.5\.0",
            r"halfvec`?[^.;]*\bnot used",
        ):
            stale += [f"{page.relative_to(ROOT)}: “{m[0]}”" for m in re.finditer(pattern, text)]
    assert not stale, "stale statements:\n  " + "\n  ".join(stale)


def test_install_sh_and_doctor_require_the_same():
    """scripts/install.sh refuses what ``nl2sql.doctor()`` fails: the same majors and minimums."""
    doctor = "py_udf/nl2sql/ops/_doctor_rows.py"
    majors = const(doctor, "TESTED_MAJORS")
    minimum = const(doctor, "MINIMUM")
    assert (str(majors[0]), str(majors[-1])) == PG_RANGE(), f"{doctor} TESTED_MAJORS, {PG_RANGE_AT}"
    assert tuple(minimum["vector"]) == PGVECTOR(), f"{doctor} MINIMUM['vector'], {PGVECTOR_AT}"
    assert minimum["pg_cron"][1] == sh_var(INSTALL_SH, "PG_CRON_MIN_PG18"), (
        f"{doctor} MINIMUM['pg_cron'], scripts/install.sh PG_CRON_MIN_PG18"
    )


def test_doctor_beside_requires_what_install_beside_checks():
    """``nl2sql doctor --dsn`` beside a database fails pgvector only where ``nl2sql install``
    refuses it (client/install.py MIN_PGVECTOR)."""
    doctor = "py_udf/nl2sql/ops/_doctor_rows.py"
    beside = const(doctor, "MINIMUM_BESIDE")["vector"]
    install = ".".join(map(str, const("py_udf/nl2sql/client/install.py", "MIN_PGVECTOR")))
    assert beside == install, f"{doctor} MINIMUM_BESIDE['vector'] {beside}, install {install}"
