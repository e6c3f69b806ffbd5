"""Predict each measurement row's metric with accelmap's engines, without per-row tuning.

Every row goes through the same general path: accelerator via ``validate/names.py`` (its memory
column picks between same-part variants), model via ``validate/resolve.py`` (catalog preset or
the row's own dimensions), workload from the row's columns, framework profile from its framework
column. Single-device rows use ``estimate.py``; multi-device rows the distributed engine
(``validate/multi.py``: cluster and mapping from the row, the stack's documented defaults where
it is silent). Training rows, from the transcription (through its adapter,
``validate/transcribe.py``) or from a canonical run file (``validate/canonical.py``), are one
:class:`~accelmap.validate.runs.TrainingRun` each and take one path (``validate/training.py``).
Rows the engines cannot predict, and run-file records that cannot be read, are kept with the
reason. Rows that calibrated a
general parameter (listed under ``calibrated_on`` in ``cost/data/framework_calibration.yaml``,
and the HBM-bandwidth row that :data:`accelmap.cost.efficiency.BANDWIDTH_EFFICIENCY` comes from)
are predicted but marked ``calibration``: the summary leaves them out, because they match by
construction.

Errors are signed as optimism: positive means accelmap predicts *faster* than measured (a higher
rate, or a lower latency); see :attr:`Prediction.signed_pct_error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from accelmap.catalog import Catalog
from accelmap.cost.efficiency import BANDWIDTH_EFFICIENCY, matmul_efficiency
from accelmap.cost.roofline import Device
from accelmap.engine import System, estimate
from accelmap.ops.graph import Unit
from accelmap.units import DType, parse_dtype
from accelmap.validate import multi, speculative
from accelmap.validate import resolve as rs
from accelmap.validate.cases import Case, InferenceCase, MatmulCase, TrainingCase
from accelmap.validate.outcome import MetricKind, Prediction, Status, done, skip
from accelmap.validate.runs import ServingRun, TrainingRun, UnreadableRun
from accelmap.validate.serving import predict_serving
from accelmap.validate.training import predict_run
from accelmap.validate.transcribe import from_case, is_serving_case, serving_from_case
from accelmap.workload import Inference

# The HBM-bandwidth statement that BANDWIDTH_EFFICIENCY is derived from (efficiency.py).
BANDWIDTH_CALIBRATION_ROWS = frozenset({"M0021"})
GPT_FAST_MAX_NEW_TOKENS = 200  # gpt-fast generate.py: --max_new_tokens default 200

__all__ = ["MetricKind", "Prediction", "Status", "calibration_rows", "predict_case",
           "predict_cases"]


def calibration_file() -> Path:
    return Path(str(resources.files("accelmap").joinpath(
        "cost/data/framework_calibration.yaml")))


@lru_cache(maxsize=1)
def calibration_rows() -> frozenset[str]:
    """Row ids some general parameter was calibrated on (never scored)."""
    from accelmap.cost.efficiency import training_fit

    data = yaml.safe_load(calibration_file().read_text()) or {}
    rows = {str(r) for entry in data.values() if isinstance(entry, dict)
            for r in entry.get("calibrated_on") or ()}
    rows |= {str(r) for r in training_fit().get("fitted_on") or ()}  # fitters/fit_training.py
    return frozenset(rows | BANDWIDTH_CALIBRATION_ROWS)


def _devices_reason(devices: int | None) -> str | None:
    return "device count not stated" if devices is None else None


_LATENCY_UNITS = {"ms": 1e-3, "milliseconds": 1e-3, "ms/token": 1e-3, "s": 1.0, "seconds": 1.0,
                  "s/token": 1.0}
_TTFT_WORDS = ("1st token", "first token", "ttft", "time to first")
_TPOT_WORDS = ("tpot", "time per output token", "inter-token", "itl", "per-token latency",
               "latency per token", "per token latency")


def _inference_metric(case: InferenceCase) -> tuple[MetricKind, str, bool] | None:
    """(kind, metric key, higher is better) of a fixed-batch row, by its name and unit:
    first-token latency, per-token latency, per-user decode rate, output throughput per device
    or over all devices, requests/s. Latency keys end in _ms or _s as the row's unit."""
    name, unit = case.metric_name.strip().lower(), case.metric_unit.strip().lower()
    scale = _LATENCY_UNITS.get(unit)
    suffix = "ms" if scale == 1e-3 else "s"
    if scale is not None and any(w in name for w in _TTFT_WORDS):
        return MetricKind.TTFT, f"ttft_{suffix}", False
    if scale is not None and any(w in name for w in _TPOT_WORDS):
        return MetricKind.DECODE, f"tpot_{suffix}", False
    if "per user" in unit or "per user" in name or "/user" in unit:
        return MetricKind.DECODE, "tokens_per_s_per_user", True
    if "throughput" in name or name == "tokens/second" or "tokens/s" in unit:
        if "request" in unit or "sample" in unit:
            return MetricKind.THROUGHPUT, "requests_per_s", True
        if "total token" in unit or "total token" in name:
            return None  # prompt + output tokens: not a fixed-batch figure here
        per_device = any(w in unit for w in ("per gpu", "per device", "per chip"))
        return (MetricKind.THROUGHPUT,
                "output_tokens_per_s_per_device" if per_device else "tokens_per_s", True)
    return None


def _inference_value(key: str, est: Any, batch: int, output: int) -> float:
    """The estimate's figure for a metric key of ``_inference_metric``."""
    m = est.metrics
    if key.startswith(("ttft_", "tpot_")):
        seconds = float(m["ttft_s" if key.startswith("ttft") else "tpot_s"])
        return seconds * (1e3 if key.endswith("_ms") else 1.0)
    if key == "output_tokens_per_s_per_device":
        return float(m["tokens_per_s_per_device"])
    if key == "requests_per_s":
        return float(m["tokens_per_s"]) / max(output, 1)
    if key == "tokens_per_s_per_user":
        # gpt-fast reports tokens generated / wall time of generate() (prefill included): the
        # engine's batch x output / (TTFT + (output - 1) x TPOT), per sequence of the batch
        return float(m["tokens_per_s"]) / (batch * int(est.mapping.replicas))
    # TensorRT-LLM's static-batch throughput: output tokens / total time, over all devices
    return float(m["tokens_per_s"])


def predict_inference(case: InferenceCase, catalog: Catalog,
                      calibrated: frozenset[str]) -> Prediction:
    if speculative.is_speculative(case):
        return speculative.predict(case, catalog, calibrated)
    if is_serving_case(case):  # offline/server, the server picks the batch: the simulator
        return predict_serving(serving_from_case(case), catalog, calibrated)
    fw = rs.inference_framework(case.framework)
    prof, release_notes = rs.inference_profile(case.framework)
    metric = _inference_metric(case)
    base = Prediction(case.row_id, case.file, case.source, case.model, case.accelerator,
                      metric=metric[1] if metric else case.metric_name,
                      unit=case.metric_unit, kind=metric[0] if metric else None,
                      measured=case.metric_value,
                      higher_is_better=metric[2] if metric else True, framework=fw.value)
    reasons: list[str] = [msg for _, msg in case.problems]
    notes: list[str] = []
    if r := _devices_reason(case.parallel.devices):
        reasons.append(r)
    dev = rs.resolve_device(case.accelerator, catalog, memory_gb=multi.verified_memory(case))
    model = rs.resolve_model(case.model, case.arch, catalog, None, megatron=False)
    devices = case.parallel.devices or 1
    if devices > 1 and dev.value is not None and dev.value.fraction != 1.0:
        reasons.append("multi-device runs of part of a device are not modelled")
    for res in (dev, model):
        reasons += [res.reason] if res.reason else []
        notes += res.notes
    if metric is None:
        reasons.append(f"metric {case.metric_name!r} in {case.metric_unit!r} is not supported")
    if case.metric_value is None:
        reasons.append("measured value is not a number")
    if case.batch is None or case.input_len is None:
        reasons.append("batch size or input length not stated")
    output = case.output_len
    if metric and metric[0] is MetricKind.DECODE and output is None:
        output = GPT_FAST_MAX_NEW_TOKENS
        notes.append(f"output length not stated: gpt-fast's default max_new_tokens "
                     f"{GPT_FAST_MAX_NEW_TOKENS} assumed")
    if output is None:
        reasons.append("output length not stated")
    if reasons or dev.value is None or model.value is None or metric is None:
        return skip(base, reasons, notes)
    spec, device = model.value, dev.value
    prec = rs.inference_precision(case.precision_weights, case.precision_kv, spec.d_model)
    if isinstance(prec, str):
        return skip(base, [prec], notes)
    notes += prec.notes
    if prec.kv.bytes < 2 and (spec.n_kv_heads or spec.n_heads) < spec.n_heads:
        notes += release_notes  # the release feature applies: grouped heads, 8-bit KV
    if mem := rs.memory_note(device.acc, device.fraction, case.accel_mem_gb):
        notes.append(mem)
    assert case.batch is not None and case.input_len is not None and output is not None
    wl = Inference(batch=case.batch, prompt_len=case.input_len, output_len=output,
                   weight_dtype=prec.weight, act_dtype=prec.act, kv_dtype=prec.kv,
                   quant_group=prec.quant_group)
    if devices == 1:
        est = estimate(spec, System.on(device), wl, framework=prof)
    else:
        multi_est = multi.serve_estimate(spec, device.acc, devices, case, wl, prof, catalog,
                                         notes)
        if isinstance(multi_est, str):
            return skip(base, [multi_est], notes)
        est = multi_est
    value = _inference_value(metric[1], est, case.batch, output)
    if not est.feasible:
        notes.append(f"{multi.NOT_FIT}: {est.reason}")
    notes += [a for a in est.assumptions if a.startswith(("matmul efficiency", "framework"))]
    return done(base, value, calibrated, notes, fits=bool(est.feasible), model_id=spec.id,
                 accelerator_id=device.acc.id)


def predict_training(case: TrainingCase, catalog: Catalog,
                     calibrated: frozenset[str]) -> Prediction:
    """A transcription training row, read as a canonical run (``validate/transcribe.py``)."""
    return predict_run(from_case(case), catalog, calibrated)


def predict_unreadable(case: UnreadableRun, calibrated: frozenset[str]) -> Prediction:
    """A run-file record that could not be read: skipped, with one reason per problem."""
    base = Prediction(case.id, case.file, case.source, "-", "-", kind=MetricKind.TRAINING)
    return skip(base, [str(p) for p in case.problems], [])


def _matmul_dtype(text: str) -> DType | None:
    return parse_dtype(text.split()[0]) if text.strip() else None


def predict_matmul(case: MatmulCase, catalog: Catalog, calibrated: frozenset[str]) -> Prediction:
    bandwidth = case.kind.lower().startswith("hbm") or case.measured_unit.lower() == "gb/s"
    base = Prediction(case.row_id, case.file, case.source, "-", case.accelerator,
                      metric="hbm_GBps" if bandwidth else "matmul_tflops",
                      unit="GB/s" if bandwidth else "TFLOP/s",
                      kind=MetricKind.BANDWIDTH if bandwidth else MetricKind.MATMUL,
                      measured=case.measured_value)
    dev = rs.resolve_device(case.accelerator, catalog)
    reasons = [msg for _, msg in case.problems] + ([dev.reason] if dev.reason else [])
    if case.measured_value is None:
        reasons.append("measured value is not a number")
    dtype = None if bandwidth else _matmul_dtype(case.dtype)
    if not bandwidth and dtype is None:
        reasons.append(f"dtype {case.dtype!r} is not understood")
    if reasons or dev.value is None:
        return skip(base, reasons, list(dev.notes))
    device: Device = dev.value
    acc = device.acc
    notes = list(dev.notes)
    if bandwidth:
        value = (acc.memory_bandwidth or 0.0) * device.fraction * BANDWIDTH_EFFICIENCY / 1e9
        notes.append(f"catalog {(acc.memory_bandwidth or 0) / 1e9:.0f} GB/s x "
                     f"BANDWIDTH_EFFICIENCY {BANDWIDTH_EFFICIENCY:.3f}")
        return done(base, value, calibrated, notes, accelerator_id=acc.id)
    assert dtype is not None
    peak, _ = device.peak(dtype, Unit.MATRIX)
    # Leave-one-out: this device's own measurements (all dtypes) are excluded.
    eff = matmul_efficiency(acc, dtype, exclude=acc.id)
    notes.append(f"catalog dense peak {peak / 1e12:.1f} TFLOP/s x efficiency {eff.value:.3f} "
                 f"({eff.source}; leave-one-out: {acc.id}'s own rows excluded)")
    if case.theoretical_peak and abs(peak / 1e12 / case.theoretical_peak - 1) > 0.02:
        notes.append(f"the row's peak {case.theoretical_peak:g} TFLOP/s differs from the "
                     f"catalog's {peak / 1e12:g}")
    return done(base, peak * eff.value / 1e12, calibrated, notes, accelerator_id=acc.id)


def predict_case(case: Case | TrainingRun | ServingRun | UnreadableRun, catalog: Catalog,
                 calibrated: frozenset[str] | None = None) -> Prediction:
    cal = calibration_rows() if calibrated is None else calibrated
    if isinstance(case, InferenceCase):
        return predict_inference(case, catalog, cal)
    if isinstance(case, TrainingCase):
        return predict_training(case, catalog, cal)
    if isinstance(case, TrainingRun):
        return predict_run(case, catalog, cal)
    if isinstance(case, ServingRun):
        return predict_serving(case, catalog, cal)
    if isinstance(case, UnreadableRun):
        return predict_unreadable(case, cal)
    return predict_matmul(case, catalog, cal)


def predict_cases(cases: Sequence[Case | TrainingRun | ServingRun | UnreadableRun],
                  catalog: Catalog, calibrated: frozenset[str] | None = None) -> list[Prediction]:
    return [predict_case(c, catalog, calibrated) for c in cases]
