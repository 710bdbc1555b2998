#!/usr/bin/env python3
"""Large-schema benchmark: a project-generated database of 1,000 tables (40 domains of 25
tables: 6 entity tables with foreign keys between them, and for each entity a history, a type
and a note table, plus an audit log), a few rows each; questions whose gold tables are known by
construction (one table; a child and its parent; two tables joined through a bridge table).

For each question, ``nl2sql.retrieve(question)`` builds the PreSQL prompt exactly as
``nl2sql()`` would: the whole schema is far over the token budget (setting
prompt_token_budget, default 3,000 estimated tokens), so it is pruned to the tables most
similar to the question plus their FK neighbours. Measured: the share of questions whose
pruned prompt keeps every gold table, the prompt's estimated tokens (must stay <= budget), and
the retrieval time (values + examples + column similarity + pruning, ms; schema loading is
printed separately).

Nothing here comes from outside the project: names are from the lists below, rows from
random.Random(7).

Usage: python bench/large_schema.py [--data DIR (unused: the data is generated)]
       [--tables 1000] [--questions 120] [--reuse] [--datadir DIR]
Last line: ``RESULT gold_table_recall=<0..1> prompt_tokens_p95=<n> retrieval_ms_p50=<ms>``
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C

DB = "nl2sql_large_schema"
SCHEMA = "app"

# domain: (word used in questions, entities, FK relations child -> parent)
DOMAINS: dict[str, tuple[str, list[str], list[tuple[str, str]]]] = {
    "hospital": (
        "hospital",
        ["patient", "doctor", "ward", "admission", "prescription", "medication"],
        [
            ("admission", "patient"),
            ("admission", "ward"),
            ("admission", "doctor"),
            ("prescription", "admission"),
            ("prescription", "medication"),
        ],
    ),
    "school": (
        "school",
        ["student", "teacher", "course", "classroom", "enrollment", "grade"],
        [
            ("enrollment", "student"),
            ("enrollment", "course"),
            ("course", "teacher"),
            ("course", "classroom"),
            ("grade", "enrollment"),
        ],
    ),
    "library": (
        "library",
        ["book", "author", "member", "loan", "branch", "publisher"],
        [
            ("book", "author"),
            ("book", "publisher"),
            ("loan", "book"),
            ("loan", "member"),
            ("loan", "branch"),
        ],
    ),
    "airline": (
        "airline",
        ["flight", "airport", "aircraft", "passenger", "booking", "crew_member"],
        [
            ("flight", "airport"),
            ("flight", "aircraft"),
            ("booking", "flight"),
            ("booking", "passenger"),
            ("crew_member", "flight"),
        ],
    ),
    "hotel": (
        "hotel",
        ["guest", "room", "reservation", "invoice", "housekeeper", "amenity"],
        [
            ("reservation", "guest"),
            ("reservation", "room"),
            ("invoice", "reservation"),
            ("room", "housekeeper"),
            ("amenity", "room"),
        ],
    ),
    "retail": (
        "store chain",
        ["store", "product", "shopper", "sale", "supplier", "category"],
        [
            ("product", "category"),
            ("product", "supplier"),
            ("sale", "store"),
            ("sale", "product"),
            ("sale", "shopper"),
        ],
    ),
    "bank": (
        "bank",
        ["account", "customer", "branch", "transaction", "loan", "card"],
        [
            ("account", "customer"),
            ("account", "branch"),
            ("transaction", "account"),
            ("loan", "customer"),
            ("card", "account"),
        ],
    ),
    "insurance": (
        "insurance company",
        ["policy", "policyholder", "claim", "agent", "coverage", "premium"],
        [
            ("policy", "policyholder"),
            ("policy", "agent"),
            ("claim", "policy"),
            ("coverage", "policy"),
            ("premium", "policy"),
        ],
    ),
    "telecom": (
        "phone company",
        ["subscriber", "plan", "phone_line", "call_record", "bill", "device"],
        [
            ("phone_line", "subscriber"),
            ("phone_line", "plan"),
            ("call_record", "phone_line"),
            ("bill", "subscriber"),
            ("device", "subscriber"),
        ],
    ),
    "logistics": (
        "logistics firm",
        ["shipment", "warehouse", "carrier", "package", "route", "driver"],
        [
            ("shipment", "carrier"),
            ("shipment", "route"),
            ("package", "shipment"),
            ("package", "warehouse"),
            ("driver", "carrier"),
        ],
    ),
    "restaurant": (
        "restaurant",
        ["dish", "chef", "diner", "dining_order", "ingredient", "review"],
        [
            ("dish", "chef"),
            ("dining_order", "diner"),
            ("dining_order", "dish"),
            ("review", "dish"),
            ("ingredient", "dish"),
        ],
    ),
    "realty": (
        "real estate agency",
        ["property", "realtor", "buyer", "listing", "viewing", "offer"],
        [
            ("listing", "property"),
            ("listing", "realtor"),
            ("viewing", "listing"),
            ("viewing", "buyer"),
            ("offer", "buyer"),
        ],
    ),
    "hr": (
        "company",
        ["employee", "department", "job_title", "salary", "leave_request", "performance_review"],
        [
            ("employee", "department"),
            ("employee", "job_title"),
            ("salary", "employee"),
            ("leave_request", "employee"),
            ("performance_review", "employee"),
        ],
    ),
    "factory": (
        "factory",
        ["plant", "machine", "part", "work_order", "operator", "defect"],
        [
            ("machine", "plant"),
            ("work_order", "machine"),
            ("work_order", "part"),
            ("operator", "plant"),
            ("defect", "work_order"),
        ],
    ),
    "league": (
        "football league",
        ["team", "player", "fixture", "stadium", "coach", "goal"],
        [
            ("player", "team"),
            ("coach", "team"),
            ("fixture", "stadium"),
            ("goal", "fixture"),
            ("goal", "player"),
        ],
    ),
    "music": (
        "music label",
        ["artist", "album", "track", "record_label", "concert", "venue"],
        [
            ("album", "artist"),
            ("album", "record_label"),
            ("track", "album"),
            ("concert", "artist"),
            ("concert", "venue"),
        ],
    ),
    "film": (
        "film studio",
        ["movie", "director", "actor", "studio", "casting", "award"],
        [
            ("movie", "director"),
            ("movie", "studio"),
            ("casting", "movie"),
            ("casting", "actor"),
            ("award", "movie"),
        ],
    ),
    "webshop": (
        "online shop",
        ["web_customer", "cart", "web_order", "payment", "coupon", "shipping_address"],
        [
            ("cart", "web_customer"),
            ("web_order", "web_customer"),
            ("payment", "web_order"),
            ("web_order", "coupon"),
            ("shipping_address", "web_customer"),
        ],
    ),
    "research": (
        "research institute",
        ["researcher", "research_grant", "publication", "lab", "project", "journal"],
        [
            ("researcher", "lab"),
            ("project", "lab"),
            ("research_grant", "project"),
            ("publication", "researcher"),
            ("publication", "journal"),
        ],
    ),
    "farm": (
        "farm",
        ["farm_site", "field", "crop", "harvest", "farmer", "tractor"],
        [
            ("field", "farm_site"),
            ("harvest", "field"),
            ("harvest", "crop"),
            ("farmer", "farm_site"),
            ("tractor", "farm_site"),
        ],
    ),
    "energy": (
        "utility",
        ["power_plant", "turbine", "meter", "outage", "substation", "tariff"],
        [
            ("turbine", "power_plant"),
            ("meter", "substation"),
            ("outage", "substation"),
            ("substation", "power_plant"),
            ("meter", "tariff"),
        ],
    ),
    "transit": (
        "bus company",
        ["bus", "bus_route", "bus_stop", "trip", "ticket", "depot"],
        [
            ("bus", "depot"),
            ("trip", "bus"),
            ("trip", "bus_route"),
            ("bus_stop", "bus_route"),
            ("ticket", "trip"),
        ],
    ),
    "council": (
        "city council",
        ["citizen", "permit", "office", "tax_return", "vehicle_registration", "inspection"],
        [
            ("permit", "citizen"),
            ("permit", "office"),
            ("tax_return", "citizen"),
            ("vehicle_registration", "citizen"),
            ("inspection", "permit"),
        ],
    ),
    "law": (
        "law firm",
        ["case_file", "lawyer", "client", "court", "hearing", "legal_fee"],
        [
            ("case_file", "client"),
            ("case_file", "lawyer"),
            ("hearing", "case_file"),
            ("hearing", "court"),
            ("legal_fee", "case_file"),
        ],
    ),
    "vet": (
        "veterinary clinic",
        ["pet", "pet_owner", "veterinarian", "appointment", "vaccination", "clinic"],
        [
            ("pet", "pet_owner"),
            ("appointment", "pet"),
            ("appointment", "veterinarian"),
            ("veterinarian", "clinic"),
            ("vaccination", "pet"),
        ],
    ),
    "gym": (
        "gym",
        ["gym_member", "trainer", "workout_class", "membership", "check_in", "equipment"],
        [
            ("workout_class", "trainer"),
            ("membership", "gym_member"),
            ("check_in", "gym_member"),
            ("check_in", "workout_class"),
            ("equipment", "trainer"),
        ],
    ),
    "events": (
        "event organiser",
        ["event", "event_venue", "attendee", "ticket_sale", "sponsor", "speaker"],
        [
            ("event", "event_venue"),
            ("ticket_sale", "event"),
            ("ticket_sale", "attendee"),
            ("sponsor", "event"),
            ("speaker", "event"),
        ],
    ),
    "devops": (
        "software team",
        ["repository", "developer", "issue", "software_release", "pull_request", "build"],
        [
            ("repository", "developer"),
            ("issue", "repository"),
            ("pull_request", "repository"),
            ("pull_request", "developer"),
            ("software_release", "repository"),
        ],
    ),
    "news": (
        "newspaper",
        ["article", "journalist", "section", "editor", "subscription", "reader"],
        [
            ("article", "journalist"),
            ("article", "section"),
            ("section", "editor"),
            ("subscription", "reader"),
            ("journalist", "editor"),
        ],
    ),
    "auto": (
        "car dealership",
        ["car_model", "dealer", "car_sale", "mechanic", "service_visit", "spare_part"],
        [
            ("car_sale", "car_model"),
            ("car_sale", "dealer"),
            ("service_visit", "mechanic"),
            ("service_visit", "car_model"),
            ("spare_part", "car_model"),
        ],
    ),
    "pharmacy": (
        "pharmacy",
        ["drug", "pharmacist", "drug_order", "pharmacy_client", "wholesaler", "stock_batch"],
        [
            ("drug_order", "drug"),
            ("drug_order", "pharmacy_client"),
            ("drug_order", "pharmacist"),
            ("stock_batch", "drug"),
            ("stock_batch", "wholesaler"),
        ],
    ),
    "construction": (
        "construction firm",
        ["building_project", "contractor", "site", "material", "inspection_report", "worker"],
        [
            ("building_project", "site"),
            ("building_project", "contractor"),
            ("material", "building_project"),
            ("inspection_report", "building_project"),
            ("worker", "contractor"),
        ],
    ),
    "charity": (
        "charity",
        ["donor", "donation", "campaign", "volunteer", "beneficiary", "fundraiser"],
        [
            ("donation", "donor"),
            ("donation", "campaign"),
            ("volunteer", "campaign"),
            ("beneficiary", "campaign"),
            ("fundraiser", "campaign"),
        ],
    ),
    "museum": (
        "museum",
        ["artwork", "painter", "gallery", "exhibit", "visitor", "guided_tour"],
        [
            ("artwork", "painter"),
            ("artwork", "gallery"),
            ("exhibit", "gallery"),
            ("guided_tour", "exhibit"),
            ("guided_tour", "visitor"),
        ],
    ),
    "zoo": (
        "zoo",
        ["animal", "species", "enclosure", "keeper", "feeding", "health_check"],
        [
            ("animal", "species"),
            ("animal", "enclosure"),
            ("feeding", "animal"),
            ("feeding", "keeper"),
            ("health_check", "animal"),
        ],
    ),
    "gaming": (
        "game platform",
        ["gamer", "game", "tournament", "game_session", "achievement", "guild"],
        [
            ("game_session", "gamer"),
            ("game_session", "game"),
            ("tournament", "game"),
            ("achievement", "gamer"),
            ("gamer", "guild"),
        ],
    ),
    "tourism": (
        "travel agency",
        ["tour", "tourist", "tour_guide", "destination", "tour_booking", "attraction"],
        [
            ("tour", "tour_guide"),
            ("tour", "destination"),
            ("tour_booking", "tour"),
            ("tour_booking", "tourist"),
            ("attraction", "destination"),
        ],
    ),
    "hiring": (
        "recruitment agency",
        ["candidate", "job_posting", "recruiter", "interview", "application", "employer"],
        [
            ("job_posting", "employer"),
            ("job_posting", "recruiter"),
            ("application", "candidate"),
            ("application", "job_posting"),
            ("interview", "application"),
        ],
    ),
    "shipping": (
        "shipping line",
        ["vessel", "port", "voyage", "cargo", "captain", "port_call"],
        [
            ("voyage", "vessel"),
            ("voyage", "captain"),
            ("cargo", "voyage"),
            ("port_call", "voyage"),
            ("port_call", "port"),
        ],
    ),
    "weather": (
        "weather service",
        ["weather_station", "observation", "sensor", "forecast", "region", "weather_alert"],
        [
            ("weather_station", "region"),
            ("observation", "weather_station"),
            ("sensor", "weather_station"),
            ("forecast", "region"),
            ("weather_alert", "region"),
        ],
    ),
}
# one entity per domain, described without the words of its table name (paraphrase questions)
PARAPHRASE = {
    "hospital": ("patient", "people under treatment"),
    "school": ("student", "pupils"),
    "library": ("loan", "borrowed items"),
    "airline": ("passenger", "travellers"),
    "hotel": ("guest", "visitors staying overnight"),
    "retail": ("supplier", "vendors"),
    "bank": ("transaction", "money transfers"),
    "insurance": ("claim", "damage reports filed"),
    "telecom": ("subscriber", "phone customers"),
    "logistics": ("driver", "people behind the wheel"),
    "restaurant": ("chef", "cooks"),
    "realty": ("property", "houses"),
    "hr": ("employee", "staff members"),
    "factory": ("defect", "faults found"),
    "league": ("player", "footballers"),
    "music": ("track", "songs"),
    "film": ("movie", "films"),
    "webshop": ("payment", "sums paid for purchases"),
    "research": ("publication", "papers"),
    "farm": ("harvest", "yields gathered"),
    "energy": ("outage", "blackouts"),
    "transit": ("bus", "coaches"),
    "council": ("permit", "licences"),
    "law": ("lawyer", "attorneys"),
    "vet": ("pet", "animals brought in"),
    "gym": ("trainer", "instructors"),
    "events": ("attendee", "participants"),
    "devops": ("developer", "programmers"),
    "news": ("journalist", "reporters"),
    "auto": ("mechanic", "repair technicians"),
    "pharmacy": ("drug", "medicines"),
    "construction": ("worker", "labourers"),
    "charity": ("donation", "gifts of money"),
    "museum": ("painter", "artists who made the paintings"),
    "zoo": ("keeper", "animal carers"),
    "gaming": ("gamer", "players"),
    "tourism": ("tourist", "holidaymakers"),
    "hiring": ("candidate", "job seekers"),
    "shipping": ("vessel", "ships"),
    "weather": ("sensor", "measuring instruments"),
}
ATTRS = [
    ("status", "text"),
    ("created_at", "date"),
    ("amount", "numeric(10,2)"),
    ("description", "text"),
    ("city", "text"),
    ("rating", "integer"),
    ("code", "text"),
    ("start_date", "date"),
    ("capacity", "integer"),
    ("email", "text"),
]
ADJ = [
    "Silver",
    "Northern",
    "Golden",
    "Quiet",
    "Royal",
    "Eastern",
    "Green",
    "Crimson",
    "Bright",
    "Old",
    "Grand",
    "Little",
    "Western",
    "Blue",
    "Maple",
    "Cedar",
    "Harbor",
    "Summit",
]
NOUN = [
    "Oak",
    "River",
    "Star",
    "Field",
    "Bridge",
    "Hill",
    "Lake",
    "Stone",
    "Park",
    "Garden",
    "Valley",
    "Crest",
    "Point",
    "Meadow",
    "Forest",
    "Bay",
    "Ridge",
    "Gate",
]
STATUS = ["active", "closed", "pending", "archived"]
CITIES = ["Lisbon", "Oslo", "Dublin", "Vienna", "Prague", "Seattle", "Denver", "Austin"]


def words(name: str) -> str:
    return name.replace("_", " ")


def plural(name: str) -> str:
    w = words(name)
    if w.endswith("y") and w[-2] not in "aeiou":
        return w[:-1] + "ies"
    if w.endswith(("s", "x", "ch", "sh")):
        return w + "es"
    return w + "s"


def generate(n_tables: int, rng: random.Random) -> tuple[str, dict[str, list[str]], dict]:
    """DDL + rows for the synthetic schema; returns (sql, {table: string values of its name
    column}, relations {(domain, child, parent)})."""
    stmts = [f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE", f"CREATE SCHEMA {SCHEMA}"]
    names: dict[str, list[str]] = {}
    count = 0
    for d, (_word, ents, rels) in DOMAINS.items():
        if count >= n_tables:
            break
        parents = {e: [p for c, p in rels if c == e] for e in ents}
        # lookup (type) tables first, then entities in FK order, then history/note, audit log
        for e in ents:
            stmts.append(
                f"CREATE TABLE {SCHEMA}.{d}_{e}_type (id int PRIMARY KEY, type_name text, "
                f"description text)"
            )
            stmts.append(
                f"INSERT INTO {SCHEMA}.{d}_{e}_type VALUES (1, 'standard', 'default'), "
                f"(2, 'premium', 'upgraded')"
            )
        done: set[str] = set()
        while len(done) < len(ents):
            for e in ents:
                if e in done or any(p not in done for p in parents[e]):
                    continue
                attrs = rng.sample(ATTRS, 3)
                cols = ["id int PRIMARY KEY", "name text"] + [f"{a} {t}" for a, t in attrs]
                cols += [f"{p}_id int REFERENCES {SCHEMA}.{d}_{p}(id)" for p in parents[e]]
                cols.append(f"{e}_type_id int REFERENCES {SCHEMA}.{d}_{e}_type(id)")
                stmts.append(f"CREATE TABLE {SCHEMA}.{d}_{e} ({', '.join(cols)})")
                vals = []
                names[f"{d}_{e}"] = []
                for i in range(1, 4):
                    nm = f"{rng.choice(ADJ)} {rng.choice(NOUN)}"
                    names[f"{d}_{e}"].append(nm)
                    row = [str(i), f"'{nm}'"]
                    for a, t in attrs:
                        row.append(
                            {
                                "text": "'"
                                + (
                                    rng.choice(STATUS)
                                    if a == "status"
                                    else rng.choice(CITIES)
                                    if a == "city"
                                    else f"{a}-{rng.randint(100, 999)}"
                                )
                                + "'",
                                "date": f"'2023-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}'",
                                "numeric(10,2)": f"{rng.randint(10, 9999)}.50",
                                "integer": str(rng.randint(1, 500)),
                            }[t]
                        )
                    row += [str(rng.randint(1, 3)) for _ in parents[e]] + ["1"]
                    vals.append("(" + ", ".join(row) + ")")
                stmts.append(f"INSERT INTO {SCHEMA}.{d}_{e} VALUES {', '.join(vals)}")
                done.add(e)
        for e in ents:
            stmts.append(
                f"CREATE TABLE {SCHEMA}.{d}_{e}_history (id int PRIMARY KEY, "
                f"{e}_id int REFERENCES {SCHEMA}.{d}_{e}(id), changed_at timestamp, "
                f"old_value text, new_value text, changed_by text)"
            )
            stmts.append(
                f"CREATE TABLE {SCHEMA}.{d}_{e}_note (id int PRIMARY KEY, "
                f"{e}_id int REFERENCES {SCHEMA}.{d}_{e}(id), note text, created_at date)"
            )
        stmts.append(
            f"CREATE TABLE {SCHEMA}.{d}_audit_log (id int PRIMARY KEY, table_name text, "
            f"action text, performed_at timestamp, user_name text)"
        )
        count += 25
    return ";\n".join(stmts) + ";", names, {}


def make_questions(n: int, names: dict[str, list[str]], rng: random.Random) -> list[dict]:
    """Questions with their gold tables, the kinds in turn: single-table (named by its entity
    words), child/parent join, bridge join (two tables both joined by FK to a middle table
    that the question names as a plural, the second named by a cell value), and paraphrase
    (one table described without its name's words, e.g. "pupils" for school_student)."""
    qs: list[dict] = []
    doms = [d for d in DOMAINS if f"{d}_{DOMAINS[d][1][0]}" in names]
    kinds = ["single", "join", "bridge", "paraphrase"]
    i = 0
    while len(qs) < n:
        d = doms[i % len(doms)]
        kind = kinds[(i // len(doms)) % len(kinds)]
        i += 1
        word, ents, rels = DOMAINS[d]
        if kind == "single":
            e = rng.choice(ents)
            tmpl = rng.choice(
                [
                    "How many {p} does the {w} have?",
                    "List the names of all {p} of the {w}.",
                    "Which {p} of the {w} were created most recently?",
                ]
            )
            qs.append({"q": tmpl.format(p=plural(e), w=word), "gold": [f"{d}_{e}"], "kind": kind})
        elif kind == "join":
            c, p = rng.choice(rels)
            tmpl = rng.choice(
                [
                    "For each {par} of the {w}, how many {ch} are there?",
                    "Which {par} of the {w} has the most {ch}?",
                    "List the {ch} of the {w} together with the name of their {par}.",
                ]
            )
            qs.append(
                {
                    "q": tmpl.format(par=words(p), ch=plural(c), w=word),
                    "gold": [f"{d}_{c}", f"{d}_{p}"],
                    "kind": kind,
                }
            )
        elif kind == "paraphrase":
            e, para = PARAPHRASE[d]
            tmpl = rng.choice(
                [
                    "How many {p} does the {w} have?",
                    "List the {p} by name.",
                    "How many {p} are there?",
                ]
            )
            qs.append({"q": tmpl.format(p=para, w=word), "gold": [f"{d}_{e}"], "kind": kind})
        else:
            adj: dict[str, list[str]] = {}
            for a, b in rels:
                adj.setdefault(a, []).append(b)
                adj.setdefault(b, []).append(a)
            c, ps = rng.choice(sorted((m, ns) for m, ns in adj.items() if len(ns) >= 2))
            p1, p2 = rng.sample(sorted(ps), 2)
            val = rng.choice(names[f"{d}_{p2}"])
            qs.append(
                {
                    "q": f"Which {plural(p1)} of the {word} have {plural(c)} with the "
                    f"{words(p2)} '{val}'?",
                    "gold": [f"{d}_{p1}", f"{d}_{c}", f"{d}_{p2}"],
                    "kind": kind,
                }
            )
    return qs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=None, help="accepted for symmetry; unused")
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=160)
    ap.add_argument(
        "--reuse", action="store_true", help="keep an already built and indexed database"
    )
    ap.add_argument("--datadir", type=Path, default=None)
    ap.add_argument("--show-misses", type=int, default=15)
    args = ap.parse_args(argv)

    rng = random.Random(7)
    sql, names, _ = generate(args.tables, rng)
    qs = make_questions(args.questions, names, random.Random(11))
    cluster = C.start_cluster(args.datadir)
    exists = False
    if args.reuse:
        with cluster.connect() as c:
            exists = bool(
                c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,)).fetchone()
            )
    if not exists:
        cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    if not exists:
        t0 = time.perf_counter()
        conn.execute(sql.encode())
        conn.execute("CREATE EXTENSION nl2sql CASCADE")
        conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (SCHEMA,))
        conn.execute("SELECT nl2sql.set_setting('values_per_column', '20')")
        t1 = time.perf_counter()
        counts = conn.execute("SELECT nl2sql.reindex()").fetchone()[0]
        print(
            f"built {counts['tables_indexed']} tables in {t1 - t0:.1f} s; reindex "
            f"{time.perf_counter() - t1:.1f} s: columns {counts['columns']}, values "
            f"{counts['values']}, fks {counts['fks']}",
            flush=True,
        )
    conn.execute(f"SET search_path TO {SCHEMA}, public")
    n_tables = conn.execute("SELECT count(*) FROM nl2sql.schema_table").fetchone()[0]
    budget = C.setting_value(conn, "prompt_token_budget")
    conn.execute("SELECT nl2sql.retrieve('warm up')")

    hits, tokens, ms, schema_ms, kept, full = [], [], [], [], [], []
    by_kind: dict[str, list[bool]] = {}
    stages: dict[str, list[float]] = {}
    misses = []
    for q in qs:
        r = conn.execute("SELECT nl2sql.retrieve(%s)", (q["q"],)).fetchone()[0]
        shown = set(r["presql_tables"])
        ok = set(q["gold"]) <= shown
        hits.append(ok)
        by_kind.setdefault(q["kind"], []).append(ok)
        tokens.append(r["pruning"]["tokens"])
        full.append(r["pruning"]["tokens_full"])
        kept.append(r["pruning"]["tables_kept"])
        ms.append(float(r["timings"]["retrieval_ms"]))
        schema_ms.append(float(r["timings"]["schema_ms"]))
        for k, v in r["timings"].items():
            if k not in ("schema_ms", "retrieval_ms"):
                stages.setdefault(k, []).append(float(v))
        if not ok:
            misses.append((q["q"], sorted(set(q["gold"]) - shown), r["presql_tables"][:8]))
    recall = statistics.mean(hits)
    p95 = C.percentile(tokens, 95)
    p50 = C.percentile(ms, 50)
    print(
        f"{n_tables} tables indexed; {len(qs)} questions; token budget {budget}; full-schema "
        f"prompt ~{statistics.mean(full):.0f} tokens",
        flush=True,
    )
    print(
        f"gold tables kept in the PreSQL prompt: {sum(hits)}/{len(hits)} = {recall:.3f} ("
        + ", ".join(f"{k} {statistics.mean(v):.3f} of {len(v)}" for k, v in by_kind.items())
        + ")"
    )
    print(
        f"prompt tokens (estimated): p50 {C.percentile(tokens, 50):.0f}, p95 {p95:.0f}, max "
        f"{max(tokens)}; over budget: {sum(t > budget for t in tokens)}; tables kept p50 "
        f"{C.percentile(kept, 50):.0f}"
    )
    print(
        f"retrieval ms (values, examples, column similarity, pruning): p50 {p50:.0f}, p90 "
        f"{C.percentile(ms, 90):.0f}; schema load ms p50 {C.percentile(schema_ms, 50):.0f}"
    )
    print(
        "   stage p50 ms: " + ", ".join(f"{k} {C.percentile(v, 50):.0f}" for k, v in stages.items())
    )
    for q, miss, top in misses[: args.show_misses]:
        print(f"   miss: {q!r}: lost {miss}; kept {top}")
    conn.close()
    print(
        f"RESULT gold_table_recall={recall:.3f} prompt_tokens_p95={p95:.0f} retrieval_ms_p50={p50:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
