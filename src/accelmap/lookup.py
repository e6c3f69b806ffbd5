"""Forgiving name matching for catalog entries.

``h100`` finds every H100 variant and asks which one; ``a100 80gb`` narrows to the 80 GB parts;
a typo such as ``h10O`` gets "did you mean". Order of precedence:

1. exact id;
2. the normalised query (lower case; letters, digits and dots only) equals an id, alias or name;
3. every word of the query occurs in the entry's normalised id, alias or name;
4. otherwise: no match, with the closest names by edit similarity (difflib).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Protocol, TypeVar


class Named(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def aliases(self) -> tuple[str, ...]: ...


T = TypeVar("T", bound=Named)

# Dots stay significant: "gpt3-1.3b" and "gpt3-13b" are different models.
_NON_ALNUM = re.compile(r"[^a-z0-9.]+")


def normalize(text: str) -> str:
    return _NON_ALNUM.sub("", text.lower())


def _words(text: str) -> list[str]:
    return [w for w in _NON_ALNUM.split(text.lower()) if w]


def _labels(entry: Named) -> list[str]:
    return [entry.id, entry.name, *entry.aliases]


def find(query: str, entries: Mapping[str, T]) -> list[T]:
    """All entries the query could mean, best tier only (empty list when none)."""
    if query in entries:
        return [entries[query]]
    q = normalize(query)
    if not q:
        return []
    exact = [e for e in entries.values() if any(normalize(x) == q for x in _labels(e))]
    if exact:
        return exact
    words = _words(query)
    return [
        e
        for e in entries.values()
        if all(any(w in normalize(x) for x in _labels(e)) for w in words)
    ]


def suggestions(query: str, entries: Mapping[str, Named], n: int = 3) -> list[str]:
    """Closest ids by similarity of the normalised id, name and aliases to the query."""
    q = normalize(query)
    scored: dict[str, float] = {}
    for e in entries.values():
        for label in _labels(e):
            score = difflib.SequenceMatcher(None, q, normalize(label)).ratio()
            scored[e.id] = max(scored.get(e.id, 0.0), score)
    best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
    return [eid for eid, score in best[:n] if score >= 0.5]


def resolve(query: str, entries: Mapping[str, T], what: str, list_command: str) -> T:
    """Exactly one entry for ``query``, or a NotFound/Ambiguous error with a helpful sentence."""
    from accelmap.errors import AmbiguousNameError, NotFoundError

    matches = find(query, entries)
    if len(matches) == 1:
        return matches[0]
    if matches:
        ids = sorted(m.id for m in matches)
        raise AmbiguousNameError(
            f"{query!r} matches {len(ids)} {what}s: {', '.join(ids)}; give one of these ids",
            ids,
        )
    near = suggestions(query, entries)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise NotFoundError(f"unknown {what} {query!r}{hint} ('{list_command}' lists them all)")
