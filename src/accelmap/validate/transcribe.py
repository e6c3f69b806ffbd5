"""The shared transcription's training rows as canonical runs: an adapter, one rule per column.

``validate/cases.py`` reads the transcription CSV's free text ("PyTorch FSDP FULL_SHARD",
"? (MP=2)", "half precision (FP16?)"); :func:`from_case` maps a row onto the same
:class:`~accelmap.validate.runs.TrainingRun` the canonical format reads, so both go through one
prediction path. The readers here are forgiving, but never guess silently: a cell they do not
understand is "not stated" (then the stack's default, noted) or a reason the row is not
predicted. The canonical reader uses them only to suggest the fix for a value outside its
closed vocabulary.

- sharding: ``zero=0`` / ``none`` / ``DDP`` -> ZeRO-0; ``FSDP=0`` / ``fsdp: off`` -> not stated (the
  stack's default: Megatron-Core's distributed optimizer is ZeRO-1) (an explicit
  stage or switch wins over the word "FSDP"); ``FSDP=1`` -> ZeRO-3; ``FULL_SHARD``, ``FSDP``,
  ``FSDP2 (n)`` (n ranks per shard group) -> ZeRO-3; ``HYBRID_SHARD``/``HSDP`` -> ZeRO-3 inside
  the node unless a size is given; ``SHARD_GRAD_OP`` / ``ZeRO-2`` -> ZeRO-2; ``distributed
  optimizer`` / ``ZeRO-1`` -> ZeRO-1.
- interleaving: empty -> not stated; ``n/a``, ``none``, ``-``, ``no``, ``1F1B``, ``1`` -> not
  interleaved; a number -> that many virtual stages; "interleaved" without a number -> a reason.
- framework: the stack (``stacks.training_stack``), the version written right after its name
  ("NeMo 24.07"), a year in the text ("Megatron-LM (Jan 2021)") or else ``source_year``;
  "compile" -> torch.compile, "async" -> tensor-parallel communication overlap (AsyncTP).
  "compile" in the source location counts too: torchtitan's benchmark tables state their
  switches in the caption ("Table 4 (FSDP 32 x TP 8 + compile + Float8, ...)", "... with
  FSDP=32, TP=8, torch.compile, full AC ...") and name only the compared variant in the
  framework cell.
"""

from __future__ import annotations

import re

from accelmap.hardware.scale_out import ScaleOut, parse_scale_out
from accelmap.mapping.plan import ZeroStage
from accelmap.units import DType
from accelmap.validate.cases import InferenceCase, TrainingCase
from accelmap.validate.resolve import (
    inference_framework,
    inference_precision,
    parse_recompute,
    training_dtype,
)
from accelmap.validate.runs import (
    Family,
    Metric,
    Problem,
    ServingMetric,
    ServingRun,
    ServingScenario,
    TrainingRun,
)
from accelmap.validate.stacks import Stack, training_stack
from accelmap.workload import Fp8Scaling

_NOT_INTERLEAVED = {"n/a", "na", "none", "-", "no", "off", "false", "1f1b", "1",
                    "non-interleaved", "not interleaved"}
_OFF = {"0", "false", "off", "no", "none", "disabled"}
_ON = {"1", "true", "on", "yes", "enabled"}
_SWITCH = re.compile(r"\b(fsdp2?|zero)\s*[=:]\s*([a-z0-9]+)")
_ZERO_STAGE = re.compile(r"\bzero[-_ ]?(?:stage[-_ ]?)?([0-3])\b")
_VERSION_AFTER = re.compile(
    r"(nemo|megatron-lm|megatron-core|megatron|torchtitan|llm-foundry|deepspeed)"
    r"[\s:/-]*(v?\d+(?:\.\d+)+)")
_YEAR = re.compile(r"\b(20[12]\d)\b")


def fsdp_off(text: str) -> bool:
    """``FSDP=0`` / ``fsdp: off``: FSDP is off, which says nothing about the distributed
    optimizer (Megatron-Core runs it without FSDP)."""
    m = _SWITCH.search(text.lower().strip())
    return m is not None and m.group(1).startswith("fsdp") and m.group(2) in _OFF


def read_zero(text: str) -> tuple[ZeroStage | None, int | None, bool]:
    """Sharding words -> (stage or None when not stated or not understood, shard group as
    written, shard inside the node)."""
    t = text.lower().strip()
    group = int(m.group(1)) if (m := re.search(r"\((\d+)\)", t)) else None
    if m := _SWITCH.search(t):
        what, value = m.groups()
        if what == "zero" and value in ("0", "1", "2", "3"):
            return ZeroStage(int(value)), None, False
        if value in _OFF:  # "FSDP=0" says FSDP is off, not which optimizer sharding runs:
            # the stack's default decides (Megatron-Core's distributed optimizer is ZeRO-1)
            return (ZeroStage.NONE if what == "zero" else None), None, False
        if value in _ON:
            return ZeroStage.PARAMETERS, group, False
    if m := _ZERO_STAGE.search(t):
        return ZeroStage(int(m.group(1))), None, False
    if t in _OFF or t == "ddp":
        return ZeroStage.NONE, None, False
    if "hybrid" in t or "hsdp" in t:
        return ZeroStage.PARAMETERS, group, group is None
    if "shard_grad_op" in t:
        return ZeroStage.GRADIENTS, None, False
    if "full_shard" in t or "fsdp" in t:
        return ZeroStage.PARAMETERS, group, False
    if "distributed optimizer" in t:
        return ZeroStage.OPTIMIZER, None, False
    return None, None, False


def read_interleave(text: str) -> int | Problem | None:
    """Interleaving words -> virtual stages (1: not interleaved), None when not stated, or the
    problem."""
    t = text.strip().lower()
    if not t:
        return None
    if t in _NOT_INTERLEAVED:
        return 1
    if t.isdigit() and int(t) >= 1:
        return int(t)
    if "interleav" in t:
        return Problem("vpp", f"interleaved schedule {text!r} without the number of virtual "
                              "stages")
    return Problem("vpp", f"interleaving {text!r} is not understood (write the number of "
                          "virtual stages, or 1)")


def read_flag(text: str) -> bool | None:
    t = text.lower().strip()
    if t in ("yes", "true", "on", "1"):
        return True
    if t in ("no", "false", "off", "0"):
        return False
    return None


def read_framework(text: str) -> tuple[Stack | None, str, int | None]:
    """(stack, version as written after its name, year named in the text)."""
    t = text.lower()
    version = m.group(2).lstrip("v") if (m := _VERSION_AFTER.search(t)) else ""
    year = int(m.group(1)) if (m := _YEAR.search(t)) else None
    return training_stack(text), version, year


def hardware_flops_meant(definition: str, megatron: bool) -> tuple[bool, str | None]:
    """Whether a row's TFLOP/s count hardware FLOPs (recompute included) rather than model
    FLOPs, from its definition column, and a note when the column does not say."""
    d = definition.lower()
    if "model" in d:
        return False, None
    if any(w in d for w in ("hardware", "hfu", "recompute")):
        return True, None
    if megatron:
        return True, ("TFLOP/s definition not stated: Megatron's Eq. 3 counts the recompute "
                      "forward (hardware FLOPs)")
    return False, "TFLOP/s definition not stated: model FLOPs assumed"


def read_metric(case: TrainingCase, stack: Stack | None
                ) -> tuple[Metric | None, float | None, str | None]:
    """(metric, value, note) of a transcription row: its TFLOP/s per device (model or hardware
    FLOPs by ``tflops_definition``), else tokens/s per device, else MFU."""
    if case.achieved_tflops_per_device is not None:
        hardware, note = hardware_flops_meant(case.tflops_definition,
                                              stack is Stack.MEGATRON_LM)
        return (Metric.TFLOPS_HARDWARE if hardware else Metric.TFLOPS_MODEL,
                case.achieved_tflops_per_device, note)
    if case.tokens_per_s_per_device is not None:
        return Metric.TOKENS_PER_S_PER_DEVICE, case.tokens_per_s_per_device, None
    if case.mfu_pct is not None:
        return (Metric.MFU, case.mfu_pct,
                "MFU against the catalog's dense peak of the training dtype")
    return None, None, None


def from_case(case: TrainingCase) -> TrainingRun:
    """The canonical run of a transcription training row (see the module docstring)."""
    notes: list[str] = []
    problems: list[Problem] = [Problem(col, msg) for col, msg in case.problems]
    stack, version, text_year = read_framework(case.framework)
    if stack is None:
        problems.append(Problem("framework",
                                f"framework {case.framework!r} is no known training stack"))
    metric, value, mnote = read_metric(case, stack)
    notes += [mnote] if mnote else []
    zero, group, in_node = read_zero(case.sharding)
    if zero is None and fsdp_off(case.sharding):
        notes.append(f"sharding {case.sharding!r}: FSDP off, so the stack's default optimizer "
                     "sharding (Megatron-Core: the distributed optimizer, ZeRO-1)")
    elif zero is None and case.sharding:
        notes.append(f"sharding {case.sharding!r} not understood: read as not stated")
    elif zero is ZeroStage.NONE and _SWITCH.search(case.sharding.lower()):
        notes.append(f"sharding {case.sharding!r} read as ZeRO-0 (no sharding)")
    if in_node:
        notes.append("HSDP shard group not stated: the node (PyTorch HYBRID_SHARD default)")
    recompute = parse_recompute(case.recompute)
    if recompute is None and case.recompute:
        notes.append(f"recompute {case.recompute!r} is doubtful: read as not stated")
    vpp = read_interleave(case.interleave)
    interleaved = isinstance(vpp, Problem) and "without the number" in vpp.message
    if isinstance(vpp, Problem):
        if not interleaved:  # interleaved, count not given: the stack's recipe (layout.py)
            problems.append(vpp)
        vpp = None
    precision = training_dtype(case.precision)
    if precision is None and case.precision.strip():
        problems.append(Problem("precision", f"precision {case.precision!r} is not understood"))
    grad = DType.BF16 if "pure" in case.precision.lower() else None
    # torchao's float8 recipe names (Float8LinearRecipeName): "float8 rowwise", "tensorwise"
    scaling = (Fp8Scaling.ROWWISE if "rowwise" in case.precision.lower()
               else Fp8Scaling.TENSORWISE if "tensorwise" in case.precision.lower() else None)
    p = case.parallel
    fw = case.framework.lower()
    global_batch = case.global_batch_seqs
    network = parse_scale_out(case.interconnect)
    if isinstance(network, str):  # unreadable: the node preset's fabric, noted
        notes.append(f"interconnect not read ({network}): the node preset's network")
    if global_batch is None and case.local_batch is not None and p.dp is not None:
        # torchtitan's local batch is per data-parallel rank (context-parallel ranks share it):
        # global = local x dp (``training.local_batch_size``, torchtitan/config/job_config.py)
        global_batch = case.local_batch * p.dp
        notes.append(f"global batch not stated: local batch size {case.local_batch} x dp "
                     f"{p.dp} = {global_batch} sequences")
    return TrainingRun(
        id=case.row_id, file=case.file, line=case.line, source=case.source,
        accelerator=case.accelerator,
        accelerator_memory_gb=None if "accel_mem_GB" in case.unverified else case.accel_mem_gb,
        model=case.model, arch=case.arch,
        family=Family.MPT if case.model.lower().startswith("mpt") else None,
        devices=p.devices, nodes=p.nodes, tp=p.tp, pp=p.pp, dp=p.dp, cp=p.cp, ep=p.ep,
        vpp=vpp, interleaved=interleaved, zero=zero, shard_group=group, shard_in_node=in_node,
        recompute=recompute,
        sequence_parallel=read_flag(case.sequence_parallel),
        tp_comm_overlap=True if "async" in fw else None,
        compile="compile" in fw or "compile" in case.location.lower(),
        precision=precision, grad_reduce=grad, fp8_scaling=scaling, framework=stack,
        version=version,
        year=text_year or case.year, seq_len=case.seq_len,
        global_batch=global_batch, micro_batch=case.micro_batch,
        grad_accum=case.grad_accum, metric=metric, value=value, notes=case.notes_text,
        scale_out=network.text if isinstance(network, ScaleOut) else "",
        reading_notes=tuple(notes), problems=tuple(problems))


# -- serving rows of the inference layout ---------------------------------------------------------
# Serving rows (offline/server scenarios; the server picks the batch) read onto the canonical
# ServingRun, one rule per column:
#
# - scenario: "server" in the text -> server; "offline" with no batch size -> offline (the shared
#   file's "static batch, peak throughput (offline)" rows state a batch and stay fixed-batch);
# - framework: the cost profile by name (resolve.inference_framework), the version written right
#   after "TensorRT-LLM"/"vLLM" ("TensorRT-LLM v0.17", "TensorRT-LLM 1.0 (PyTorch backend)");
# - metric: "Throughput" in output (or total) tokens/s, total or per GPU by
#   ``per_device_or_total``; requests/s or samples/s; "TTFT pNN"/"TPOT pNN" in ms;
# - the notes' ``key=value`` settings the sources print: ``num_requests=`` (MLPerf Offline:
#   ``samples_per_query=``), ``max_batch_size=``, ``kv_cache_free_gpu_mem_fraction=``, and the
#   latency limits "TTFT p99 <= 2000 ms, TPOT p99 <= 200 ms" of a server run;
# - lengths: fixed, unless the notes say the lengths are a distribution (MLPerf's OpenOrca):
#   then lognormal with coefficient of variation DATASET_LENGTH_CV, an assumption stated on
#   the row, not fitted (the rows give only the means).
DATASET_LENGTH_CV = 1.0
_SERVING_VERSION = re.compile(r"(tensorrt-llm|vllm)[\s:/-]*v?(\d+(?:\.\d+)+)")
_NOTE_INT = {"requests": r"\b(?:num_requests|samples_per_query)\s*=\s*(\d+)",
             "max_batch": r"\bmax_batch_size\s*=\s*(\d+)",
             "max_tokens": r"\bmax_num_tokens\s*=\s*(\d+)"}
_NOTE_KV = re.compile(r"\bkv_cache_free_gpu_mem_fraction\s*=?\s*(0?\.\d+)")
_NOTE_SLO = re.compile(r"\b(ttft|tpot)\s+p(\d+)\s*(?:<=|≤)\s*(\d+(?:\.\d+)?)\s*ms", re.I)
# a latency metric: its quantity and statistic in either order ("TTFT p99", "Median TPOT",
# "P90 ITL", "Mean E2E latency", "time to first token (mean)")
_LAT_WHAT = {"ttft": "ttft", "time to first token": "ttft", "tpot": "tpot",
             "time per output token": "tpot", "itl": "itl", "inter-token latency": "itl",
             "inter token latency": "itl", "e2e": "e2e", "end-to-end latency": "e2e",
             "e2e latency": "e2e", "end to end latency": "e2e"}
_LAT_STAT = {"mean": "mean", "avg": "mean", "average": "mean", "median": "p50", "p50": "p50",
             "p90": "p90", "p99": "p99"}
_LAT_UNITS = {"ms": 1.0, "milliseconds": 1.0, "s": 1e3, "seconds": 1e3}


def _latency_metric(name: str) -> str | None:
    """'ttft_p99' from a latency metric's name, or None."""
    words = re.sub(r"[()\[\],]", " ", name).split()
    text = " ".join(words)
    what = next((v for k, v in sorted(_LAT_WHAT.items(), key=lambda kv: -len(kv[0]))
                 if re.search(rf"\b{re.escape(k)}\b", text)), None)
    stat = next((_LAT_STAT[w] for w in words if w in _LAT_STAT), None)
    return f"{what}_{stat}" if what and stat else None


# a stated request rate (vLLM benchmark_serving --request-rate, "Poisson 8 req/s"); MLPerf's
# target_qps is a target, not the measured rate, and is not read
_NOTE_RATE = (re.compile(r"\b(?:request[_ ]rate|arrival rate|qps)\s*[=:]?\s*(\d+(?:\.\d+)?)", re.I),
              re.compile(r"(\d+(?:\.\d+)?)\s*(?:req(?:uests)?|queries)\s*/\s*s\b", re.I))
_SERVING_WORDS = ("offline", "server", "in-flight", "inflight", "continuous", "poisson")


def is_serving_case(case: InferenceCase) -> bool:
    """A row the request-level simulator predicts (see the rules above): an offline, server or
    continuous-batching scenario that is not a static batch. A stated batch is then the
    scheduler's cap on running requests (max_batch_size / max_num_seqs), not a fixed batch."""
    s = case.scenario.lower()
    if "static" in s:
        return False
    return any(w in s for w in _SERVING_WORDS) and (case.batch is None or "batch =" not in s)


def serving_metric(case: InferenceCase) -> ServingMetric | None:
    name, unit = case.metric_name.strip().lower(), case.metric_unit.lower()
    scope = case.scope.lower()
    per_device = "total" not in scope and ("per gpu" in unit or "per gpu" in scope
                                           or "per device" in scope)
    if (lat := _latency_metric(name)) is not None:
        return ServingMetric(f"{lat}_ms") if unit in _LAT_UNITS else None
    if "throughput" not in name and "tokens/s" not in unit and "requests/s" not in unit:
        return None
    if "request" in unit or "sample" in unit:
        return ServingMetric.REQUESTS_PER_S
    if "total tokens" in unit:
        return (ServingMetric.TOTAL_TOKENS_PER_S_PER_DEVICE if per_device
                else ServingMetric.TOTAL_TOKENS_PER_S)
    if "tokens" in unit:
        return (ServingMetric.OUTPUT_TOKENS_PER_S_PER_DEVICE if per_device
                else ServingMetric.OUTPUT_TOKENS_PER_S)
    return None


def serving_from_case(case: InferenceCase) -> ServingRun:
    """The canonical serving run of an inference-layout serving row."""
    notes: list[str] = []
    problems: list[Problem] = [Problem(col, msg) for col, msg in case.problems]
    text = case.notes_text
    fw = inference_framework(case.framework)
    version = m.group(2) if (m := _SERVING_VERSION.search(case.framework.lower())) else ""
    s = case.scenario.lower()
    scenario = ServingScenario.SERVER if "server" in s else ServingScenario.OFFLINE
    metric = serving_metric(case)
    if metric is None:
        problems.append(Problem("metric", f"metric {case.metric_name!r} in "
                                          f"{case.metric_unit!r} is not a serving metric"))
    prec = inference_precision(case.precision_weights, case.precision_kv, case.arch.hidden or 1)
    weight = kv = None
    if isinstance(prec, str):
        problems.append(Problem("precision", prec))
    else:
        weight, kv = prec.weight, prec.kv
        notes += prec.notes
    found = {k: int(m.group(1)) for k, rx in _NOTE_INT.items()
             if (m := re.search(rx, text, re.I))}
    kv_fraction = float(m.group(1)) if (m := _NOTE_KV.search(text)) else None
    rate = next((float(m.group(1)) for rx in _NOTE_RATE
                 if (m := rx.search(f"{case.scenario} {text}"))), None)
    slo: dict[str, float] = {}
    pct: float | None = None
    for what, q, limit in _NOTE_SLO.findall(text):
        slo[what.lower()] = float(limit)
        pct = float(q)
    dist, spread = None, None
    if re.search(r"lengths are a distribution|not fixed", text, re.I):
        dist, spread = "lognormal", DATASET_LENGTH_CV
        notes.append(f"lengths are dataset means: lognormal lengths with coefficient of "
                     f"variation {DATASET_LENGTH_CV:g} assumed (not stated by the source)")
    p = case.parallel
    return ServingRun(
        id=case.row_id, file=case.file, line=case.line, source=case.source,
        accelerator=case.accelerator,
        accelerator_memory_gb=None if "accel_mem_GB" in case.unverified else case.accel_mem_gb,
        model=case.model, arch=case.arch, devices=p.devices, nodes=p.nodes, tp=p.tp, pp=p.pp,
        dp=p.dp, ep=p.ep, framework=fw, version=version, precision=weight, kv_precision=kv,
        scenario=scenario, input_len=case.input_len, output_len=case.output_len,
        length_dist=dist, length_spread=spread, requests=found.get("requests"),
        slo_ttft_ms=slo.get("ttft"), slo_tpot_ms=slo.get("tpot"), slo_percentile=pct,
        rate=rate if scenario is ServingScenario.SERVER else None,
        max_batch=found.get("max_batch") or case.batch, max_tokens=found.get("max_tokens"),
        kv_fraction=kv_fraction, metric=metric,
        value=(case.metric_value * _LAT_UNITS.get(case.metric_unit.strip().lower(), 1.0)
               if metric is not None and metric.is_latency and case.metric_value is not None
               else case.metric_value), notes=text,
        reading_notes=tuple(notes), problems=tuple(problems))
