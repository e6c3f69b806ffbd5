"""Read the shared measurement files (inference, training, matmul) into typed, frozen rows.

The format is recognised from the header, never from the file name, so a user's own file in one
of these layouts works too. A canonical run file (``docs/validate-format.md``: a YAML file, or
a CSV whose header holds ``accelerator``, ``metric`` and ``value``) is read by
``validate/canonical.py`` into :class:`~accelmap.validate.runs.TrainingRun` records instead.
Cells follow the conventions of ``shared/reference/measurements/SOURCES.md``: ``?`` marks a
value the source does not state or that could not be verified, and text after ``?`` is an
unverified best reading. :func:`parse_number` turns a cell into
``(value, verified)``:

- ``""``, ``"?"``, ``"n/a"``, ``"-"``, ``"? (MP=8)"`` (unknown; the reading after ``?`` is not
  used), ``"40 or 80 ?"`` (ambiguous) -> ``(None, False)``;
- ``"8192?"``, ``"~32"``, ``"8192 (llama3_8b.toml default)?"`` -> the number, unverified;
- ``"128256 (HF)"``, ``"2,657"``, ``"80.3%"`` -> the number, verified.

Malformed files (unreadable, no header, ragged rows) raise :class:`~accelmap.errors.InputError`
naming the file (and line); a row whose metric is not a number is kept and skipped later with
its reason, because one bad cell must not hide the other rows.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelmap.errors import InputError
from accelmap.files import MAX_TABLE_BYTES, read_text

if TYPE_CHECKING:
    from accelmap.validate.runs import ServingRun, TrainingRun, UnreadableRun

_UNKNOWN = {"", "?", "n/a", "na", "-", "none", "unknown"}
_NUMBER = re.compile(r"^[~≈]?\s*([-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def parse_number(text: str | None) -> tuple[float | None, bool]:
    """A cell -> ``(value, verified)``; see the module docstring for the rules."""
    s = (text or "").strip()
    if s.lower() in _UNKNOWN or s.startswith("?") or " or " in s:
        return None, False
    m = _NUMBER.match(s)
    if not m:
        return None, False
    value = float(m.group(1).replace(",", ""))
    verified = "?" not in s and not s.startswith(("~", "≈"))
    return value, verified


def parse_int(text: str | None) -> tuple[int | None, bool]:
    value, ok = parse_number(text)
    if value is None or not math.isfinite(value) or value != int(value):
        return None, False
    return int(value), ok


class CaseFormat(StrEnum):
    INFERENCE = "inference"
    TRAINING = "training"
    MATMUL = "matmul"
    RUNS = "runs"  # the canonical run format (validate/canonical.py)


# Columns that identify each layout (a subset of what the shared files carry).
REQUIRED: dict[CaseFormat, tuple[str, ...]] = {
    CaseFormat.INFERENCE: ("row_id", "model", "accelerator", "framework", "precision_weights",
                           "batch_size", "input_len", "output_len", "metric_name",
                           "metric_value", "metric_unit"),
    CaseFormat.TRAINING: ("row_id", "model", "accelerator", "seq_len", "micro_batch",
                          "global_batch_seqs", "precision", "framework",
                          "achieved_tflops_per_device", "tflops_definition"),
    CaseFormat.MATMUL: ("row_id", "accelerator", "dtype", "kind", "measured_value",
                        "measured_unit"),
}


@dataclass(frozen=True)
class Arch:
    """Model dimensions as the row states them (any may be missing)."""

    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    ffn_hidden: int | None = None
    vocab: int | None = None


@dataclass(frozen=True)
class Parallel:
    num_devices: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    nodes: int | None = None  # num_nodes, where the file has it

    @property
    def devices(self) -> int | None:
        """Devices the row ran on: ``num_devices``, else the product of the stated degrees
        when TP, PP and DP are all stated. EP is not a factor: experts are split across the
        data-parallel ranks (Megatron-Core's expert parallelism, as in ``mapping.plan``)."""
        if self.num_devices is not None:
            return self.num_devices
        if None in (self.tp, self.pp, self.dp):
            return None
        return (self.tp or 1) * (self.pp or 1) * (self.dp or 1) * (self.cp or 1)


@dataclass(frozen=True)
class _Base:
    row_id: str
    file: str  # file name the row came from
    line: int  # line number in the file (header = 1)
    source: str  # the row's source_key, or the file's stem
    accelerator: str
    unverified: frozenset[str] = field(default=frozenset())  # columns holding '?' or '~'
    notes_text: str = ""
    # (column, sentence) of each cell that holds an impossible number: the row is skipped
    problems: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class InferenceCase(_Base):
    model: str = ""
    arch: Arch = Arch()
    accel_mem_gb: float | None = None
    parallel: Parallel = Parallel()
    framework: str = ""
    precision_weights: str = ""
    precision_kv: str = ""
    batch: int | None = None
    input_len: int | None = None
    output_len: int | None = None
    scenario: str = ""
    metric_name: str = ""
    metric_value: float | None = None
    metric_unit: str = ""
    scope: str = ""  # per_device_or_total as written ("total", "per GPU", "8 GPUs")


@dataclass(frozen=True)
class TrainingCase(_Base):
    model: str = ""
    arch: Arch = Arch()
    accel_mem_gb: float | None = None
    parallel: Parallel = Parallel()
    seq_len: int | None = None
    micro_batch: int | None = None
    global_batch_seqs: int | None = None
    # torchtitan's ``local_batch_size`` (sequences per data-parallel rank in a step), when the
    # micro-batch cell states it instead of a micro-batch: "? (local batch size 8)"
    local_batch: int | None = None
    grad_accum: int | None = None
    recompute: str = ""
    precision: str = ""
    framework: str = ""
    achieved_tflops_per_device: float | None = None
    tflops_definition: str = ""
    tokens_per_s_per_device: float | None = None
    mfu_pct: float | None = None
    sharding: str = ""  # sharding_zero as written ("PyTorch FSDP FULL_SHARD", "FSDP2 (8)")
    interleave: str = ""  # VPP_or_interleave as written ("6", "Interleaved 1F1B")
    sequence_parallel: str = ""
    year: int | None = None  # source_year: picks the stack's release when no version is given
    # source_location as written: a table's caption can state the run's switches
    # ("Table 4 (FSDP 32 x TP 8 + compile + Float8, ...)")
    location: str = ""
    interconnect: str = ""  # the interconnect column as written (hardware/scale_out.py)


@dataclass(frozen=True)
class MatmulCase(_Base):
    dtype: str = ""
    kind: str = ""
    measured_value: float | None = None
    measured_unit: str = ""
    theoretical_peak: float | None = None
    best_shape: str = ""


Case = InferenceCase | TrainingCase | MatmulCase


@dataclass(frozen=True)
class CaseFile:
    path: Path
    format: CaseFormat
    cases: tuple[Case | TrainingRun | ServingRun | UnreadableRun, ...]


def detect_format(columns: list[str] | tuple[str, ...], path: Path) -> CaseFormat:
    have = set(columns)
    if {"accelerator", "metric", "value"} <= have:
        return CaseFormat.RUNS
    for fmt, need in REQUIRED.items():
        if set(need) <= have:
            return fmt
    # the layout with the most of its columns present, and what it lacks
    fmt, need = max(REQUIRED.items(), key=lambda kv: len(set(kv[1]) & have))
    lacks = [c for c in need if c not in have]
    shown = ", ".join(lacks[:4]) + (", ..." if len(lacks) > 4 else "")
    others = "; ".join(f"{f.value}: {n[0]}, ..." for f, n in REQUIRED.items() if f is not fmt)
    raise InputError(f"{path}: unknown measurement format: a {fmt.value} CSV needs the columns "
                     f"{shown} (other layouts: {others}; a run file: accelerator, metric, "
                     "value; docs/validate-format.md)")


# The largest count a cell may hold (devices, tokens, layers ...): beyond it the row is skipped.
MAX_CELL_COUNT = 10**9


class _Row:
    """One CSV record with typed getters that remember which cells were unverified, and which
    cells hold a number no measurement can have (negative, zero, not finite, a fraction of a
    device, a count beyond MAX_CELL_COUNT): those read as missing and are the row's
    ``problems``, so the row is skipped with its reason, never scored or read as 'not
    stated'."""

    def __init__(self, raw: Mapping[str, str | None]) -> None:
        self.raw = raw
        self.unverified: set[str] = set()
        self.problems: list[tuple[str, str]] = []

    def text(self, key: str) -> str:
        return (self.raw.get(key) or "").strip()

    def num(self, key: str) -> float | None:
        value, ok = parse_number(self.raw.get(key))
        if value is not None and not (math.isfinite(value) and value > 0):
            self.problems.append((key, f"{key} {self.text(key)[:30]!r} is not a positive "
                                       "finite number"))
            return None
        if value is not None and not ok:
            self.unverified.add(key)
        return value

    def integer(self, key: str) -> int | None:
        value, ok = parse_number(self.raw.get(key))
        if value is None:
            return None
        if not (math.isfinite(value) and value == int(value) and 1 <= value <= MAX_CELL_COUNT):
            self.problems.append((key, f"{key} {self.text(key)[:30]!r} is not a whole number in "
                                       f"1..{MAX_CELL_COUNT:,}"))
            return None
        if not ok:
            self.unverified.add(key)
        return int(value)

    def arch(self) -> Arch:
        return Arch(self.integer("layers"), self.integer("hidden"), self.integer("heads"),
                    self.integer("kv_heads"), self.integer("ffn_hidden"), self.integer("vocab"))

    def parallel(self) -> Parallel:
        i = self.integer
        return Parallel(i("num_devices"), i("TP"), i("PP"), i("DP"), i("CP"), i("EP"),
                        i("num_nodes"))


_LOCAL_BATCH = re.compile(r"local batch size\s*(\d+)", re.I)


def _local_batch(r: _Row) -> int | None:
    """torchtitan's local batch from the micro-batch cell; out of range, a problem of the row."""
    m = _LOCAL_BATCH.search(r.text("micro_batch"))
    if not m:
        return None
    value = int(m.group(1))
    if not 1 <= value <= MAX_CELL_COUNT:
        r.problems.append(("micro_batch", f"local batch size {value} is not a whole number in "
                                          f"1..{MAX_CELL_COUNT:,}"))
        return None
    return value


def _build(fmt: CaseFormat, r: _Row, path: Path, line: int) -> Case:
    base: dict[str, Any] = {"row_id": r.text("row_id"), "file": path.name, "line": line,
            "source": r.text("source_key") or path.stem, "accelerator": r.text("accelerator"),
            "notes_text": r.text("notes")}
    case: Case
    if fmt is CaseFormat.INFERENCE:
        case = InferenceCase(
            **base, model=r.text("model"), arch=r.arch(), accel_mem_gb=r.num("accel_mem_GB"),
            parallel=r.parallel(), framework=r.text("framework"),
            precision_weights=r.text("precision_weights"),
            precision_kv=r.text("precision_kv_or_compute"), batch=r.integer("batch_size"),
            input_len=r.integer("input_len"), output_len=r.integer("output_len"),
            scenario=r.text("scenario"), metric_name=r.text("metric_name"),
            metric_value=r.num("metric_value"), metric_unit=r.text("metric_unit"),
            scope=r.text("per_device_or_total"))
    elif fmt is CaseFormat.TRAINING:
        case = TrainingCase(
            **base, model=r.text("model"), arch=r.arch(), accel_mem_gb=r.num("accel_mem_GB"),
            parallel=r.parallel(), seq_len=r.integer("seq_len"),
            micro_batch=r.integer("micro_batch"),
            global_batch_seqs=r.integer("global_batch_seqs"), grad_accum=r.integer("grad_accum"),
            local_batch=_local_batch(r), recompute=r.text("recompute"),
            precision=r.text("precision"),
            framework=r.text("framework"),
            achieved_tflops_per_device=r.num("achieved_tflops_per_device"),
            tflops_definition=r.text("tflops_definition"),
            tokens_per_s_per_device=r.num("throughput_tokens_per_s_per_device"),
            mfu_pct=r.num("mfu_pct"), sharding=r.text("sharding_zero"),
            interleave=r.text("VPP_or_interleave"),
            sequence_parallel=r.text("sequence_parallel"), year=r.integer("source_year"),
            location=r.text("source_location"), interconnect=r.text("interconnect"))
    else:
        case = MatmulCase(
            **base, dtype=r.text("dtype"), kind=r.text("kind"),
            measured_value=r.num("measured_value"), measured_unit=r.text("measured_unit"),
            theoretical_peak=r.num("theoretical_peak"), best_shape=r.text("best_shape_MxNxK"))
    return replace(case, unverified=frozenset(r.unverified), problems=tuple(r.problems))


def read_table(path: Path) -> CaseFile | None:
    """One measurement CSV (an existing file, not YAML): its layout comes from the header; None
    when the header is the canonical run format, which ``canonical.read_runs`` reads
    (``validate.read.read_cases`` dispatches; this module never imports canonical)."""
    text = read_text(path, "measurements CSV", MAX_TABLE_BYTES)
    reader = csv.DictReader(text.splitlines())
    try:
        columns = reader.fieldnames
        if not columns:
            raise InputError(f"{path}: the file is empty; expected a CSV with a header row")
        fmt = detect_format([c.strip() for c in columns], path)
        if fmt is CaseFormat.RUNS:
            return None
        cases: list[Case] = []
        seen: set[str] = set()
        for raw in reader:
            line = reader.line_num
            if None in raw or any(v is None for v in raw.values()):
                raise InputError(f"{path}:{line}: the row does not have the header's "
                                 f"{len(columns)} fields; check its commas and quotes")
            row = _Row(raw)
            rid = row.text("row_id")
            if not rid:
                raise InputError(f"{path}:{line}: the row has no row_id")
            if rid in seen:
                raise InputError(f"{path}:{line}: row_id {rid} appears twice")
            seen.add(rid)
            cases.append(_build(fmt, row, path, line))
    except csv.Error as e:
        raise InputError(f"{path}:{reader.line_num}: malformed CSV ({e})") from None
    return CaseFile(path, fmt, tuple(cases))
