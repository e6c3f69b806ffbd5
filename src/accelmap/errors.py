"""User-facing errors: each carries one sentence that says what is wrong and how to fix it.

The CLI prints ``str(error)`` on one line and exits non-zero; it never shows a traceback for these.
Programming errors (bugs) stay ordinary exceptions.
"""

from __future__ import annotations


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
