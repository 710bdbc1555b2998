"""YAML read under bounds checked while the node graph is composed, before any Python object
is built: nesting depth, alias references, and the size of the document with every alias
expanded (a few hundred bytes of nested aliases, "billion laughs", would otherwise build a
graph that expands exponentially once walked); a cancel is let in while parsing
(docs/semantic-model.md, "Bounds on the YAML")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from ..core.errors import ConfigError

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml: its pure-Python parser
    CParser = None

MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences, aliases expanded (a Cortex Analyst model nests
about 7 deep; PyYAML's composer and every walk of the result recurse once per level)."""
MAX_ALIASES = 1000
"""Most alias references (``*name``) in one text."""
TICK_S = 0.2
"""Seconds between two calls of the cancel check while parsing."""
_EVERY = 256  # nodes between two looks at the clock


class _BoundedComposer(Composer):
    """PyYAML's composer that counts as it composes: depth, aliases, and each node's expanded
    weight (a scalar weighs its characters, at least 1; a collection 1 plus its members'; an
    alias what its anchor weighs) and height."""

    def _start_bounds(self, max_weight: int, what: str, tick: Callable[[], None] | None) -> None:
        self._max_weight, self._what, self._tick = max_weight, what, tick
        self._depth = self._weight = self._aliases = self._nodes = 0
        self._done: dict[int, tuple[int, int]] = {}  # id(node) -> (weight, height)
        self._heights: list[int] = []  # per open collection: its members' greatest height
        self._last = time.monotonic()

    def _check_in(self) -> None:
        """Count a node; every ``_EVERY`` nodes, run the cancel check if ``TICK_S`` passed."""
        self._nodes += 1
        if self._tick is not None and self._nodes % _EVERY == 0:
            now = time.monotonic()
            if now - self._last >= TICK_S:
                self._last = now
                self._tick()

    def _add(self, weight: int, height: int) -> None:
        """Add a node's weight to the document's and its height to its parent's."""
        self._weight += weight
        if self._weight > self._max_weight:
            raise ConfigError(
                f"{self._what} would hold more than {self._max_weight:,} characters and nodes "
                "with its aliases (*name) expanded (a YAML alias bomb?); the limit is setting "
                "semantic_model_max_bytes: write the repeated parts out, or raise the setting"
            )
        if self._depth + height > MAX_DEPTH:
            raise ConfigError(
                f"{self._what} nests deeper than {MAX_DEPTH} levels of mappings and sequences "
                "(aliases expanded)"
            )
        if self._heights:
            self._heights[-1] = max(self._heights[-1], height)

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Compose one node (PyYAML's ``Composer.compose_node``) within the bounds.

        Args:
            parent, index: as PyYAML passes them (path resolution).

        Returns:
            The node.

        Raises:
            ConfigError: past ``MAX_DEPTH``, ``MAX_ALIASES`` or the expanded size; an
                alias inside its own anchor.
        """
        self._check_in()
        if self.check_event(AliasEvent):
            anchor = self.peek_event().anchor
            node = self.anchors.get(anchor)
            if node is not None:  # an undefined one: PyYAML's own error
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    raise ConfigError(
                        f"{self._what} has more than {MAX_ALIASES} alias references (*name): "
                        "write the repeated parts out"
                    )
                if id(node) not in self._done:
                    raise ConfigError(
                        f"{self._what} has an alias *{anchor} inside its own anchor &{anchor} "
                        "(a structure that contains itself)"
                    )
                self._add(*self._done[id(node)])
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ConfigError(
                f"{self._what} nests deeper than {MAX_DEPTH} levels of mappings and sequences"
            )
        start = self._weight
        self._heights.append(0)
        try:
            node = super().compose_node(parent, index)
        finally:
            below = self._heights.pop()
            self._depth -= 1
        own = max(1, len(node.value)) if isinstance(node, ScalarNode) else 1
        height = 1 if isinstance(node, ScalarNode) else 1 + below
        self._add(own, height)
        self._done[id(node)] = (self._weight - start, height)
        return node


class _Constructing(SafeConstructor):
    """PyYAML's safe constructor that lets a cancel in between nodes."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        """Build one node's object (PyYAML's ``construct_object``), counting it for the check.

        Args:
            node, deep: as PyYAML passes them.

        Returns:
            The object.
        """
        self._check_in()
        return super().construct_object(node, deep)


class _PyLoader(_BoundedComposer, _Constructing, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader under the bounded composer (PyYAML without libyaml)."""


_Loader: type = _PyLoader
if CParser is not None:

    class _CLoader(_BoundedComposer, CParser, _Constructing, Resolver):
        """libyaml's event parser (about 3 times faster) under the bounded composer and the
        safe constructor."""

        def __init__(self, stream: str):
            CParser.__init__(self, stream)
            Composer.__init__(self)
            _Constructing.__init__(self)
            Resolver.__init__(self)

    _Loader = _CLoader


def load(text: str, max_weight: int, what: str, tick: Callable[[], None] | None = None) -> Any:
    """Read one YAML document as ``yaml.safe_load`` does (no Python objects), within the bounds.

    Args:
        text: the YAML text.
        max_weight: the largest expanded size (see ``_BoundedComposer``).
        what: the text's name in messages (``the semantic model``).
        tick: called every ``TICK_S`` seconds or so while parsing (``spi.cancel_point``); None
            for none.

    Returns:
        The document's value (None for an empty document).

    Raises:
        ConfigError: past a bound; the message names it.
        yaml.YAMLError: not YAML (several documents included).
    """
    loader = _Loader(text)
    loader._start_bounds(max_weight, what, tick)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
