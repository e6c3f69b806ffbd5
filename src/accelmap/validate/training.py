"""One training run, whatever file it came from, through one prediction path.

A run on more than one device goes through the distributed engine with its stack's defaults
for the run's release (``validate/multi.py``); a run on one device (or on an unstated number)
through the engine on that device alone, as the transcription's single-device rows always
were: Megatron's profile for Megatron/NeMo runs, eager PyTorch otherwise, recompute as stated
(else full for Megatron, whose published GPT scripts checkpoint activations, else none), the
global batch as stated (else micro-batch x accumulation).
"""

from __future__ import annotations

from dataclasses import replace

from accelmap.catalog import Catalog
from accelmap.cost.framework import Framework
from accelmap.engine import System, estimate
from accelmap.errors import InputError
from accelmap.validate import multi
from accelmap.validate import resolve as rs
from accelmap.validate.outcome import Prediction, done, skip
from accelmap.validate.runs import METRICS, TrainingRun
from accelmap.validate.stacks import Stack
from accelmap.workload import Training


def predict_run(run: TrainingRun, catalog: Catalog, calibrated: frozenset[str]) -> Prediction:
    """The prediction of a run's metric, or the reasons it cannot be made."""
    if (run.device_count or 1) > 1:
        return multi.predict_run(run, catalog, calibrated)
    return predict_single(run, catalog, calibrated)


def predict_single(run: TrainingRun, catalog: Catalog, calibrated: frozenset[str]
                   ) -> Prediction:
    """A run on one device (see the module docstring)."""
    megatron = run.framework in (Stack.MEGATRON_LM, Stack.NEMO)
    fw = Framework.MEGATRON if megatron else Framework.EAGER
    base = multi.run_base(run, fw)
    # an impossible cell first: the device count it held is then no 'not stated'
    reasons: list[str] = [str(p) for p in run.problems if p.field not in ("precision",
                                                                            "framework")]
    notes: list[str] = list(run.reading_notes)
    if run.device_count is None and not reasons:
        reasons.append("device count not stated")
    dev, model, more, resolved = rs.resolve_run(run, catalog, megatron)
    reasons += more
    notes += resolved
    batch = run.global_batch
    if batch is None and run.micro_batch is not None:
        batch = run.micro_batch * (run.grad_accum or 1)
    if batch is None:
        reasons.append("micro-batch / global batch not stated")
    if run.precision is None:
        reasons += [str(p) for p in run.problems if p.field == "precision"] or [
            "precision not stated"]
    # one device needs no stack defaults: an unknown framework is eager PyTorch here
    if reasons or dev.value is None or model.value is None:
        return skip(base, reasons, notes)
    assert run.seq_len is not None and batch is not None and run.precision is not None
    assert run.metric is not None
    if mem := rs.memory_note(dev.value.acc, dev.value.fraction, run.accelerator_memory_gb):
        notes.append(mem)
    recompute = run.recompute
    if recompute is None:
        recompute, rnote = rs.recompute_policy("", megatron)
        notes += [rnote] if rnote else []
    adapters, lora_note = rs.run_adapters(run)
    notes += [lora_note] if lora_note else []
    wl = Training(batch=batch, seq_len=run.seq_len, dtype=run.precision, recompute=recompute,
                  adapters=adapters)
    try:
        est = estimate(model.value, System.on(dev.value), wl, framework=fw)
    except InputError as e:  # a recipe the part cannot run (engine/formats.py): one reason
        return skip(base, [str(e)], notes)
    spec = METRICS[run.metric]
    notes += [a for a in est.assumptions if "training recipe" in a]  # ops/recipes.py
    if not est.feasible:
        notes.append(f"{multi.NOT_FIT}: {est.reason}")
    base = replace(base, model_id=model.value.id, accelerator_id=dev.value.acc.id)
    return done(base, float(est.metrics[spec.engine_key]) * spec.scale, calibrated, notes,
                fits=bool(est.feasible))
