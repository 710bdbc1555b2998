#!/usr/bin/env python3
"""What the one outbound rule costs a request (``nl2sql.net.deadline``, docs/internals/net.md):
the wall time ``deadline.run`` adds to a request that returns at once, made here (beside the
database: no cancel point, the request on the calling thread) and as a backend makes it (a
cancel point installed: the request on a kept call thread while this thread waits in slices).
A backend makes one to three such requests a question (the embedder's socket), and one probe a
model per process.

Usage: python bench/deadline.py [--requests 20000]
The last line printed is ``RESULT direct_us=… sliced_us=… requests=…`` (medians, microseconds).
"""

from __future__ import annotations

import argparse
import statistics
import time

from nl2sql.net import deadline


def median_us(n: int) -> float:
    """The median wall time of ``n`` calls of ``deadline.run`` on a request that returns at once.

    Args:
        n: calls measured (after 200 not counted).

    Returns:
        Microseconds.
    """
    times = []
    for i in range(n + 200):
        t0 = time.perf_counter()
        deadline.run(lambda d: None, 5.0, "a request")
        if i >= 200:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=20000, help="requests measured per mode")
    args = ap.parse_args()
    direct = median_us(args.requests)
    deadline.install(lambda: None)  # as a backend's door installs spi.cancel_point
    try:
        sliced = median_us(args.requests)
    finally:
        deadline.install(None)
    print(f"direct (beside the database): {direct:.1f} us a request")
    print(f"sliced (a backend: call thread, cancel point): {sliced:.1f} us a request")
    print(f"RESULT direct_us={direct:.1f} sliced_us={sliced:.1f} requests={args.requests}")


if __name__ == "__main__":
    main()
