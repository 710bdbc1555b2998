"""Timing of a pipeline call in milliseconds (docs/internals/core.md "Timing")."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Open:
    """A stage being timed: its start and the model wait / excluded time inside it."""

    t0: float
    excluded_ms: float = 0.0

    def exclude(self, ms: float) -> None:
        """Leave ``ms`` milliseconds (measured elsewhere, e.g. by a callee) out of this stage."""
        self.excluded_ms += ms


@dataclass
class StageTimer:
    """Timings of one call of the pipeline."""

    t_start: float = field(default_factory=time.perf_counter)  # perf_counter seconds
    timings: dict[str, float] = field(default_factory=dict)  # stage -> ms, model waits excluded
    waits: dict[str, float] = field(default_factory=dict)  # model round -> ms waited
    overlapped_ms: dict[str, float] = field(default_factory=dict)  # work while models were out
    _open: list[_Open] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[_Open]:
        """Time the block as stage ``name``, less the model waits recorded inside it (added to what
        the name holds; what the block ``exclude``s on the yielded handle is left out too).

        Args:
            name: the key in ``timings`` (e.g. ``"presql_round_ms"``).

        Returns:
            A context manager yielding the open stage; a block that raises is not recorded.
        """
        st = _Open(time.perf_counter())
        self._open.append(st)
        try:
            yield st
        finally:
            self._open.remove(st)
        self.add(name, (time.perf_counter() - st.t0) * 1000 - st.excluded_ms)

    def add(self, name: str, ms: float) -> None:
        """Add a figure measured elsewhere (e.g. retrieval's) to ``timings[name]``.

        Args:
            name: the key in ``timings``.
            ms: milliseconds.
        """
        self.timings[name] = self.timings.get(name, 0.0) + ms

    def add_all(self, figures: Mapping[str, float]) -> None:
        """Add each of several figures measured elsewhere, as ``add`` does.

        Args:
            figures: name -> milliseconds.
        """
        for name, ms in figures.items():
            self.add(name, ms)

    def exclude(self, ms: float) -> None:
        """Leave time recorded under a key of its own (``columns_ms``) out of every stage open now.

        Args:
            ms: milliseconds.
        """
        for st in self._open:
            st.exclude(ms)

    def waited(self, name: str, ms: float) -> None:
        """Record time spent waiting on models; it is excluded from every stage open now.

        Args:
            name: the model round (key of ``llm_waits_ms``).
            ms: milliseconds waited.
        """
        self.waits[name] = self.waits.get(name, 0.0) + ms
        self.exclude(ms)

    def model_wait(self, name: str) -> AbstractContextManager[None]:
        """Time the block as a wait on models (see ``waited``).

        Args:
            name: the model round (key of ``llm_waits_ms``).

        Returns:
            A context manager; the wait is recorded also when the block raises.
        """
        return _timed(self.waited, name)

    def overlapped(self, name: str, ms: float) -> None:
        """Record work done while models were out, in ``overlapped_ms[name]``.

        Args:
            name: the key in ``overlapped_ms``.
            ms: milliseconds; nothing is recorded for 0 (no work was left to do).
        """
        if ms:
            self.overlapped_ms[name] = self.overlapped_ms.get(name, 0.0) + ms

    def overlap(self, name: str) -> AbstractContextManager[None]:
        """Time the block as work overlapped with model calls (see ``overlapped``).

        Args:
            name: the key in ``overlapped_ms``.

        Returns:
            A context manager; the time is recorded also when the block raises.
        """
        return _timed(self.overlapped, name)

    def finish(self, trace: dict[str, Any]) -> None:
        """Write the figures into the trace: ``timings`` (with ``llm_wait_ms``, ``total_ms``,
        ``overhead_ms`` = total − model waits), ``llm_waits_ms`` and ``overlapped_ms``.

        Args:
            trace: the call's trace, changed in place.
        """
        total = (time.perf_counter() - self.t_start) * 1000
        wait_ms = sum(self.waits.values())
        trace["llm_waits_ms"] = {k: round(v, 3) for k, v in self.waits.items()}
        trace["overlapped_ms"] = {k: round(v, 3) for k, v in self.overlapped_ms.items()}
        timings = {k: round(v, 3) for k, v in self.timings.items()}
        timings["llm_wait_ms"] = round(wait_ms, 3)
        timings["total_ms"] = round(total, 3)
        timings["overhead_ms"] = round(total - wait_ms, 3)
        trace["timings"] = timings


@contextmanager
def _timed(record: Callable[[str, float], None], name: str) -> Iterator[None]:
    """Time the block and pass (``name``, its milliseconds) to ``record``, even when it raises."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        record(name, (time.perf_counter() - t0) * 1000)
