"""The request streams of the serving scenarios, as arrays (one entry per request).

- offline: every request queued at time 0 (MLPerf Offline; trtllm-bench and vLLM's
  benchmark_throughput.py submit them all at once);
- server: Poisson arrivals at ``rate`` requests/s (MLPerf Server; vLLM's benchmark_serving.py
  ``--request-rate``): exponential gaps, seeded, so a run is reproducible;
- a trace file: CSV or JSON lines with an arrival time and the two lengths per request.

Lengths are fixed, or drawn from a distribution around the given mean: ``uniform`` in
[(1-s) mean, (1+s) mean] (vLLM's random dataset, ``--random-range-ratio``), or ``lognormal`` with
coefficient of variation s (conversation datasets such as ShareGPT are heavy-tailed).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import numpy as np

from accelmap.errors import InputError

# Bounded work: 10,000 requests simulate in 0.1-0.4 s (benchmarks/simulator_speed.py), so this
# cap keeps one run under about 10 s; larger studies split the stream.
MAX_REQUESTS = 200_000
MAX_LEN = 10**9  # tokens of one prompt or output in a trace


class LengthDist(StrEnum):
    FIXED = "fixed"
    UNIFORM = "uniform"
    LOGNORMAL = "lognormal"


@dataclass(frozen=True)
class Requests:
    arrival_s: np.ndarray  # float, sorted
    prompt: np.ndarray  # int, tokens
    output: np.ndarray  # int, tokens to generate (>= 1)
    cached: np.ndarray  # int, prompt tokens found in the prefix cache

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if n == 0:
            raise InputError("a serving scenario needs at least one request")
        if not all(len(a) == n for a in (self.prompt, self.output, self.cached)):
            raise InputError("request arrays differ in length")
        if np.any(self.prompt < 1) or np.any(self.output < 1):
            raise InputError("every request needs a prompt and at least one output token")
        if np.any(np.diff(self.arrival_s) < 0):
            raise InputError("request arrival times must not decrease")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def mean_prompt(self) -> float:
        return float(np.mean(self.prompt))

    @property
    def mean_output(self) -> float:
        return float(np.mean(self.output))


def lengths(n: int, mean: int, dist: LengthDist, spread: float,
            rng: np.random.Generator) -> np.ndarray:
    """``n`` lengths around ``mean`` (each at least 1)."""
    if not np.isfinite(spread):
        raise InputError(f"--spread must be a finite fraction, got {spread}")
    if dist is LengthDist.FIXED or spread <= 0:
        return np.full(n, mean, dtype=np.int64)
    if dist is LengthDist.UNIFORM:
        if spread > 1:
            raise InputError(f"a uniform length spread is a fraction in [0, 1], got {spread}")
        lo, hi = mean * (1 - spread), mean * (1 + spread)
        out = rng.uniform(lo, hi, n)
    else:
        sigma = float(np.sqrt(np.log1p(spread ** 2)))
        out = rng.lognormal(np.log(mean) - sigma ** 2 / 2, sigma, n)
    return np.maximum(np.rint(out), 1).astype(np.int64)


def make(n: int, prompt: int, output: int, *, rate: float | None = None,
         dist: LengthDist = LengthDist.FIXED, spread: float = 0.0, prefix_hit: float = 0.0,
         seed: int = 0) -> Requests:
    """``n`` requests: all at t = 0 when ``rate`` is None (offline), else Poisson at ``rate``
    requests/s. ``prefix_hit``: the fraction of each prompt already in the prefix cache (a shared
    system prompt; vLLM automatic prefix caching, SGLang RadixAttention, Zheng et al. 2024)."""
    if not 1 <= n <= MAX_REQUESTS:
        raise InputError(f"--requests must be between 1 and {MAX_REQUESTS:,} (one simulation "
                         f"stays under ~10 s), got {n:,}")
    if rate is not None and not (rate > 0 and np.isfinite(rate)):
        raise InputError(f"--rate must be a positive number of requests per second, got {rate}")
    if not 0 <= prefix_hit < 1:
        raise InputError(f"--prefix-hit is a fraction in [0, 1), got {prefix_hit}")
    rng = np.random.default_rng(seed)
    arrivals = (np.zeros(n) if rate is None
                else np.cumsum(rng.exponential(1.0 / rate, n)) - 0.0)
    if rate is not None:
        arrivals -= arrivals[0]  # the first request arrives at t = 0
    p = lengths(n, prompt, dist, spread, rng)
    o = lengths(n, output, dist, spread, rng)
    cached = np.minimum(np.floor(p * prefix_hit).astype(np.int64), p - 1)
    return Requests(arrivals, p, o, cached)


_ARRIVAL = ("arrival_s", "timestamp", "arrival", "time")
_PROMPT = ("prompt_len", "input_len", "input_length", "prompt_tokens", "isl")
_OUTPUT = ("output_len", "output_length", "output_tokens", "osl")


def read_trace(path: Path, prefix_hit: float = 0.0) -> Requests:
    """A trace file: CSV with a header, or JSON lines, with an arrival time in seconds
    (``arrival_s``/``timestamp``) and the lengths (``prompt_len``/``input_len``,
    ``output_len``); rows are sorted by arrival."""
    from accelmap.files import MAX_TABLE_BYTES, parse_json, read_text

    text = read_text(path, "trace", MAX_TABLE_BYTES)
    rows: list[dict[str, str]]
    if path.suffix in (".jsonl", ".json") or text.lstrip().startswith("{"):
        rows = []
        for i, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                row = parse_json(line, f"trace {path}, line {i}")
                if not isinstance(row, dict):
                    raise InputError(f"trace {path}, line {i}: a request is a JSON object such "
                                     'as {"arrival_s": 0.5, "prompt_len": 512, "output_len": '
                                     "128}")
                rows.append(row)
    else:
        try:
            rows = list(csv.DictReader(text.splitlines()))
        except csv.Error as e:
            raise InputError(f"trace {path}: malformed CSV ({e})") from None
    if not rows:
        raise InputError(f"trace {path} has no requests")
    if len(rows) > MAX_REQUESTS:
        raise InputError(f"trace {path} has {len(rows):,} requests; at most {MAX_REQUESTS:,} are "
                         "simulated in one run: split the trace")

    def column(row: dict[str, str], names: tuple[str, ...], i: int) -> float:
        for k in names:
            if k in row and row[k] not in ("", None):
                try:
                    v = float(row[k])
                except (TypeError, ValueError):
                    break
                if not np.isfinite(v) or v < 0 or (names is not _ARRIVAL and v > MAX_LEN):
                    break
                return v
        raise InputError(f"trace {path}, request {i + 1}: needs a non-negative number in one "
                         f"of the columns {', '.join(names)}"
                         + ("" if names is _ARRIVAL else f" (at most {MAX_LEN:,} tokens)"))

    arr = np.array([column(r, _ARRIVAL, i) for i, r in enumerate(rows)])
    p = np.array([column(r, _PROMPT, i) for i, r in enumerate(rows)]).astype(np.int64)
    o = np.array([column(r, _OUTPUT, i) for i, r in enumerate(rows)]).astype(np.int64)
    order = np.argsort(arr, kind="stable")
    arr, p, o = arr[order] - arr[order][0], p[order], o[order]
    cached = np.minimum(np.floor(p * prefix_hit).astype(np.int64), np.maximum(p - 1, 0))
    return Requests(arr, p, o, cached)
