"""Text to values: dtypes, enum choices, counts, batch sizes in tokens, durations and phases, each
with one clear ``InputError``.

Light at import (``accelmap.units`` and ``accelmap.errors`` only).
"""

from __future__ import annotations

import math
import re
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from accelmap.errors import InputError
from accelmap.lookup import on_resolve
from accelmap.units import DType, known_dtype_words, parse_dtype

__all__ = ["batch_tokens", "choice", "count", "dtype", "duration", "framework", "on_resolve",
           "phase", "sequences_per_step"]

if TYPE_CHECKING:
    from accelmap.workload import Phase

E = TypeVar("E", bound=Enum)


def dtype(text: str | DType, what: str = "") -> DType:
    """A DType from its name or a library spelling ("bfloat16"); one line if unknown."""
    if isinstance(text, DType):
        return text
    dt = parse_dtype(text)
    if dt is None:
        raise InputError(f"unknown {what + ' ' if what else ''}dtype {text!r}; use one of "
                         f"{known_dtype_words()}")
    return dt


def choice(enum: type[E], text: str | E, what: str) -> E:
    """A member of ``enum`` from its value, ignoring case: ``choice(Phase, "Decode", "phase")``.
    Unknown text raises "unknown {what} ...; use one of ..."."""
    if isinstance(text, enum):
        return text
    try:
        return enum(str(text).lower())
    except ValueError:
        raise InputError(f"unknown {what} {text!r}; use one of "
                         f"{', '.join(str(e.value) for e in enum)}") from None


def count(text: str | float) -> float:
    """A positive count such as '2T', '300B', '1.5e12' (k, M, B/G, T are powers of 1000)."""
    scale = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
    t = str(text).strip().lower()
    try:
        n = float(t[:-1]) * scale[t[-1]] if t and t[-1] in scale else float(t)
    except ValueError:
        n = math.nan
    if not (math.isfinite(n) and n > 0):
        raise InputError(f"cannot read {text!r} as a positive token count; write e.g. 2T or 2e12")
    if n > MAX_COUNT:
        raise InputError(f"{text!r} is more than {MAX_COUNT:.0e} tokens; write e.g. 15T")
    return n


MAX_COUNT = 1e18  # tokens: a million times the largest training run


def batch_tokens(text: str | float) -> float:
    """Tokens per optimizer step; K and M are binary here, as papers count batches: '4M' is
    4 x 2^20 (GPT-3's '0.5M' is 2^19). Anything else reads as ``count`` ('2e6', '1B')."""
    t = str(text).strip().upper()
    if t and t[-1] in "KM" and t[:-1].replace(".", "", 1).isdigit():
        return float(t[:-1]) * (2**10 if t[-1] == "K" else 2**20)
    return count(text)


def sequences_per_step(global_batch_tokens: str | float, seq: int) -> int:
    """Sequences per optimizer step from ``global_batch_tokens`` (binary K/M): rounded to the
    nearest whole sequence; fewer tokens than one sequence of ``seq`` is an InputError (it
    would silently become one sequence)."""
    tokens = batch_tokens(global_batch_tokens)
    if tokens < seq:
        raise InputError(f"--global-batch-tokens {global_batch_tokens} is less than one sequence "
                         f"of --seq {seq} tokens; give at least {seq} (e.g. 4M) or a shorter "
                         "--seq")
    return round(tokens / seq)


# Stacks that only serve (inference engines) and only train; the others do both.
SERVING_STACKS = ("tensorrt-llm", "tensorrt-llm-1", "vllm", "sglang", "llama.cpp")
TRAINING_STACKS = ("megatron", "fsdp")


def framework(text: str | None, train: bool) -> str | None:
    """A framework name checked against the job: a serving engine (vllm, tensorrt-llm, sglang,
    llama.cpp) does not train and a training stack (megatron, fsdp) does not serve; None stays
    None (the device class's default)."""
    if text is None:
        return None
    from accelmap.cost.framework import Framework

    wrong = SERVING_STACKS if train else TRAINING_STACKS
    ok = [f.value for f in Framework if f.value not in wrong]
    try:  # an unknown name lists only the stacks this job takes (one line, under 300 chars)
        fw = Framework(text.strip().lower())
    except ValueError:
        raise InputError(f"unknown framework {text.strip()!r}; "
                         f"{'training' if train else 'serving'} takes: {', '.join(ok)}"
                         ) from None
    if fw.value in wrong:
        raise InputError(f"--framework {fw.value} is a {'serving' if train else 'training'} "
                         f"stack; {'training' if train else 'serving'} takes one of "
                         f"{', '.join(ok)}")
    return fw.value


_DURATION = re.compile(r"^\s*([0-9.]+)\s*(ms|s|min|m|h|d|w)?\s*$")
_SECONDS = {"ms": 1e-3, "s": 1.0, None: 1.0, "min": 60.0, "m": 60.0, "h": 3600.0,
            "d": 86400.0, "w": 604800.0}


MAX_DURATION_S = 100 * 365.25 * 86400  # a century: past any deadline, SLO or budget


def duration(text: str | float) -> float:
    """Seconds from '500ms', '2s', '5min' (or '5m'), '3h', '60d', '2w'; a bare number is
    seconds. More than zero and at most a century."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _DURATION.match(str(text))
        try:
            if not m:
                raise ValueError
            value = float(m.group(1)) * _SECONDS[m.group(2)]
        except ValueError:  # no match, or '.' and '1.2.3'
            raise InputError(f"cannot read {text!r} as a duration: write e.g. 500ms, 2s, 60d"
                             ) from None
    if not (math.isfinite(value) and 0 < value <= MAX_DURATION_S):
        raise InputError(f"duration {text!r} must be more than 0 and at most 100 years; write "
                         "e.g. 500ms, 2s, 60d")
    return value


def phase(text: str | Phase) -> Phase:
    """train, prefill or decode."""
    from accelmap.workload import Phase

    return choice(Phase, text, "phase")
