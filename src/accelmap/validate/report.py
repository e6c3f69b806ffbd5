"""Error summary of predictions: overall, per source, per metric kind and per phase.

Only scored rows (status ``ok``) enter the statistics; calibration rows are listed apart, skipped
rows are counted by reason. For each group: count, median and 90th-percentile absolute % error
(numpy's linear interpolation between order statistics), the median *signed* error, positive
when accelmap predicts faster than measured (optimism bias: a planner that picks the best of many
plans selects where the model is most optimistic, so the bias matters as much as the spread),
and how many published configurations the engine predicts NOT to fit in memory. Phase groups
the metric kinds as training, inference (decode, first-token latency, serving throughput) and
microbenchmark (matmul, bandwidth); serving scenario rows
(offline throughput, server throughput, latency percentiles) are inference too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelmap.validate.outcome import MetricKind, Prediction, Status

PHASE: dict[MetricKind, str] = {
    MetricKind.TRAINING: "training",
    MetricKind.DECODE: "inference", MetricKind.TTFT: "inference",
    MetricKind.THROUGHPUT: "inference",
    MetricKind.OFFLINE: "inference", MetricKind.SERVER: "inference",
    MetricKind.CONCURRENCY: "inference",
    MetricKind.LATENCY: "inference",
    MetricKind.MATMUL: "microbenchmark", MetricKind.BANDWIDTH: "microbenchmark",
}


@dataclass(frozen=True)
class GroupStats:
    n: int
    median_abs_pct_error: float | None
    p90_abs_pct_error: float | None
    median_signed_pct_error: float | None
    max_abs_pct_error: float | None
    n_not_fit: int = 0  # scored rows whose published configuration is predicted not to fit

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "median_abs_pct_error": self.median_abs_pct_error,
                "p90_abs_pct_error": self.p90_abs_pct_error,
                "median_signed_pct_error": self.median_signed_pct_error,
                "max_abs_pct_error": self.max_abs_pct_error, "n_not_fit": self.n_not_fit}


def stats(preds: Iterable[Prediction]) -> GroupStats:
    scored = [p for p in preds if p.status is Status.OK and p.abs_pct_error is not None]
    if not scored:
        return GroupStats(0, None, None, None, None)
    abs_err = np.array([p.abs_pct_error for p in scored], dtype=float)
    signed = np.array([p.signed_pct_error for p in scored], dtype=float)
    return GroupStats(len(scored), float(np.median(abs_err)), float(np.percentile(abs_err, 90)),
                      float(np.median(signed)), float(abs_err.max()),
                      sum(p.fits is False for p in scored))


@dataclass(frozen=True)
class Summary:
    overall: GroupStats
    by_source: dict[str, GroupStats]
    by_kind: dict[str, GroupStats]
    by_phase: dict[str, GroupStats]
    calibration_rows: tuple[str, ...]
    skipped: dict[str, tuple[str, ...]]  # first reason -> row ids
    not_fitting: tuple[str, ...]  # scored rows whose published configuration is predicted OOM
    n_rows: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.overall.to_dict(),
            "n_rows": self.n_rows,
            "n_skipped": sum(len(v) for v in self.skipped.values()),
            "n_calibration": len(self.calibration_rows),
            "calibration_rows": list(self.calibration_rows),
            "predicted_not_to_fit": list(self.not_fitting),
            "by_source": {k: v.to_dict() for k, v in self.by_source.items()},
            "by_kind": {k: v.to_dict() for k, v in self.by_kind.items()},
            "by_phase": {k: v.to_dict() for k, v in self.by_phase.items()},
            "skipped_by_reason": {k: list(v) for k, v in self.skipped.items()},
        }


def first_reason(p: Prediction) -> str:
    """The first of the "; "-joined reasons (a "; " inside a quoted name does not split, and a
    fix "; write ..." stays with the problem it fixes)."""
    text = p.skipped_reason or "unknown"
    quoted = False
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted and text.startswith("; ", i) and not text.startswith("; write ", i):
            return text[:i]
    return text


def summarize(preds: list[Prediction]) -> Summary:
    skipped: dict[str, list[str]] = {}
    for p in preds:
        if p.status is Status.SKIPPED:
            skipped.setdefault(first_reason(p), []).append(p.row_id)
    order = Counter({k: len(v) for k, v in skipped.items()})
    return Summary(
        overall=stats(preds),
        by_source=_by_source(preds),
        by_kind=_by_kind(preds),
        by_phase=_by_phase(preds),
        calibration_rows=tuple(p.row_id for p in preds if p.status is Status.CALIBRATION),
        skipped={k: tuple(skipped[k]) for k, _ in order.most_common()},
        not_fitting=tuple(p.row_id for p in preds if p.status is Status.OK and p.fits is False),
        n_rows=len(preds),
    )


def _by_source(preds: list[Prediction]) -> dict[str, GroupStats]:
    names = sorted({p.source for p in preds if p.status is Status.OK})
    return {n: stats(p for p in preds if p.source == n) for n in names}


def _by_kind(preds: list[Prediction]) -> dict[str, GroupStats]:
    kinds = sorted({p.kind.value for p in preds if p.status is Status.OK and p.kind})
    return {k: stats(p for p in preds if p.kind is not None and p.kind.value == k) for k in kinds}


def _by_phase(preds: list[Prediction]) -> dict[str, GroupStats]:
    phases = sorted({PHASE[p.kind] for p in preds if p.status is Status.OK and p.kind})
    return {ph: stats(p for p in preds if p.kind is not None and PHASE[p.kind] == ph)
            for ph in phases}


def compress_ids(ids: Iterable[str]) -> str:
    """'I0009 I0010 I0011 I0013' -> 'I0009-I0011, I0013' (runs of consecutive numbers)."""
    out: list[str] = []
    run: list[tuple[str, int, str]] = []

    def flush() -> None:
        if run:
            out.append(run[0][2] if len(run) == 1 else f"{run[0][2]}-{run[-1][2]}")
            run.clear()

    for rid in ids:
        prefix, digits = rid.rstrip("0123456789"), rid[len(rid.rstrip("0123456789")):]
        if not digits:
            flush()
            out.append(rid)
            continue
        num = int(digits)
        if run and (run[-1][0] != prefix or run[-1][1] + 1 != num):
            flush()
        run.append((prefix, num, rid))
    flush()
    return ", ".join(out)
