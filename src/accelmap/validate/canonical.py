"""The canonical run format of ``accelmap validate``: CSV or YAML, one row or record per run.

Fields and vocabularies are documented in ``docs/validate-format.md``; :data:`FIELDS` is the
one table of them. Reading is strict: a value outside a field's closed vocabulary is a problem
of that row, reported as ``field 'zero': 'FSDP=0' is not one of 0, 1, 2, 3, fsdp; write zero:
0`` (the fix comes from the transcription adapter's forgiving readers, so it is a suggestion,
never a silent reading). A row with problems is kept as an
:class:`~accelmap.validate.runs.UnreadableRun` and skipped with them, so one bad row does not
hide the others; a file that is not a run file at all (unreadable, unknown columns, not a list
of records) raises one :class:`~accelmap.errors.InputError`.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from accelmap.cost.framework import Framework
from accelmap.cost.schedules import Schedule
from accelmap.errors import InputError
from accelmap.files import MAX_TABLE_BYTES, parse_yaml, read_text
from accelmap.hardware.scale_out import parse_scale_out
from accelmap.mapping.plan import CP_COMM_WORDS, ZeroStage
from accelmap.units import DType
from accelmap.validate.cases import Arch, parse_number
from accelmap.validate.resolve import parse_recompute, training_dtype
from accelmap.validate.runs import (
    Family,
    Metric,
    Problem,
    ServingMetric,
    ServingRun,
    ServingScenario,
    TrainingRun,
    UnreadableRun,
)
from accelmap.validate.stacks import FRAMEWORK_NAMES, Stack, in_house, release_date
from accelmap.validate.transcribe import read_flag, read_framework, read_interleave, read_zero
from accelmap.workload import Fp8Scaling, Recompute

YAML_SUFFIXES = (".yaml", ".yml")
# A CSV header with these columns is a canonical run file (the transcription has row_id and
# metric columns of its own names).
CSV_KEYS = frozenset({"accelerator", "metric", "value"})
PRECISIONS = {"bf16": DType.BF16, "fp16": DType.FP16, "fp8": DType.FP8, "fp32": DType.FP32,
              # microscaling and 4-bit formats (engine/formats.py: fp4 = the part's own), and
              # integer weight-only quantization (int8 per channel / int4 in groups of 128)
              "nvfp4": DType.NVFP4, "mxfp4": DType.MXFP4, "fp4": DType.FP4,
              "mxfp8": DType.MXFP8, "mxfp6": DType.MXFP6, "int8": DType.INT8,
              "int4": DType.INT4}
_PRECISION_WORDS = " | ".join(PRECISIONS)
GRAD_REDUCE = {"fp32": DType.FP32, "bf16": DType.BF16}
ZERO_WORDS = ("0", "1", "2", "3", "fsdp")
ARCH_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab")
# Serving frameworks of the run format (cost profile and scheduler defaults, cost/framework.py)
SERVING_FRAMEWORKS = {"tensorrt-llm": Framework.TENSORRT_LLM, "vllm": Framework.VLLM,
                      "sglang": Framework.SGLANG, "atom": Framework.ATOM}
# Serving stacks a run may name that bring no cost profile of their own: Dynamo orchestrates an
# engine (the `engine` field, whose profile is taken; docs/validate-format.md)
ORCHESTRATORS = ("dynamo",)
ENGINES = {k: v for k, v in SERVING_FRAMEWORKS.items() if k != "atom"}
METRIC_WORDS = {m.value: m for m in (*Metric, *ServingMetric)}
LENGTH_DISTS = ("fixed", "uniform", "lognormal")
# Fields only a serving run has (a record with any of them, or a serving metric, is one).
SERVING_FIELDS = ("scenario", "batch", "input_len", "output_len", "length_dist",
                  "length_spread", "requests", "rate", "concurrency", "slo_ttft_ms",
                  "slo_tpot_ms", "slo_percentile", "max_batch", "max_tokens", "kv_fraction",
                  "scheduler_recv_interval", "attention_dp_balance",
                  "attention_dp_batching_wait",
                  "kv_precision", "moe_precision", "engine", "dp_attention", "disaggregated",
                  "prefill_devices", "decode_devices", "prefill_tp", "decode_tp",
                  "prefill_ep", "decode_ep", "prefill_dp_attention", "decode_dp_attention",
                  "mtp", "acceptance")

Parsed = tuple[Any, str | None]  # (value, None) or (None, "is not ...; write ...")


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).strip()


MAX_COUNT = 10**9  # the largest whole number a field may hold (devices, tokens, layers)


def _int(name: str, lo: int = 1, hi: int = MAX_COUNT) -> Callable[[Any], Parsed]:
    def parse(v: Any) -> Parsed:
        t = _text(v)
        if t.isdigit() and len(t) <= 30 and lo <= int(t) <= hi:
            return int(t), None
        guess, _ = parse_number(t)
        bound = f"a whole number >= {lo}" + (f" and <= {hi}" if hi != MAX_COUNT else "")
        if hi == MAX_COUNT and guess is not None and guess > hi:
            bound = f"a whole number in {lo}..{hi:,}"
        fix = (f"write {name}: {int(guess)}" if guess is not None and math.isfinite(guess)
               and guess == int(guess) and lo <= guess <= hi
               else f"write {name}: {bound}, or leave it out when not stated")
        return None, f"is not {bound}; {fix}"
    return parse


def _float(name: str) -> Callable[[Any], Parsed]:
    def parse(v: Any) -> Parsed:
        t = _text(v)
        try:
            x = float(t)
        except ValueError:
            x = math.nan
        if math.isfinite(x) and x > 0:
            return x, None
        guess, _ = parse_number(t)
        fix = (f"write {name}: {guess:g}" if guess is not None and 0 < guess < math.inf
               else f"write {name}: a positive number")
        return None, f"is not a positive finite number; {fix}"
    return parse


def _fraction(name: str) -> Callable[[Any], Parsed]:
    def parse(v: Any) -> Parsed:
        x, why = _float(name)(v)
        if why is None and x > 1:
            return None, f"is not a fraction in (0, 1]; write {name}: {x / 100:g}" + (
                " (percent read as a fraction)" if x <= 100 else "")
        return x, why
    return parse


def _spread(v: Any) -> Parsed:
    t = _text(v)
    try:
        x = float(t)
    except ValueError:
        x = math.nan
    if math.isfinite(x) and x >= 0:
        return x, None
    return None, "is not a number >= 0; write length_spread: e.g. 0.5"


def _text_field(v: Any) -> Parsed:
    return _text(v), None


def _either(words: Iterable[str]) -> str:
    w = list(words)
    return w[0] if len(w) == 1 else f"{', '.join(w[:-1])} or {w[-1]}"


def _choice(name: str, table: Mapping[str, Any], suggest: Callable[[str], str | None]
            ) -> Callable[[Any], Parsed]:
    def parse(v: Any) -> Parsed:
        t = _text(v).lower()
        if t in table:
            return table[t], None
        hint = suggest(t) or _either(table)
        return None, f"is not one of {', '.join(table)}; write {name}: {hint}"
    return parse


def _suggest_zero(t: str) -> str | None:
    stage, group, in_node = read_zero(t)
    if stage is None:
        return None
    extra = (" and shard_group: node" if in_node else
             f" and shard_group: {group}" if group is not None else "")
    return f"{int(stage)}{extra}"


def _suggest_recompute(t: str) -> str | None:
    r = parse_recompute(t)
    return r.value if r is not None else None


def _suggest_precision(t: str) -> str | None:
    d = training_dtype(t)
    return d.value if d is not None else None


def _suggest_scaling(t: str) -> str | None:
    return "rowwise" if "row" in t else "tensorwise" if "tensor" in t else None


def _suggest_flag(t: str) -> str | None:
    f = read_flag(t) if t not in ("y", "n") else t == "y"
    return None if f is None else ("true" if f else "false")


def _suggest_metric(t: str) -> str | None:
    near = difflib.get_close_matches(t, list(METRIC_WORDS), n=1, cutoff=0.6)
    return near[0] if near else None


def _shard_group(v: Any) -> Parsed:
    t = _text(v).lower()
    if t == "node":
        return "node", None
    if t.isdigit() and int(t) >= 1:
        return int(t), None
    _, group, in_node = read_zero(t)
    fix = ("node" if in_node or "node" in t else str(group) if group
           else "a whole number of data-parallel ranks, or node")
    return None, f"is not a whole number >= 1 or node; write shard_group: {fix}"


def _near_known(name: str) -> bool:
    """A misspelt public stack (``megatorn``, ``deepspeeed``): refused with the fix rather than
    read as an in-house stack."""
    known = [*FRAMEWORK_NAMES, *SERVING_FRAMEWORKS]
    stems = {*known, *(k.split("-")[0] for k in known)} - {"other"}
    return (name not in known and not in_house(name)
            and bool(difflib.get_close_matches(name, stems, n=1, cutoff=0.7)))


def _framework(v: Any) -> Parsed:
    t = _text(v)
    name, _, version = t.lower().partition(" ")
    version = version.strip()
    if name in SERVING_FRAMEWORKS:
        return (SERVING_FRAMEWORKS[name], version), None
    if name in ORCHESTRATORS:  # the engine decides later
        return (name, version), None
    stack = FRAMEWORK_NAMES.get(name)
    if stack is Stack.OTHER:  # an in-house stack: whatever follows names it
        return (stack, version), None
    when = release_date(stack, version) if stack is not None and version else None
    if stack is not None and not isinstance(when, str):
        return (stack, version), None
    guess, gver, gyear = read_framework(t)
    if stack is None and (guess is None or guess is Stack.OTHER) and not _near_known(name):
        # an in-house or unknown stack: the generic one (stacks.OTHER_NOTE states its physics;
        # the prediction's notes say so), the name kept as its version
        return (Stack.OTHER, "" if name == "other" else t), None
    if guess is not None and gver and isinstance(release_date(guess, gver), tuple):
        fix = f"{guess.value} {gver}"
    elif guess is not None and gyear:
        fix = f"{guess.value} and year: {gyear}"
    elif guess is not None:
        fix = f"{guess.value} VERSION, or {guess.value} and year: YYYY"
    elif close := difflib.get_close_matches(name, [*FRAMEWORK_NAMES, *SERVING_FRAMEWORKS],
                                            n=1, cutoff=0.6):
        fix = f"{close[0]} VERSION (or other, for an in-house stack)"
    else:
        fix = f"{_either([*FRAMEWORK_NAMES, *SERVING_FRAMEWORKS])}, then its version"
    why = f" ({when})" if isinstance(when, str) and fix.endswith("YYYY") else ""
    return None, f"is not a framework name and version{why}; write framework: {fix}"


INTERLEAVED = "interleaved"  # vpp: interleaved, the count from the stack's recipe
# Pipeline schedules a run states (cost/schedules.py) and their common names
SCHEDULES: dict[str, str] = {**{s.value: s.value for s in Schedule},
                             INTERLEAVED: Schedule.INTERLEAVED.value,
                             "interleaved1f1b": Schedule.INTERLEAVED.value,
                             "zero-bubble": Schedule.ZERO_BUBBLE.value}


def _vpp(v: Any) -> Parsed:
    t = _text(v)
    if t.isdigit() and int(t) >= 1:
        return int(t), None
    if t.lower() == INTERLEAVED:
        return INTERLEAVED, None
    read = read_interleave(t)
    fix = (f"write vpp: {read}" if isinstance(read, int) else
           "write vpp: the number of virtual pipeline stages (1: not interleaved)")
    return None, f"is not a whole number >= 1; {fix}"


def _scale_out(v: Any) -> Parsed:
    t = _text(v)
    read = parse_scale_out(t)
    if isinstance(read, str):
        return None, read.replace(f"scale-out {t!r} ", "", 1)
    return t, None


@dataclass(frozen=True)
class FieldSpec:
    parse: Callable[[Any], Parsed]
    vocabulary: str  # one line for the documentation and for messages


def _positive(name: str) -> FieldSpec:
    return FieldSpec(_int(name), "whole number >= 1")


FIELDS: dict[str, FieldSpec] = {
    "id": FieldSpec(_text_field, "text; unique in the file (default: FILE:N)"),
    "source": FieldSpec(_text_field, "text: where the run was published"),
    "accelerator": FieldSpec(_text_field, "catalog id or any name the catalog lookup resolves"),
    "accelerator_memory_gb": FieldSpec(_float("accelerator_memory_gb"),
                                       "positive number (picks a memory variant)"),
    "model": FieldSpec(_text_field, "catalog id or any name the catalog lookup resolves"),
    **{k: _positive(k) for k in ARCH_FIELDS},
    "family": FieldSpec(_choice("family", {f.value: f for f in Family}, lambda t: None),
                        "gpt | mpt | llama (style of a model built from dimensions)"),
    "devices": _positive("devices"),
    "nodes": _positive("nodes"),
    **{k: _positive(k) for k in ("tp", "pp", "dp", "cp", "ep")},
    "vpp": FieldSpec(_vpp, "whole number >= 1 (virtual pipeline stages; 1: not interleaved) "
                           "| interleaved (the stack's recipe gives the count)"),
    "schedule": FieldSpec(_choice("schedule", SCHEDULES, lambda t: None),
                          "1f1b | gpipe | interleaved-1f1b | zb-h1 | dualpipe; not stated: "
                          "1f1b, interleaved with vpp > 1"),
    "first_stage_layers": _positive("first_stage_layers"),
    "last_stage_layers": _positive("last_stage_layers"),
    **{k: FieldSpec(_choice(k, {"true": True, "false": False}, _suggest_flag), "true | false")
       for k in ("embedding_in_split", "loss_in_split")},
    "zero": FieldSpec(_choice("zero", {"0": ZeroStage.NONE, "1": ZeroStage.OPTIMIZER,
                                       "2": ZeroStage.GRADIENTS, "3": ZeroStage.PARAMETERS,
                                       "fsdp": ZeroStage.PARAMETERS}, _suggest_zero),
                      "0 | 1 | 2 | 3 | fsdp (fsdp = 3)"),
    "shard_group": FieldSpec(_shard_group, "whole number >= 1 | node (HSDP shard group)"),
    "recompute": FieldSpec(_choice("recompute", {r.value: r for r in Recompute},
                                   _suggest_recompute), "none | selective | full"),
    **{k: FieldSpec(_choice(k, {"true": True, "false": False}, _suggest_flag), "true | false")
       for k in ("sequence_parallel", "tp_comm_overlap", "flash_attention", "compile")},
    "offload_activations": FieldSpec(_int("offload_activations", lo=0),
                                     "whole number >= 0 (layers per pipeline stage whose "
                                     "activations go to host memory: Megatron-Core "
                                     "--cpu-offloading-num-layers; not stated: 0)"),
    "cp_comm": FieldSpec(_choice("cp_comm", CP_COMM_WORDS, lambda t: None),
                         "p2p | all-gather (context-parallel K/V exchange: ring attention, "
                         "or Llama 3's all-gather; Megatron --cp-comm-type; not stated: p2p)"),
    "precision": FieldSpec(_choice("precision", PRECISIONS, _suggest_precision),
                           _PRECISION_WORDS),
    "grad_reduce": FieldSpec(_choice("grad_reduce", GRAD_REDUCE, _suggest_precision),
                             "fp32 | bf16 (gradient reduction precision)"),
    "fp8_scaling": FieldSpec(_choice("fp8_scaling", {f.value: f for f in Fp8Scaling},
                                     _suggest_scaling),
                             "tensorwise | rowwise (FP8 scaling of each GEMM input; "
                             "precision: fp8)"),
    "framework": FieldSpec(_framework, " | ".join([*FRAMEWORK_NAMES, *SERVING_FRAMEWORKS])
                           + ", then its version"),
    "scale_out": FieldSpec(_scale_out, "the inter-node network: a line rate and its scope, "
                           "e.g. '400 Gb/s per GPU', '4 x 100 Gb/s Omni-Path' (links per node), "
                           "'1600 Gb/s per node'"),
    "year": FieldSpec(_int("year", 2000, 2100), "the run's year, e.g. 2024"),
    "seq_len": _positive("seq_len"),
    "global_batch": _positive("global_batch"),
    "micro_batch": _positive("micro_batch"),
    "grad_accum": _positive("grad_accum"),
    # serving runs (docs/validate-format.md, "Serving runs")
    "scenario": FieldSpec(_choice("scenario", {s.value: s for s in ServingScenario},
                                  lambda t: None), "batch | offline | server | concurrency"),
    "batch": _positive("batch"),
    "input_len": _positive("input_len"),
    "output_len": _positive("output_len"),
    "length_dist": FieldSpec(_choice("length_dist", {d: d for d in LENGTH_DISTS},
                                     lambda t: None), " | ".join(LENGTH_DISTS)),
    "length_spread": FieldSpec(_spread, "number >= 0 (uniform: +- fraction of the mean; "
                                        "lognormal: coefficient of variation)"),
    "requests": _positive("requests"),
    "rate": FieldSpec(_float("rate"), "positive number of requests/s over all replicas"),
    "concurrency": _positive("concurrency"),
    "slo_ttft_ms": FieldSpec(_float("slo_ttft_ms"), "positive number of ms"),
    "slo_tpot_ms": FieldSpec(_float("slo_tpot_ms"), "positive number of ms"),
    "slo_percentile": FieldSpec(_choice("slo_percentile", {"50": 50.0, "90": 90.0, "99": 99.0},
                                        lambda t: None), "50 | 90 | 99"),
    "max_batch": _positive("max_batch"),
    "max_tokens": _positive("max_tokens"),
    "kv_fraction": FieldSpec(_fraction("kv_fraction"), "fraction in (0, 1]"),
    "scheduler_recv_interval": _positive("scheduler_recv_interval"),
    "attention_dp_balance": _positive("attention_dp_balance"),
    "attention_dp_batching_wait": FieldSpec(_int("attention_dp_batching_wait", lo=0),
                                            "whole number >= 0"),
    "kv_precision": FieldSpec(_choice("kv_precision", PRECISIONS, _suggest_precision),
                              _PRECISION_WORDS),
    "moe_precision": FieldSpec(_choice("moe_precision", PRECISIONS, _suggest_precision),
                               _PRECISION_WORDS + " (routed experts; default: precision)"),
    "engine": FieldSpec(_choice("engine", ENGINES, lambda t: None),
                        " | ".join(ENGINES) + " (the engine under framework: dynamo)"),
    **{k: FieldSpec(_choice(k, {"true": True, "false": False}, _suggest_flag), "true | false")
       for k in ("dp_attention", "disaggregated", "prefill_dp_attention",
                 "decode_dp_attention")},
    **{k: _positive(k) for k in ("prefill_devices", "decode_devices", "prefill_tp",
                                 "decode_tp", "prefill_ep", "decode_ep", "mtp")},
    "acceptance": FieldSpec(_fraction("acceptance"),
                            "fraction in (0, 1]: the draft tokens accepted per drafted"),
    "metric": FieldSpec(_choice("metric", METRIC_WORDS, _suggest_metric),
                        " | ".join(METRIC_WORDS)),
    "value": FieldSpec(_float("value"), "positive number in the metric's unit"),
    "notes": FieldSpec(_text_field, "text"),
}


def is_serving(values: Mapping[str, Any]) -> bool:
    """A serving run: it states a serving field or a serving metric."""
    return (any(k in values for k in SERVING_FIELDS)
            or isinstance(values.get("metric"), ServingMetric))


def _missing(values: dict[str, Any], serving: bool = False) -> list[Problem]:
    out = []
    if "accelerator" not in values:
        out.append(Problem("accelerator", "field 'accelerator' is missing; write accelerator: "
                                          "a catalog id such as h100-sxm5-80gb"))
    dims = [k for k in ("layers", "hidden", "heads", "vocab") if k not in values]
    if "model" not in values and dims:
        out.append(Problem("model", "field 'model' is missing; write model: a catalog id such "
                                    f"as llama-3.1-70b, or the dimensions {', '.join(dims)}"))
    if "devices" not in values and not {"tp", "pp", "dp"} <= set(values):
        out.append(Problem("devices", "field 'devices' is missing; write devices: the number "
                                      "of accelerators the run used"))
    if serving:
        for k, what in (("scenario", "batch, offline, server or concurrency"),
                        ("input_len", "the prompt tokens per request (mean)"),
                        ("output_len", "the output tokens per request (mean)")):
            if k not in values:
                out.append(Problem(k, f"field '{k}' is missing; write {k}: {what}"))
    elif "seq_len" not in values:
        out.append(Problem("seq_len", "field 'seq_len' is missing; write seq_len: the "
                                      "sequence length in tokens"))
    words = ServingMetric if serving else Metric
    for k, what in (("metric", "one of " + ", ".join(m.value for m in words)),
                    ("value", "the measured number")):
        if k not in values:
            out.append(Problem(k, f"field '{k}' is missing; write {k}: {what}"))
    return out


def _checks(values: dict[str, Any]) -> list[Problem]:
    """Values that read but cannot mean what they say."""
    vpp, schedule = values.get("vpp"), values.get("schedule")
    if isinstance(vpp, int) and vpp > 1 and schedule not in (None, Schedule.INTERLEAVED.value):
        return [Problem("schedule", f"field 'schedule': {schedule} runs one model chunk per "
                                    f"stage but vpp is {vpp}; write schedule: "
                                    f"{Schedule.INTERLEAVED.value}, or vpp: 1")]
    if values.get("metric") is Metric.MFU and 0 < values.get("value", 2.0) <= 1.0:
        v = values["value"]
        return [Problem("value", f"field 'value': MFU is in percent, so {v:g} reads as "
                                 f"{v:g} %; write value: {v * 100:g}")]
    if values.get("metric") is Metric.MFU and values.get("value", 0.0) > 100:
        return [Problem("value", f"field 'value': MFU {values['value']:g} % is above 100 %; "
                                 "write the model FLOPs utilization in percent")]
    return []


def _kinds(values: dict[str, Any], serving: bool) -> list[Problem]:
    """Fields of the other kind of run: a training metric or stack on a serving run, or the
    reverse."""
    out = []
    metric, fw = values.get("metric"), values.get("framework", (None, ""))[0]
    if serving and isinstance(metric, Metric):
        out.append(Problem("metric", f"field 'metric': {metric.value!r} is a training metric "
                                     "but the run states serving fields; write metric: one of "
                                     + ", ".join(m.value for m in ServingMetric)))
    plain = type(fw) is str  # dynamo or atom (read as words, not profiles)
    if serving and fw is not None and not isinstance(fw, Framework) and not plain:
        out.append(Problem("framework", f"field 'framework': {fw.value!r} is a training stack; "
                                        "write framework: "
                                        + _either(SERVING_FRAMEWORKS) + ", then its version"))
    if not serving and (isinstance(fw, Framework) or plain):
        out.append(Problem("framework", f"field 'framework': {fw.value!r} is a serving "
                                        "framework; write scenario: offline, server or batch "
                                        "for a serving run"))
    return out


def _serving_run(values: dict[str, Any], rid: str, file: str, line: int) -> ServingRun:
    fw, version = values.pop("framework", (None, ""))
    if type(fw) is str:  # dynamo or atom: the engine's profile, or a skip (validate/serving.py)
        values["stack"], fw = fw, values.get("engine")
    arch = Arch(*(values.pop(k, None) for k in ARCH_FIELDS))
    values.pop("id", None)
    for k in ("seq_len", "global_batch", "micro_batch", "grad_accum", "vpp", "schedule", "zero",
              "shard_group", "recompute", "sequence_parallel", "tp_comm_overlap",
              "cp_comm", "offload_activations", "flash_attention", "compile", "grad_reduce",
              "fp8_scaling", "cp",
              "scale_out"):
        values.pop(k, None)  # training settings mean nothing to a serving run
    return ServingRun(rid, file=file, line=line, arch=arch, framework=fw, version=version,
                      **values)


def run_of(record: Mapping[str, Any], where: str, file: str, line: int, source: str = ""
           ) -> TrainingRun | ServingRun | UnreadableRun:
    """One record (a CSV row or a YAML mapping) -> a run, or its problems; ``where`` is its id
    and ``source`` its source when it states none."""
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    stated = {str(k).strip() for k, v in record.items() if v is not None and _text(v) != ""}
    for key, raw in record.items():
        name = str(key).strip()
        if name not in FIELDS:
            near = difflib.get_close_matches(name, FIELDS, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            problems.append(Problem(name, f"field '{name}' is not a field of the run format"
                                          f"{hint} (docs/validate-format.md lists them)"))
            continue
        if raw is None or _text(raw) == "":
            continue
        value, why = FIELDS[name].parse(raw)
        if why:
            problems.append(Problem(name, f"field '{name}': {_text(raw)!r} {why}"))
        else:
            values[name] = value
    serving = is_serving(values)
    problems += [p for p in _missing(values, serving) if p.field not in stated]
    problems += _checks(values) + _kinds(values, serving)
    rid = values.get("id") or where
    values.setdefault("source", source)
    if problems:
        return UnreadableRun(rid, file, line, values["source"], tuple(problems))
    if serving:
        return _serving_run(values, rid, file, line)
    stack, version = values.pop("framework", (None, ""))
    group = values.pop("shard_group", None)
    if values.get("vpp") == INTERLEAVED or (
            values.get("schedule") == Schedule.INTERLEAVED.value and "vpp" not in values):
        values["vpp"], values["interleaved"] = None, True
    arch = Arch(*(values.pop(k, None) for k in ARCH_FIELDS))
    values.pop("id", None)
    return TrainingRun(rid, file=file, line=line, arch=arch, framework=stack, version=version,
                       shard_group=None if group == "node" else group,
                       shard_in_node=group == "node", **values)


def _records_csv(text: str, path: Path) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip() for c in reader.fieldnames or []]
    unknown = [c for c in columns if c not in FIELDS]
    if unknown:
        near = difflib.get_close_matches(unknown[0], FIELDS, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise InputError(f"{path}: column '{unknown[0]}' is not a field of the run format"
                         f"{hint}; docs/validate-format.md lists them")
    out = []
    try:
        for raw in reader:
            if None in raw or any(v is None for v in raw.values()):
                raise InputError(f"{path}:{reader.line_num}: the row does not have the header's "
                                 f"{len(columns)} fields; check its commas and quotes")
            out.append((reader.line_num, {k.strip(): v for k, v in raw.items()}))
    except csv.Error as e:
        raise InputError(f"{path}:{reader.line_num}: malformed CSV ({e})") from None
    return out


def _records_yaml(text: str, path: Path) -> list[tuple[int, dict[str, Any]]]:
    data = parse_yaml(text, str(path))
    if isinstance(data, dict) and "runs" in data:
        data = data["runs"]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InputError(f"{path}: a run file in YAML is a list of runs (or 'runs:' with one), "
                         "each a mapping of field: value; see docs/validate-format.md")
    return [(i, r) for i, r in enumerate(data, start=1)]


def is_run_csv(columns: Iterable[str]) -> bool:
    return {c.strip() for c in columns} >= CSV_KEYS


def read_runs(path: str | Path) -> tuple[TrainingRun | ServingRun | UnreadableRun, ...]:
    """Every record of a canonical run file (CSV or YAML by its suffix), read or with its
    problems; a file that is no run file raises one InputError."""
    path = Path(path)
    text = read_text(path, "run file", MAX_TABLE_BYTES)
    yaml_file = path.suffix.lower() in YAML_SUFFIXES
    records = _records_yaml(text, path) if yaml_file else _records_csv(text, path)
    if not records:
        raise InputError(f"{path}: the file holds no runs")
    out: list[TrainingRun | ServingRun | UnreadableRun] = []
    first: dict[str, int] = {}
    for n, (line, record) in enumerate(records, start=1):
        run = run_of(record, f"{path.stem}:{n}", path.name, line, path.stem)
        if run.id in first:
            dup = Problem("id", f"field 'id': {run.id!r} appears twice (first in record "
                                f"{first[run.id]}); write a unique id")
            run = UnreadableRun(run.id, path.name, line, run.source, (dup,))
        first.setdefault(run.id, n)
        out.append(run)
    return tuple(out)


def problem_lines(runs: Iterable[TrainingRun | ServingRun | UnreadableRun]) -> list[str]:
    """One line per problem of every unreadable record: ``row ID: field 'x': ...``."""
    return [line for r in runs if isinstance(r, UnreadableRun) for line in r.lines()]


# -- writing ------------------------------------------------------------------------------------
def to_record(run: TrainingRun | ServingRun) -> dict[str, Any]:
    """The stated fields of a run, in :data:`FIELDS` order, as the format writes them."""
    rec: dict[str, Any] = {}
    arch = dict(zip(ARCH_FIELDS, (run.arch.layers, run.arch.hidden, run.arch.heads,
                                  run.arch.kv_heads, run.arch.ffn_hidden, run.arch.vocab),
                    strict=True))
    own = {f.name: getattr(run, f.name) for f in fields(run)}
    for name in FIELDS:
        value: Any
        if name in arch:
            value = arch[name]
        elif name == "framework":
            value = (f"{run.framework.value} {run.version}".strip() if run.framework
                     else None)
        elif name == "vpp" and isinstance(run, TrainingRun) and run.interleaved:
            value = INTERLEAVED
        elif name == "shard_group":
            value = (("node" if run.shard_in_node else run.shard_group)
                     if isinstance(run, TrainingRun) else None)
        else:
            value = own.get(name)
        if value is None or value == "":
            continue
        if isinstance(value, ZeroStage) or name == "slo_percentile":
            value = int(value)
        elif hasattr(value, "value") and isinstance(value.value, str):
            value = value.value
        rec[name] = value
    return rec


def dumps(runs: Iterable[TrainingRun | ServingRun], yaml_format: bool) -> str:
    records = [to_record(r) for r in runs]
    if yaml_format:
        return yaml.safe_dump(records, sort_keys=False, allow_unicode=True, width=100)
    columns = [k for k in FIELDS if any(k in r for r in records)]
    out = io.StringIO()
    writer = csv.DictWriter(out, columns, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow({k: _text(v) for k, v in r.items()})
    return out.getvalue()


def write_runs(runs: Iterable[TrainingRun | ServingRun], path: str | Path) -> Path:
    """Write runs as a canonical CSV or YAML file (by the suffix)."""
    path = Path(path)
    path.write_text(dumps(runs, path.suffix.lower() in YAML_SUFFIXES), encoding="utf-8")
    return path


def same_run(a: TrainingRun | ServingRun, b: TrainingRun | ServingRun) -> bool:
    """Equal in every field the format carries (not where they were read from)."""
    def strip(r: Any) -> Any:
        return replace(r, file="", line=0, reading_notes=(), problems=())
    return strip(a) == strip(b)
