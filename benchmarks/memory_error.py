"""Predicted vs published memory for every row of memory.csv the engine can predict.

Three kinds of rows (the ``measurement_type`` column; SOURCES.md sec. A14/A16):

- **measured**: torchtitan's peak memory per device (Y0089-Y0108). torchtitan logs
  ``torch.cuda.memory_stats()["reserved_bytes.all.peak"]`` (torchtitan 9dec370, metrics.py
  L62, train.py L393): what PyTorch's caching allocator reserved, so the engine's figure compared
  with it is its memory total less the items outside that allocator (the CUDA context and
  NCCL's own buffers: ``accelmap.memory.allocator.NON_PYTORCH_ITEMS``). The workload, mapping
  and stack come from the row: model preset, FSDP2 = ZeRO-3 over dp x cp, TP/PP/CP degrees,
  local batch (micro-batches = pp degree under pipelining, torchtitan pipelining_utils.py L79-81;
  interleaved 1F1B = 2 stages per rank, L27), selective or full activation checkpointing,
  Float8 linears, torch.compile or eager, and torchtitan's loss, torch ``cross_entropy`` on fp32
  logits (``workload.Loss.EAGER``; train.py L131-134);
- **analytical**: ZeRO Table 1 model states (Rajbhandari et al. 2020), K = 12 and 16-bit
  weights and gradients, from ``memory.sharding.model_state_bytes``;
- **estimator**: DeepSpeed's ``estimate_zero3_model_states_mem_needs`` for T0_3B (per-GPU
  model states under ZeRO-3 with and without offload) from the engine's training memory items
  (``memory.training.training_items``: model states, offload and the gathered layers, no
  activations); its host-memory rows are skipped (host memory is not modelled). DeepSpeed
  prints ``gpu_mem/2**30`` labelled "GB" (``estimate_zero3_model_states_mem_needs_all_cold``,
  deepspeed/runtime/zero/stage3.py), so these values are GiB.

ZeRO Table 2 (largest model that trained) states no geometry or batch, so it is skipped.

The measured rows are split in two by a fixed rule: the rows whose number is even fit the
caching allocator's reserve (``memory.allocator``, ``fit_allocator``), the odd ones are held
out, and the error band (``memory.band``) is the p90 of their absolute relative errors. With
``--fit`` the script prints the fitted constants and the band to paste into those modules.

Run: python benchmarks/memory_error.py [path/to/memory.csv] [--fit]
"""

from __future__ import annotations

import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accelmap.api import Catalog, DType, Mapping, Training, estimate, load_catalog
from accelmap.api.estimates import TrainStep
from accelmap.cost.framework import Framework
from accelmap.hardware.cluster import parse_cluster
from accelmap.mapping.plan import ZeroStage, balanced_split, default_schedule
from accelmap.memory.allocator import DYNAMIC_ITEMS, NON_PYTORCH_ITEMS
from accelmap.memory.sharding import model_state_bytes
from accelmap.memory.training import training_items
from accelmap.workload import Loss, Recompute

DEFAULT_CSV = (Path(__file__).resolve().parents[1] / "data" / "reference"
               / "measurements" / "memory.csv")
GiB, GB = 2.0**30, 1e9
MODELS = {"8b": "llama-3.1-8b", "70b": "llama-3.1-70b", "405b": "llama-3.1-405b"}


@dataclass(frozen=True)
class MemoryRow:
    row_id: str
    kind: str  # measured / analytical / estimator
    published: float | None  # bytes
    predicted: float | None  # bytes
    note: str
    dynamic: float = 0.0  # measured rows: the dynamic bytes the allocator fit scales
    reserve_free: float = 0.0  # measured rows: predicted bytes without the allocator item
    in_fit: bool = False  # a measured row whose setup the engine models (fit or held out)

    @property
    def rel_error(self) -> float | None:
        """(predicted - published) / published; + = the engine predicts more memory."""
        if self.published is None or self.predicted is None:
            return None
        return (self.predicted - self.published) / self.published


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _value(row: dict[str, str]) -> float | None:
    m = re.match(r"\s*([0-9.]+)", row["value"])
    if not m:
        return None
    scale = {"gib": GiB, "gb": GB}.get(row["unit"].strip().lower())
    return float(m.group(1)) * scale if scale else None


def _int(text: str) -> int | None:
    m = re.search(r"\d+", text or "")
    return int(m.group(0)) if m else None


def _degree(config: str, axis: str) -> int:
    m = re.search(rf"\b{axis}\s*=\s*(\d+)", config)
    return int(m.group(1)) if m else 1


def zero_table_1(row: dict[str, str]) -> MemoryRow:
    """Rajbhandari et al. 2020 Table 1: 16-bit weights and gradients, K = 12."""
    stage = {"ZeRO-DP Pos": 1, "ZeRO-DP Pos+g": 2, "ZeRO-DP Pos+g+p": 3}[row["sharding_zero"]]
    psi = float(row["params_B"]) * 1e9
    nd = _int(row["parallel_config"]) or 1
    pred = float(sum(model_state_bytes(psi, stage, nd, 2.0, 2.0, 12.0).values()))
    return MemoryRow(row["row_id"], "analytical", _value(row), pred,
                     f"ZeRO stage {stage}, Nd={nd}")


# bigscience/T0_3B as DeepSpeed's estimator sees it (memory.csv model column): 2783M parameters,
# largest layer 65M.
T0_3B_PARAMS, T0_3B_LARGEST_LAYER = 2.783e9, 65e6


def deepspeed_estimator(row: dict[str, str]) -> MemoryRow:
    """Per-GPU model states of ZeRO-3 for T0_3B from the engine's memory items: mixed-precision
    Adam (2 + 4 + 12 bytes per parameter: the estimator's 18), offloads as the row states."""
    if "host" in row["memory_quantity"] or "CPU" in row["memory_quantity"]:
        return MemoryRow(row["row_id"], "estimator", _value(row), None,
                         "host memory is not modelled")
    published = float(row["value"]) * GiB  # DeepSpeed's "GB" is gpu_mem / 2**30
    n = _int(row["parallel_config"]) or 1
    off_p = "offload_param=cpu" in row["sharding_zero"]
    off_o = "offload_optimizer=cpu" in row["sharding_zero"]
    items = training_items(
        params=T0_3B_PARAMS, layer_params=T0_3B_LARGEST_LAYER, zero=3, zero_shards=n,
        weight_bytes=2.0, grad_bytes=4.0, master_bytes=4.0, state_bytes=8.0,
        offload_optimizer=off_o, offload_params=off_p, layer_acts=0.0, working=0.0,
        ends_acts=0.0, logits=0.0, world=n)
    states = ("weights", "gradients", "optimizer/master_weights", "optimizer/states",
              "zero3/gathered_params")
    pred = float(sum(float(items[k]) for k in states if k in items))
    return MemoryRow(row["row_id"], "estimator", published, pred,
                     f"ZeRO-3 on {n} GPU(s), offload params {off_p}, optimizer {off_o}")


def torchtitan_plan(row: dict[str, str], catalog: Catalog
                    ) -> tuple[object, object, Training, Mapping, Framework] | str:
    """(spec, cluster, workload, mapping, framework) of a torchtitan row, or why not."""
    key = next((k for k in MODELS if f" {k.upper()}" in row["model"].upper()), None)
    if key is None:
        return f"model {row['model']!r} is no Llama 3.1 preset"
    spec = catalog.models[MODELS[key]]
    cfg = row["parallel_config"]
    tp, pp, cp, dp = (_degree(cfg, a) for a in ("TP", "PP", "CP", "DP"))
    n = _int(row["num_devices"]) or tp * pp * cp * dp
    seq = _int(row["seq_len"].split()[-1] if row["seq_len"].split() else "") or 8192
    local = _int(row["micro_batch"])
    if local is None:
        return "local batch not stated"
    interleaved = "interleaved" in cfg.lower()
    # under pipelining the local batch splits into pp-degree micro-batches, interleaved or not:
    # these rows ran torchtitan 9dec370 (December 2024), before PR #781 made it pp x stages per
    # rank (validate.stacks.StageMicrobatches)
    micro = max(local // pp, 1) if pp > 1 else local
    rec = row["recompute"].lower()
    # torchtitan's "selective" is its op-level policy (saves every other matmul output, torchtitan
    # train_configs selective_ac_option = 'op'), not Korthikanti's selective recompute; the
    # engine's nearest policy is predicted and the row left out of the fit ('?' = the toml
    # default, selective)
    recompute = Recompute.FULL if "full" in rec else Recompute.SELECTIVE
    fp8 = "float8" in row["precision"].lower()
    notes = row["notes"].lower() + " " + row["parallel_config"].lower()
    fw = Framework.TORCH_COMPILE if ("compile" in notes or "asynctp" in notes
                                     or "+ torch.compile" in row["notes"].lower()
                                     or "compile" in row["precision"].lower()) else Framework.FSDP
    acc = "h200-sxm" if "H200" in row["accelerator"] else "h100-sxm5-80gb"
    cluster = parse_cluster(f"{max(n // 8, 1)}x{min(n, 8)}x{acc}", catalog)
    vpp = 2 if interleaved else 1
    # torchtitan splits a layer count the stages do not divide (Llama 3 405B's 126) unevenly;
    # Megatron's balanced first/last split is the same shape (mapping.plan.balanced_split)
    first, last = (int(x) or None for x in balanced_split(spec.n_layers, pp, vpp))
    m = Mapping(dp=dp, tp=tp, pp=pp, cp=cp, zero=ZeroStage.PARAMETERS, micro_batch=micro,
                virtual_stages=vpp, schedule=default_schedule(vpp), recompute=recompute,
                sequence_parallel=tp > 1, first_stage_layers=first, last_stage_layers=last)
    wl = Training(batch=local * dp, seq_len=seq, dtype=DType.FP8 if fp8 else DType.BF16,
                  grad_dtype=DType.FP32, recompute=recompute, loss=Loss.EAGER)
    return spec, cluster, wl, m, fw


def torchtitan_row(row: dict[str, str], catalog: Catalog) -> MemoryRow:
    plan = torchtitan_plan(row, catalog)
    if isinstance(plan, str):
        return MemoryRow(row["row_id"], "measured", _value(row), None, plan)
    spec, cluster, wl, m, fw = plan
    est = estimate(spec, cluster, wl, m, framework=fw)  # type: ignore[arg-type]
    if not isinstance(est, TrainStep) or est.violated_rule:
        return MemoryRow(row["row_id"], "measured", _value(row), None,
                         f"the engine rejects the mapping: {est.reason}")
    items = est.memory.items
    reserved = float(sum(v for k, v in items.items() if k not in NON_PYTORCH_ITEMS))
    frag = float(items.get("runtime/fragmentation", 0.0))
    dynamic = float(sum(v for k, v in items.items() if k.startswith(DYNAMIC_ITEMS)))
    modelled = m.recompute is Recompute.FULL
    note = f"{m.describe()} {wl.dtype.value} {fw.value}" + (
        "" if modelled else "; torchtitan's op-level selective AC is not modelled: not fitted")
    return MemoryRow(row["row_id"], "measured", _value(row), reserved, note, dynamic=dynamic,
                     reserve_free=reserve_free_bytes(reserved, frag), in_fit=modelled)


def reserve_free_bytes(reserved: float, frag: float) -> float:
    return reserved - frag


def predict_row(row: dict[str, str], catalog: Catalog) -> MemoryRow:
    kind = row["measurement_type"].lower()
    if kind.startswith("analytical"):
        return zero_table_1(row)
    if kind.startswith("estimator"):
        return deepspeed_estimator(row)
    if "torchtitan" in kind:
        return torchtitan_row(row, catalog)
    return MemoryRow(row["row_id"], "measured", None, None,
                     "largest model that trained: geometry and batch not stated")


def predict_all(path: Path = DEFAULT_CSV, catalog: Catalog | None = None) -> list[MemoryRow]:
    cat = catalog or load_catalog()
    return [predict_row(r, cat) for r in read_rows(path)]


def is_fit_row(row_id: str) -> bool:
    """The fixed split of the measured rows: even row numbers fit, odd ones are held out."""
    return int(row_id.lstrip("Y")) % 2 == 0


def fit_rows(rows: list[MemoryRow], held_out: bool = False) -> list[MemoryRow]:
    return [r for r in rows if r.in_fit and r.published is not None and r.predicted is not None
            and is_fit_row(r.row_id) != held_out]


def fit_allocator(rows: list[MemoryRow]) -> float:
    """Least squares through the origin of (measured reserved - predicted tensors) =
    f x dynamic over the fit rows: the caching allocator's reserve as a fraction f of the
    dynamic memory (``memory.allocator``: why no fixed part)."""
    fit = fit_rows(rows)
    y = np.array([r.published - r.reserve_free for r in fit])  # type: ignore[operator]
    x = np.array([r.dynamic for r in fit])
    return float(max((x @ y) / (x @ x), 0.0))


def summary(errors: list[float]) -> str:
    if not errors:
        return "n=0"
    e = np.abs(np.array(errors)) * 100
    return (f"n={len(e):3d}  median {np.median(e):5.1f} %  p90 {np.percentile(e, 90):5.1f} %  "
            f"max {e.max():5.1f} %  signed median {np.median(np.array(errors)) * 100:+5.1f} %")


def band(rows: list[MemoryRow]) -> float:
    """p90 of |relative error| on the held-out measured rows."""
    held = [abs(r.rel_error) for r in fit_rows(rows, held_out=True) if r.rel_error is not None]
    return float(np.percentile(held, 90)) if held else float("nan")


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    path = Path(args[0]) if args else DEFAULT_CSV
    rows = predict_all(path)
    unit = {"measured": GiB, "analytical": GB, "estimator": GiB}
    print(f"{'row':6} {'kind':10} {'published':>10} {'predicted':>10} {'error':>8}  note")
    for r in rows:
        u = unit[r.kind]
        pub = f"{r.published / u:10.2f}" if r.published is not None else f"{'-':>10}"
        pred = f"{r.predicted / u:10.2f}" if r.predicted is not None else f"{'-':>10}"
        err = f"{r.rel_error * 100:+7.1f}%" if r.rel_error is not None else f"{'':>8}"
        split = (" [fit]" if r in fit_rows(rows) else " [held out]"
                 if r in fit_rows(rows, held_out=True) else "")
        print(f"{r.row_id:6} {r.kind:10} {pub} {pred} {err}  {r.note}{split}")
    print("\nrelative error |predicted - published| / published (units: GiB measured and "
          "estimator rows, GB analytical)")
    for kind in ("measured", "analytical", "estimator"):
        errs = [r.rel_error for r in rows if r.kind == kind and r.rel_error is not None]
        print(f"  {kind:10} {summary(errs)}")
    fit, held = fit_rows(rows), fit_rows(rows, held_out=True)
    print(f"  measured, fit rows             {summary([r.rel_error or 0.0 for r in fit])}")
    print(f"  measured, held-out rows        {summary([r.rel_error or 0.0 for r in held])}")
    sac = [r.rel_error for r in rows
           if r.kind == "measured" and not r.in_fit and r.rel_error is not None]
    print(f"  measured, op-level SAC rows    {summary(sac)}")
    skipped = [r for r in rows if r.predicted is None]
    print(f"  skipped {len(skipped)}: " + "; ".join(sorted({r.note for r in skipped})))
    if "--fit" in argv:
        frac = fit_allocator(rows)
        print(f"\nallocator fit on {', '.join(r.row_id for r in fit)}: reserve = "
              f"{frac:.4f} x dynamic memory")
        print(f"error band (p90 |error| on the held-out measured rows): {band(rows):.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
