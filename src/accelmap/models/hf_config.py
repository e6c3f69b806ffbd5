"""A Hugging Face ``config.json`` as the mappers read it (``HFConfig``: a key or its class
default, errors that name the file and the key) and the registry of mappers by ``model_type``.
The mappers (``models/mappers/``) register themselves here; ``models.hf`` imports them and
looks them up, so neither imports the other in a circle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelmap.errors import InputError

_MISSING = object()


class HFConfig:
    """Read-only view of a config.json with field errors that name the file and the key."""

    def __init__(self, data: dict[str, Any], origin: str) -> None:
        self.data = data
        self.origin = origin
        # absent keys that took the mapper's class default (transformers' *Config defaults),
        # first key of each read -> the value taken; said in the spec's notes
        self.defaulted: dict[str, Any] = {}

    @property
    def model_type(self) -> str:
        return str(self.data.get("model_type", ""))

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        """First present (non-null) key among ``keys``; ``default`` if none; error if no default."""
        for key in keys:
            if self.data.get(key) is not None:
                return self.data[key]
        if default is _MISSING:
            raise InputError(
                f"{self.origin}: field {' or '.join(repr(k) for k in keys)} is missing, and the "
                f"{self.model_type!r} mapper needs it"
            )
        if default is not None and keys:
            self.defaulted.setdefault(keys[0], default)
        return default

    def int(self, *keys: str, default: Any = _MISSING) -> Any:
        value = self.get(*keys, default=default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise InputError(
                f"{self.origin}: field {keys[0]!r} should be an integer, got {value!r}"
            )
        return int(value)


Mapper = Callable[[HFConfig], dict[str, Any]]
_MAPPERS: dict[str, Mapper] = {}
_ALIASES: set[str] = set()  # further model_types of one mapper (llama4_text), not listed


def register(*model_types: str) -> Callable[[Mapper], Mapper]:
    """Register a mapper for one or more ``model_type`` values; a duplicate fails loudly."""

    def wrap(fn: Mapper) -> Mapper:
        _ALIASES.update(model_types[1:])
        for t in model_types:
            if t in _MAPPERS:
                raise RuntimeError(f"model_type {t!r} has two mappers: {_MAPPERS[t]} and {fn}")
            _MAPPERS[t] = fn
        return fn

    return wrap
