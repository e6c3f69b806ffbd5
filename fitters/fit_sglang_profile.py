"""Fit SGLang's serving profile (CUDA and ROCm) on a fixed quarter of the InferenceX SGLang
sweeps, report the error on the other three quarters, and write SGLang's entry of
framework_calibration.yaml (only the ``sglang:`` block; every other stack's lines are kept
byte for byte).

Data: ``data/inferencex_published.yaml`` (SemiAnalysis InferenceX closed-loop concurrency
sweeps of DeepSeek-R1; data/README.md), the records whose framework is ``sglang`` (aggregated
and SGLang's own PD disaggregation; Dynamo with an SGLang engine is Dynamo's, not fitted here)
that the engine predicts.

Split rule (fixed before fitting, from the configuration only, never from an error): a
record's configuration key is ``accelerator|precision|moe_precision|input_len|output_len|tp|ep|
dp_attention|disaggregated|mtp`` (every concurrency and metric of a configuration share it);
the record is **fitted on** iff the first byte of ``sha256(key)`` is divisible by 4 (one
configuration in four), else it is **held out** and only scored.

Platforms: the same SGLang runs other kernels and another graph runtime on AMD GPUs (ROCm:
AITER and Triton attention/MoE/GEMM kernels, HIP graphs; CUDA: FlashInfer/FlashMLA, DeepGEMM,
CUTLASS, CUDA graphs; sgl-project/sglang ``python/sglang/srt/layers/attention/`` backends and
``docs/platforms/amd_gpu.md``), so the two are fitted apart, on the fit-set records of their
own platform (``cost/framework.py`` ``platform_of``: AMD -> rocm, else cuda); the ROCm figures
go into the entry's ``rocm:`` block.

Parameters (two per platform, physical, none per row, accelerator or concurrency):

- ``step_overhead_s``: host time per forward pass of SGLang's scheduler loop (batch
  scheduling, sampling, graph replay launch); fitted on the per-user rate rows
  (1 / median TPOT), whose time per output token is affine in it (one step per token);
- ``request_latency_s``: the front end's latency outside the loop (HTTP server, the
  ``TokenizerManager`` and ``DetokenizerManager`` processes and their ZMQ hand-offs), added to
  TTFT and E2E (cost/framework.py); fitted on the median-TTFT rows, which are affine in it.

On ROCm a third, ``kernel_efficiency``: the share of the roofline's achievable speed SGLang's
ROCm kernels (AITER/Triton fused MoE, MLA decode) reach, every device op's time divided by it
(cost/framework.py). The ROCm records' decode time scales with the device's bandwidth (the
per-user rate of MI355X over MI300X's at the same load is about their 8.0 / 5.3 TB/s) at about
three times the roofline's time, which a fixed step cannot express; CUDA's kernels are the ones
the achievable figures were measured with, so CUDA keeps 1.0. It is chosen on a grid
(``EFFICIENCIES``), each value with its own step and latency fitted as below, by the mean
soft-L1 loss of every fit-set record's log error. AITER ships its kernels per GPU target (gfx942
for CDNA3's MI300X/MI325X, gfx950 for CDNA4's MI355X: ROCm/aiter ``hsa/gfx942/mla`` holds 26 MLA
kernels, ``hsa/gfx950/mla`` 65, the FP8-query decode ones among them), so the share is then
chosen again per architecture among the fit-set records (``ARCH_EFFICIENCIES``, each
architecture on its own records at the joint step and latency), and the step and latency
refitted on every record at those shares (``architecture_efficiency`` in the ROCm block; an
architecture with no fitted record, CDNA2, keeps the joint share). On the fit set of this split
the joint share is 0.67 and the per-architecture ones CDNA3 0.6 and CDNA4 1.0 (MI300X at 1k/1k
and 4 clients takes 14.6 ms per token, MI355X 9.9 ms); no grid value of the joint share fits
both generations at the step their other loads fix.

Each is fitted by robust least squares (``scipy.optimize.least_squares``, soft-L1 loss with a
10 % scale) on log(predicted / measured time), step first (with zero latency; TPOT does not
see the latency), then the latency at the fitted step; the engine re-predicts the fit set at
the result (in-sample error) and every held-out record before (the profile as it was) and after.

Reads: data/inferencex_published.yaml and the bundled framework_calibration.yaml.
Writes: src/accelmap/cost/data/framework_calibration.yaml (SGLang's block only).

Run: python fitters/fit_sglang_profile.py [--dry-run]   (PYTHONPATH=src from the root)
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import yaml

try:
    from scipy.optimize import least_squares
except ImportError:  # the fitters' extra (pyproject.toml: fit)
    raise SystemExit(f"{Path(__file__).name} needs SciPy: pip install 'accelmap[fit]'") from None

from accelmap.api import load_catalog, validate_cases
from accelmap.api.validation import Prediction, Status
from accelmap.cost import framework as fwmod
from accelmap.validate import serving as vserving
from accelmap.validate.fit_split import RULE, config_key, in_fit_set, stack_word

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "inferencex_published.yaml"
OUT = ROOT / "src" / "accelmap" / "cost" / "data" / "framework_calibration.yaml"
STACK = "sglang"
# the split rule (RULE, config_key, in_fit_set) is src/accelmap/validate/fit_split.py's
LOSS_SCALE = 0.1
BOUNDS = {"step_overhead_s": (0.0, 20e-3), "request_latency_s": (0.0, 1.0)}
# kernel_efficiency candidates on ROCm: device time x 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4
EFFICIENCIES = (1.0, 0.8, 0.6667, 0.5714, 0.5, 0.4, 0.3333, 0.25)
# per architecture (CDNA3, CDNA4): device time x 1 to 4 in finer steps
ARCH_EFFICIENCIES = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25)
Table = dict[str, Any]
PLATFORM_NAMES = {"cuda": "CUDA", "rocm": "ROCm"}


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def sglang_records(path: Path = DATA, stack: str = STACK) -> list[dict[str, Any]]:
    """The file's records of ``stack`` (SGLang's; fit_atom_profile.py asks for ATOM's)."""
    data = yaml.safe_load(path.read_text())
    recs = data["runs"] if isinstance(data, dict) else data
    return [r for r in recs if stack_word(r) == stack]


def platform(rec: dict[str, Any], vendors: dict[str, str]) -> str:
    return fwmod.platform_of(vendors.get(str(rec["accelerator"])))


def predict(recs: Sequence[dict[str, Any]], table: Table,
            loader: str = "_calibration") -> list[Prediction]:
    """The engine's predictions of ``recs`` with framework_calibration.yaml (or the table
    ``cost.framework.<loader>`` reads) replaced by ``table`` (the serving simulations are
    re-run: their cache does not key on the profile)."""
    if not recs:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as tmp:
        yaml.safe_dump(list(recs), tmp, sort_keys=False)
    vserving._cache.clear()
    try:
        with mock.patch.object(fwmod, loader, lambda: table):
            return list(validate_cases([Path(tmp.name)]).predictions)
    finally:
        vserving._cache.clear()
        Path(tmp.name).unlink()


def with_sglang(base: Table, plat: str, values: dict[str, float], stack: str = STACK) -> Table:
    """``base`` with ``stack``'s figures on ``plat`` set to ``values`` (a stack that runs on
    one platform only, ``plat`` None, keeps them at the top level)."""
    table = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    entry = dict(table.get(stack) or {})
    if plat == "rocm":
        entry["rocm"] = {**(entry.get("rocm") or {}), **values}
    else:
        entry.update(values)
    table[stack] = entry
    return table


def _as_time(p: Prediction, value: float) -> float:
    """TTFT in seconds as is; a rate (tokens/s per user) as seconds per token."""
    return value / 1e3 if p.metric == "ttft_p50_ms" else 1.0 / value


def fit_additive(pairs: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """The x in [lo, hi] that makes predicted time + x match measured time, robustly:
    soft-L1 least squares on log((pred + x) / measured), 10 % scale."""
    pred = np.array([p for p, _ in pairs], float)
    meas = np.array([m for _, m in pairs], float)
    x0 = float(np.clip(np.median(meas - pred), lo, hi))
    res = least_squares(lambda x: np.log((pred + x[0]) / meas), [x0], bounds=([lo], [hi]),
                        loss="soft_l1", f_scale=LOSS_SCALE)
    return float(res.x[0])


def _pairs(preds: Sequence[Prediction], metric: str) -> list[tuple[float, float]]:
    return [(_as_time(p, p.predicted), _as_time(p, p.measured)) for p in preds
            if p.status is Status.OK and p.metric == metric and p.predicted and p.measured]


def fit_platform(recs: Sequence[dict[str, Any]], base: Table, plat: str,
                 stack: str = STACK, efficiencies: Sequence[float] = (1.0,),
                 fixed: dict[str, Any] | None = None) -> dict[str, Any]:
    """step_overhead_s on the TPOT rows, then request_latency_s on the TTFT rows (module doc),
    at each kernel efficiency of ``efficiencies``; the one whose fitted figures give the
    lowest soft-L1 loss over every record wins (one candidate: no choice, nothing written).
    ``fixed``: figures held as given while the step and latency are fitted."""
    best: tuple[float, dict[str, Any]] | None = None
    for eff in efficiencies:
        own: dict[str, Any] = dict(fixed) if fixed else (
            {} if len(efficiencies) == 1 else {"kernel_efficiency": eff})
        zero = with_sglang(base, plat, {"step_overhead_s": 0.0, "request_latency_s": 0.0,
                                        **own}, stack)
        step = fit_additive(_pairs(predict(recs, zero), "tokens_per_s_per_user"),
                            *BOUNDS["step_overhead_s"])
        at_step = with_sglang(base, plat, {"step_overhead_s": step, "request_latency_s": 0.0,
                                           **own}, stack)
        late = fit_additive(_pairs(predict(recs, at_step), "ttft_p50_ms"),
                            *BOUNDS["request_latency_s"])
        values = {"step_overhead_s": round(step, 7), "request_latency_s": round(late, 5), **own}
        if len(efficiencies) == 1 or fixed:
            return values
        loss = soft_l1_loss(predict(recs, with_sglang(base, plat, values, stack)))
        if best is None or loss < best[0]:
            best = (loss, values)
    assert best is not None
    return best[1]


def architecture_of(rec: dict[str, Any], archs: dict[str, str]) -> str:
    return archs.get(str(rec["accelerator"]), "")


def fit_architectures(recs: Sequence[dict[str, Any]], base: Table, plat: str,
                      values: dict[str, float], archs: dict[str, str],
                      stack: str = STACK) -> dict[str, Any]:
    """Per GPU architecture among ``recs`` (module doc): its kernel efficiency chosen on
    ``ARCH_EFFICIENCIES`` by the soft-L1 loss of its own records at the platform's joint step
    and latency, then the step and latency refitted on every record at those efficiencies.
    The joint ``kernel_efficiency`` stays for architectures with no fitted record."""
    by_arch: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        by_arch.setdefault(architecture_of(r, archs), []).append(r)
    chosen: dict[str, float] = {}
    for arch, mine in sorted(by_arch.items()):
        if not arch:
            continue
        losses = {eff: soft_l1_loss(predict(mine, with_sglang(
            base, plat, {**values, "architecture_efficiency": {**chosen, arch: eff}}, stack)))
            for eff in ARCH_EFFICIENCIES}
        chosen[arch] = min(losses, key=lambda e: losses[e])
        print(f"  {plat} {arch}: kernel efficiency {chosen[arch]} "
              f"(loss {losses[chosen[arch]]:.4f} over {len(mine)} records)")
    own = {k: v for k, v in values.items() if k == "kernel_efficiency"}
    own["architecture_efficiency"] = chosen  # type: ignore[assignment]
    refit = fit_platform(recs, base, plat, stack, fixed=own)
    return {**refit, **own}


def soft_l1_loss(preds: Sequence[Prediction]) -> float:
    """Mean soft-L1 loss of the scored records' log errors (``LOSS_SCALE``)."""
    r = np.array([math.log(_as_time(p, p.predicted) / _as_time(p, p.measured)) for p in preds
                  if p.status is Status.OK and p.predicted and p.measured], float)
    z = (r / LOSS_SCALE) ** 2
    return float(np.mean(2.0 * (np.sqrt(1.0 + z) - 1.0))) if r.size else math.inf


def summary(preds: Sequence[Prediction]) -> dict[str, Any]:
    errs = [p.signed_pct_error for p in preds if p.status is Status.OK
            and p.signed_pct_error is not None]
    if not errs:
        return {"rows": 0}
    a = sorted(abs(e) for e in errs)
    return {"rows": len(a), "median_pct": round(statistics.median(a), 1),
            "p90_pct": round(a[min(len(a) - 1, math.ceil(0.9 * len(a)) - 1)], 1),
            "signed_median_pct": round(statistics.median(errs), 1)}


def grouped(preds: Sequence[Prediction], by_id: dict[str, dict[str, Any]],
            key: Callable[[dict[str, Any], Prediction], str]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Prediction]] = {}
    for p in preds:
        if p.status is Status.OK:
            groups.setdefault(key(by_id[p.row_id], p), []).append(p)
    return {k: summary(v) for k, v in sorted(groups.items())}


def held_out_residuals(table: Table | None = None,
                       stack: str = STACK) -> list[tuple[str, str, int, float]]:
    """(metric, platform, devices, abs % error) of every held-out record of ``stack`` the engine
    predicts with ``table`` (default: the calibration as written): the SGLang (and ATOM) error
    bands (fitters/derive_error_bands.py)."""
    vendors = {k: a.vendor for k, a in load_catalog().accelerators.items()}
    recs = [r for r in sglang_records(stack=stack) if not in_fit_set(r)]
    by_id = {r["id"]: r for r in recs}
    preds = predict(recs, table if table is not None else fwmod._calibration())
    return [(str(p.metric), platform(by_id[p.row_id], vendors), int(by_id[p.row_id]["devices"]),
             float(p.abs_pct_error)) for p in preds
            if p.status is Status.OK and p.abs_pct_error is not None]


def _keys(recs: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({config_key(r) for r in recs})


def entry_text(cuda: dict[str, Any], rocm: dict[str, Any], base_entry: dict[str, Any]) -> str:
    """SGLang's block of framework_calibration.yaml: the CUDA figures at the top level, the
    ROCm ones in ``rocm:`` (cost/framework.py reads both)."""
    def block(res: dict[str, Any], plat: str) -> dict[str, Any]:
        eff = {k: res["values"][k] for k in ("kernel_efficiency", "architecture_efficiency")
               if k in res["values"]}
        return {"step_overhead_s": res["values"]["step_overhead_s"],
                "request_latency_s": res["values"]["request_latency_s"], **eff,
                "source": (f"fitted on {len(res['keys'])} SGLang configurations "
                           f"({res['records']} records) of data/inferencex_published.yaml on "
                           f"{PLATFORM_NAMES[plat]} GPUs (split rule: {RULE})"),
                "fitted_on": {"step_overhead_s": list(res["keys"]),
                              "request_latency_s": list(res["keys"]),
                              **{k: list(res["keys"]) for k in eff}},
                "in_sample": res["in_sample"], "held_out": res["held_out"]}

    top = block(cuda, "cuda")
    entry = {"kernel_overhead_s": base_entry.get("kernel_overhead_s", 0.0),
             "step_overhead_s": top.pop("step_overhead_s"),
             "request_latency_s": top.pop("request_latency_s"), **top, "calibrated_on": [],
             "not_calibrated": {
                 "kernel_overhead_s": "borrowed from the torch-compile fit (CUDA-graph decode "
                                      "loop, gpt-fast rows): graph replay leaves no host gap",
                 "request_overhead_s": "0 s: SGLang's per-request host work runs in the "
                                       "tokenizer/detokenizer processes (request_latency_s), "
                                       "not in the scheduler loop",
                 "quantized_weight_efficiency.int8": "no int8 weight-only SGLang row: 1.0",
                 "quantized_weight_efficiency.int4": "no int4 weight-only SGLang row: 1.0"},
             "rocm": block(rocm, "rocm")}
    return yaml.dump({STACK: entry}, Dumper=_NoAliases, sort_keys=False, width=100)


def replace_block(text: str, block: str, stack: str = STACK) -> str:
    """``text`` with its top-level ``stack:`` block (to the next top-level key or the end)
    replaced by ``block``; the other stacks' lines are untouched."""
    pat = re.compile(rf"^{re.escape(stack)}:\n(?:(?:[ #].*|)\n)*", re.MULTILINE)
    if not pat.search(text):
        return text.rstrip("\n") + "\n" + block
    return pat.sub(lambda _: block, text, count=1)


def borrowed(cal: Table) -> Table:
    """The calibration with SGLang's entry as it was before this fit (the "before" of the
    report, and the start of the fit): torch-compile's per-kernel and per-step figures, no
    request latency, no ROCm block."""
    lender = cal.get("torch-compile") or {}
    return {**cal, STACK: {k: lender[k] for k in ("kernel_overhead_s", "step_overhead_s")
                           if k in lender}}


def run(write: bool) -> dict[str, Any]:
    base = borrowed(dict(fwmod._calibration()))
    catalog = load_catalog().accelerators
    vendors = {k: a.vendor for k, a in catalog.items()}
    archs = {k: str(a.sparsity_2_4.architecture) for k, a in catalog.items()
             if a.sparsity_2_4 is not None}
    recs = sglang_records()
    fit = [r for r in recs if in_fit_set(r)]
    held = [r for r in recs if not in_fit_set(r)]
    table, out = base, {}
    for plat in ("cuda", "rocm"):
        mine = [r for r in fit if platform(r, vendors) == plat]
        values = fit_platform(mine, base, plat,
                              efficiencies=EFFICIENCIES if plat == "rocm" else (1.0,))
        if plat == "rocm":
            values = fit_architectures(mine, base, plat, values, archs)
        table = with_sglang(table, plat, values)
        out[plat] = {"values": values}
    before = predict(held, base)
    after = predict(held, table)
    fit_after = predict(fit, table)
    by_id = {r["id"]: r for r in recs}
    for plat, res in out.items():
        def of(ps: list[Prediction], p: str = plat) -> list[Prediction]:
            return [x for x in ps if platform(by_id[x.row_id], vendors) == p]
        scored = [by_id[x.row_id] for x in of(fit_after) if x.status is Status.OK]
        res.update(keys=_keys(scored), records=len(scored), in_sample=summary(of(fit_after)))
        print(f"{plat}: {res['values']} from {len(res['keys'])} configurations "
              f"({len(scored)} scored records)")
        res["held_out"] = {"before": summary(of(before)), "after": summary(of(after))}
    report(before, after, by_id)
    if write:
        block = entry_text(out["cuda"], out["rocm"], base.get(STACK) or {})
        OUT.write_text(replace_block(OUT.read_text(), block))
        print(f"wrote SGLang's block of {OUT}")
    return out


def report(before: list[Prediction], after: list[Prediction],
           by_id: dict[str, dict[str, Any]]) -> None:
    """Held-out error before and after, per accelerator x metric, and over all."""
    def acc_metric(r: dict[str, Any], p: Prediction) -> str:
        return f"{r['accelerator']} {p.metric}"

    def metric(r: dict[str, Any], p: Prediction) -> str:
        return str(p.metric)

    print(f"\nheld-out records (abs % error; signed + = optimistic)\n  {'group':<46}"
          f"{'n':>4}{'before med':>11}{'p90':>7}{'signed':>8}{'after med':>11}{'p90':>7}"
          f"{'signed':>8}")
    for key in (acc_metric, metric):
        b, a = grouped(before, by_id, key), grouped(after, by_id, key)
        for g in a:
            x, y = b.get(g, {"rows": 0}), a[g]
            if not y["rows"]:
                continue
            print(f"  {g:<46}{y['rows']:>4}{x.get('median_pct', '-'):>11}{x.get('p90_pct', '-'):>7}"
                  f"{x.get('signed_median_pct', '-'):>8}{y['median_pct']:>11}{y['p90_pct']:>7}"
                  f"{y['signed_median_pct']:>8}")
    sb, sa = summary(before), summary(after)
    print(f"  {'all held-out':<46}{sa['rows']:>4}{sb['median_pct']:>11}{sb['p90_pct']:>7}"
          f"{sb['signed_median_pct']:>8}{sa['median_pct']:>11}{sa['p90_pct']:>7}"
          f"{sa['signed_median_pct']:>8}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    args = ap.parse_args(argv)
    run(write=not args.dry_run)


if __name__ == "__main__":
    main()
