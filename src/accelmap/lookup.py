"""Forgiving name matching for catalog entries.

``h100`` finds every H100 variant and asks which one; ``a100 80gb`` narrows to the 80 GB parts;
a typo such as ``h10O`` gets "did you mean". Order of precedence:

1. exact id;
2. the normalised query (lower case; letters, digits and dots only) equals an id, alias or name;
3. every word of the query occurs in the entry's normalised id, alias or name, starting where
   one of its words starts ('sxm' finds 'h100-sxm5-80gb', '00' finds nothing); a query of
   bare counts ('64x', '8') finds nothing;
4. otherwise: no match, with the closest names by edit similarity (difflib).

What the user types goes through :func:`resolve`, which first reads the name as NFKC
(full-width 'ｈ１００' is 'h100') and refuses what is then still not printable ASCII (a Cyrillic
'Н' that looks like 'H' is not guessed at) or longer than MAX_NAME characters, so the work per
lookup is bounded. A match that is not the exact id is reported to the hook installed with
:func:`on_resolve` (the CLI prints "note: accelerator 'h100 sxm' → h100-sxm5-80gb").
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
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


MAX_NAME = 200  # characters of a name to look up: ids are under 40
SHOWN = 8  # candidates an ambiguous name lists
_COUNT = re.compile(r"x|x?[0-9.]+x?")


def _words(text: str) -> list[str]:
    """The words of a query or label; a word without a letter or digit ('.', '*') is no word."""
    return [w for w in _NON_ALNUM.split(text.lower()) if w.strip(".")]


def _labels(entry: Named) -> list[str]:
    return [entry.id, entry.name, *entry.aliases]


def _word_in(word: str, label: str) -> bool:
    """Whether ``word`` occurs in the normalised label starting where one of its words does;
    a one-letter word only as a whole word ('x' is not a guess at 'xl'; '3' still finds
    '3.1')."""
    words = _words(label)
    if len(word) == 1 and word.isalpha():
        return word in words
    flat, start = "", []
    for w in words:
        start.append(len(flat))
        flat += w
    return any(flat.startswith(word, i) for i in start)


def find(query: str, entries: Mapping[str, T]) -> list[T]:
    """All entries the query could mean, best tier only (empty list when none, and for a query
    longer than MAX_NAME)."""
    if query in entries:
        return [entries[query]]
    if len(query) > MAX_NAME:
        return []
    q = normalize(query)
    if not q.strip("."):
        return []
    exact = [e for e in entries.values() if any(normalize(x) == q for x in _labels(e))]
    if exact:
        return exact
    words = _words(query)
    if not words or all(_COUNT.fullmatch(w) for w in words):
        return []  # '64x', '8': a count, not a name; no entry is guessed from it
    return [e for e in entries.values()
            if all(any(_word_in(w, x) for x in _labels(e)) for w in words)]


def suggestions(query: str, entries: Mapping[str, Named], n: int = 3) -> list[str]:
    """Closest ids by similarity of the normalised id, name and aliases to the query."""
    q = normalize(query[:MAX_NAME])
    scored: dict[str, float] = {}
    for e in entries.values():
        for label in _labels(e):
            score = difflib.SequenceMatcher(None, q, normalize(label)).ratio()
            scored[e.id] = max(scored.get(e.id, 0.0), score)
    best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
    return [eid for eid, score in best[:n] if score >= 0.5]


def checked_name(query: str, what: str) -> str:
    """``query`` as NFKC text, or an InputError when it is too long or, after NFKC, holds a
    character that is not printable ASCII (a look-alike letter, a control character)."""
    from accelmap.errors import InputError

    if len(query) > MAX_NAME:
        raise InputError(f"the {what} name is {len(query):,} characters long; names are at "
                         f"most {MAX_NAME}")
    text = unicodedata.normalize("NFKC", query)
    odd = next((c for c in text if not (c.isascii() and c.isprintable())), None)
    if odd is not None:
        label = unicodedata.name(odd, "a control character")
        raise InputError(f"{what} {text!r} holds {label} (U+{ord(odd):04X}), which is not "
                         "plain ASCII: type the name in ASCII letters and digits")
    return text


# -- what a name resolved to ---------------------------------------------------------------------
Hook = Callable[[str, str, str], None]  # (what, query, id)
_HOOK: ContextVar[Hook | None] = ContextVar("accelmap_lookup_hook", default=None)


@contextmanager
def on_resolve(hook: Hook) -> Iterator[None]:
    """Call ``hook(what, query, id)`` whenever :func:`resolve` matches a name that is not the
    exact id, while the context is open."""
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)


def report(what: str, query: str, eid: str) -> None:
    """Tell the hook (if any) that ``query`` was read as ``eid``: for callers that settle a
    name themselves (an ambiguous 'H100' in a cluster is the variant systems are built of)."""
    hook = _HOOK.get()
    if hook is not None and query != eid:
        hook(what, query, eid)


def resolve(query: str, entries: Mapping[str, T], what: str, list_command: str) -> T:
    """Exactly one entry for ``query``, or a NotFound/Ambiguous error with a helpful sentence."""
    from accelmap.errors import AmbiguousNameError, NotFoundError

    if query in entries:
        return entries[query]
    name = checked_name(query, what)
    matches = find(name, entries)
    if len(matches) == 1:
        report(what, query, matches[0].id)
        return matches[0]
    if matches:
        ids = sorted(m.id for m in matches)
        shown = ", ".join(ids[:SHOWN]) + (f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN
                                          else "")
        raise AmbiguousNameError(
            f"{name!r} matches {len(ids)} {what}s: {shown}; give one of these ids", ids)
    near = suggestions(name, entries)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise NotFoundError(f"unknown {what} {name!r}{hint} ('{list_command}' lists them all)")
