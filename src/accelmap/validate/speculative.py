"""Speculative-decoding rows (inference.csv, gpt-fast's "Speculative Sampling" line), predicted
through ``serving.speculative.batch_step``: the fixed batch of the row, the target and the
draft model from the row's "X (verifier ...) + Y draft" name, on one device.

What the row leaves out is taken from the command the README links to, and the acceptance rate
from the literature (never fitted to the row):

- gpt-fast ``scripts/speculate_70B_int4.sh`` (git history at 32971d31, the README's link):
  ``python generate.py --compile --draft_checkpoint_path .../Llama-2-7b-chat-hf/
  model_int4.g32.pth --checkpoint_path .../Llama-2-70b-chat-hf/model_int4.g32.pth
  --speculate_k 4 --prompt "def quicksort(arr):" --max_new_tokens 100 --temperature 0``: one
  process without torchrun, so one device (the two int4 models, about 40 GB, fit one 80 GB
  A100); k = 4; int4 groups of 32; 100 new tokens after a prompt of about 7 tokens (BOS and
  the 6 Llama-2 tokens of "def quicksort(arr):");
- acceptance rate alpha = 0.75: Leviathan et al. 2023, Table 3, LaMDA 137B verified by the
  8B LaMDA draft at temperature 0, the published same-family pair closest in size ratio to
  70B/7B at greedy decoding. The row's real alpha (on a code prompt) is not published; the
  prediction moves with it (E from 2.4 at alpha 0.6 to 3.4 at alpha 0.8 for k = 4).
"""

from __future__ import annotations

import re

from accelmap.catalog import Catalog
from accelmap.engine import System, estimate, resolve_framework
from accelmap.engine.result import ServeStep
from accelmap.mapping.plan import Mapping
from accelmap.serving.speculative import Speculation, batch_step
from accelmap.validate import resolve as rs
from accelmap.validate.cases import Arch, InferenceCase
from accelmap.validate.outcome import MetricKind, Prediction, done, skip
from accelmap.workload import Inference

# Leviathan et al. 2023, Table 3: LaMDA (137B) with a LaMDA (8B) draft, argmax sampling.
LITERATURE_ACCEPT = 0.75
# scripts/speculate_70B_int4.sh at gpt-fast 32971d31 (see the module docstring)
GPT_FAST_SPECULATE_K = 4
GPT_FAST_PROMPT_TOKENS = 7
GPT_FAST_NEW_TOKENS = 100
GPT_FAST_INT4_GROUP = 32

_PAIR = re.compile(r"^(?P<target>.+?)\s*\(verifier[^)]*\)\s*\+\s*(?P<draft>.+?)\s+draft\b",
                   re.IGNORECASE)


def is_speculative(case: InferenceCase) -> bool:
    return "speculative" in f"{case.framework} {case.scenario}".lower()


def predict(case: InferenceCase, catalog: Catalog, calibrated: frozenset[str]) -> Prediction:
    fw = rs.inference_framework(case.framework)
    base = Prediction(case.row_id, case.file, case.source, case.model, case.accelerator,
                      metric="tokens_per_s", unit=case.metric_unit, kind=MetricKind.DECODE,
                      measured=case.metric_value, higher_is_better=True, framework=fw.value)
    reasons: list[str] = [msg for _, msg in case.problems]
    notes: list[str] = []
    pair = _PAIR.match(case.model)
    if "gpt-fast" not in case.framework.lower():
        reasons.append("speculative decoding rows are read for gpt-fast's published command "
                       "only")
    if pair is None:
        reasons.append(f"model {case.model!r} does not name a verifier and a draft")
    if case.metric_value is None:
        reasons.append("measured value is not a number")
    if case.metric_name.lower() != "tokens/second":
        reasons.append(f"metric {case.metric_name!r} is not supported")
    if reasons or pair is None:
        return skip(base, reasons, notes)
    dev = rs.resolve_device(case.accelerator, catalog, memory_gb=case.accel_mem_gb)
    target = rs.resolve_model(pair["target"], case.arch, catalog, None, megatron=False)
    draft = rs.resolve_model(pair["draft"], Arch(), catalog, None, megatron=False)
    for res in (dev, target, draft):
        reasons += [res.reason] if res.reason else []
        notes += res.notes
    prec = rs.inference_precision(case.precision_weights, case.precision_kv, 1)
    if isinstance(prec, str):
        reasons.append(prec)
    if reasons or dev.value is None or target.value is None or draft.value is None \
            or isinstance(prec, str):
        return skip(base, reasons, notes)
    if case.parallel.devices is None:
        notes.append("device count not stated: 1 (gpt-fast scripts/speculate_70B_int4.sh runs "
                     "generate.py in one process, without torchrun)")
    elif case.parallel.devices != 1:
        return skip(base, ["speculative rows on several devices are not modelled here"], notes)
    notes += [f"k = {GPT_FAST_SPECULATE_K}, int4 group {GPT_FAST_INT4_GROUP}, prompt "
              f"{GPT_FAST_PROMPT_TOKENS} tokens, {GPT_FAST_NEW_TOKENS} new tokens: gpt-fast "
              "scripts/speculate_70B_int4.sh",
              f"acceptance rate {LITERATURE_ACCEPT} assumed: Leviathan et al. 2023 Table 3 "
              "(LaMDA 137B with an 8B draft, greedy); not stated by the source"]
    wl = Inference(batch=case.batch or 1, prompt_len=GPT_FAST_PROMPT_TOKENS,
                   output_len=GPT_FAST_NEW_TOKENS, weight_dtype=prec.weight,
                   act_dtype=prec.act, kv_dtype=prec.kv, quant_group=GPT_FAST_INT4_GROUP)
    system = System.on(dev.value)
    est = estimate(target.value, system, wl, framework=fw)
    assert isinstance(est, ServeStep)
    sp = Speculation(LITERATURE_ACCEPT, GPT_FAST_SPECULATE_K, draft.value)
    out = batch_step(est, sp, target.value, system, wl, Mapping.serving(),
                     resolve_framework(fw, fw))
    if not out.feasible:
        notes.append(f"does not fit: {out.reason}")
    return done(base, float(out.tokens_per_s or 0.0), calibrated, notes,
                fits=bool(out.feasible), model_id=target.value.id,
                accelerator_id=dev.value.acc.id)

