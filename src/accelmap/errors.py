"""User-facing errors: each carries one sentence that says what is wrong and how to fix it.

The CLI prints ``str(error)`` on one line and exits non-zero; it never shows a traceback for these.
Programming errors (bugs) stay ordinary exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class AccelmapError(Exception):
    """Base class for errors caused by user input; the message is the whole story."""

    exit_code = 2


class InputError(AccelmapError, ValueError):
    """A value the user gave cannot be used (bad unit, non-positive size, malformed file)."""


class CatalogError(AccelmapError):
    """A catalog file is malformed or does not match the schema; names the file and the field."""


class NotFoundError(AccelmapError, LookupError):
    """A name matched nothing in a catalog; the message offers the closest names."""


class AmbiguousNameError(AccelmapError, LookupError):
    """A name matched several catalog entries; the message lists them so the user can choose."""

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates


class UnsupportedModelError(AccelmapError):
    """A Hugging Face config whose ``model_type`` has no mapper (lists the supported ones)."""


def clip(text: object, n: int = 80) -> str:
    """``text`` as a string of at most ``n`` characters, with an ellipsis where it was cut."""
    s = str(text)
    return s if len(s) <= n else s[: n - 1] + "…"


def validation_message(err: Mapping[str, Any]) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as a sentence: bounds say
    the value and the limit; the value is clipped, so a 100k-character input is not echoed."""
    kind, ctx, value = err.get("type", ""), err.get("ctx") or {}, err.get("input")
    shown = clip(repr(value), 40)
    if kind == "less_than_equal":
        return f"{shown} is above the limit {_num(ctx.get('le'))}"
    if kind == "less_than":
        return f"{shown} must be below {_num(ctx.get('lt'))}"
    if kind == "greater_than":
        return f"{shown} must be greater than {_num(ctx.get('gt'))}"
    if kind == "greater_than_equal":
        return f"{shown} must be at least {_num(ctx.get('ge'))}"
    return clip(str(err.get("msg", "invalid value")).removeprefix("Value error, "), 240)


def _num(x: object) -> str:
    return f"{x:,}" if isinstance(x, int) else str(x)
