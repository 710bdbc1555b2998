"""The profile of a test run from pytest's JUnit XML (``--junitxml FILE``): per test directory
the tests by outcome and the seconds they took (setup, call and teardown summed: with
pytest-xdist, the sum over workers), then the slowest files.

    python3 scripts/test_profile.py FILE [--files N]

docs/benchmarks.md ("The test suite's time") shows its output before and after a change.
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET


def outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        el = case.find(tag)
        if el is not None:
            if tag == "skipped" and el.get("type") == "pytest.xfail":
                return "xfailed"
            return {"failure": "failed"}.get(tag, tag)
    return "passed"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit_xml")
    ap.add_argument("--files", type=int, default=15, help="the slowest N files (default 15)")
    a = ap.parse_args()
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    secs: collections.Counter = collections.Counter()
    file_secs: collections.Counter = collections.Counter()
    for case in ET.parse(a.junit_xml).iter("testcase"):
        cls = case.get("classname", "")  # tests.db.test_x or tests.db.test_x.TestClass
        parts = cls.split(".")
        folder = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
        module = "/".join(p for p in parts if not p[:1].isupper()) + ".py"
        t = float(case.get("time", 0))
        counts[folder][outcome(case)] += 1
        secs[folder] += t
        file_secs[module] += t
    kinds = ["passed", "failed", "error", "skipped", "xfailed"]
    print(f"{'directory':<16}{'tests':>7}" + "".join(f"{k:>9}" for k in kinds) + f"{'s':>9}")
    total: collections.Counter = collections.Counter()
    for folder in sorted(counts):
        c = counts[folder]
        total.update(c)
        print(
            f"{folder:<16}{sum(c.values()):>7}"
            + "".join(f"{c[k]:>9}" for k in kinds)
            + f"{secs[folder]:>9.0f}"
        )
    print(
        f"{'all':<16}{sum(total.values()):>7}"
        + "".join(f"{total[k]:>9}" for k in kinds)
        + f"{sum(secs.values()):>9.0f}"
    )
    print(f"\nthe slowest {a.files} files (s):")
    for module, t in file_secs.most_common(a.files):
        print(f"{t:>8.0f}  {module}")


if __name__ == "__main__":
    main()
