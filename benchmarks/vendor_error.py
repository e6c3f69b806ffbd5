"""Predicted vs published for the vendor and paper figures of every accelerator class
(benchmarks/data/vendor_figures.csv; sources and caveats in vendor_figures.md). These rows are a
check set: nothing is fitted on them.

A row is predicted when its accelerator and model are catalog entries and its metric is a
serving figure the estimate gives (tokens/s per user = 1 / TPOT, per-token latency = TPOT,
TTFT, total tokens/s at the stated batch; training MFU and tokens/s per chip through
``predict_training``). Each serving row is run through ``api.compare_accelerators``,
the same path as ``accelmap compare``: the part's execution model, its stated device count (or
the fewest devices that hold the model), the stated batch (1 when the row says per user) and
lengths (2,048 / 256 when not stated), and the stated precision mapped to a catalog dtype
(16-bit -> bf16, fp16 -> fp16, 8-bit/fp8 -> fp8 or int8 where the part has no fp8, int4/Q4 ->
int4). Training MFU, ratios and rows with an unknown part or model are listed as skipped with
the reason. Rows marked in their notes as measured with speculative decoding are skipped; the
rows a class parameter was fitted on (benchmarks/fit_classes.py) are shown
as FITTED and left out of the statistics.

Run: python benchmarks/vendor_error.py [--rows]
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from pathlib import Path

from accelmap import api
from accelmap.catalog import load_catalog
from accelmap.errors import AccelmapError

DATA = Path(__file__).resolve().parent / "data" / "vendor_figures.csv"
METRICS = {"tokens_per_s_per_user", "latency_per_token_s", "ttft_s", "tokens_per_s_total"}


def _int(text: str) -> int | None:
    m = re.match(r"\s*(\d+)", text or "")
    return int(m.group(1)) if m else None


def _devices(text: str) -> int | None:
    """'2', '576 chips ...', '1 n300 (2 Wormhole chips)' (the leading count, in the catalog's
    unit), 'inf2.48xlarge (12 Inferentia2 chips = ...)' (the chips named inside)."""
    if (lead := _int(text)) is not None:
        return lead
    m = re.search(r"\b(\d+)\s+(?:[A-Za-z0-9-]+\s+){0,2}(?:chips|HPU|cards|RDUs)\b", text or "")
    return int(m.group(1)) if m else None


def _precision(text: str, acc: api.Accelerator) -> str:
    t = (text or "").lower()
    if "int4" in t or "q4" in t or "w4" in t:
        return "int4"
    if "8-bit" in t or "fp8" in t or "int8" in t or "q8" in t:
        return "fp8" if api.DType.FP8 in acc.matrix else "int8"
    if "fp16" in t or t.strip() == "f16":
        return "fp16"
    return "bf16"


TRAIN_METRICS = {"mfu", "tokens_per_s_per_chip", "tokens_per_s_total"}


def predict_training(row: dict[str, str], cat: api.Catalog) -> tuple[float | None, str]:
    """A published training run whose recipe is not transcribed (per-device batch, remat
    policy): MaxText's default layout, FSDP over every chip (``ici_fsdp_parallelism: -1``),
    tp = pp = 1, at the best of per-device batch 1, 2, 4, 8 and the lightest recompute that
    fits (none, selective, full): the tuned run a published table reports."""
    from accelmap.hardware.cluster import parse_cluster
    from accelmap.mapping.plan import Mapping
    from accelmap.units import DType
    from accelmap.workload import Recompute, Training

    dtype = DType.FP8 if "fp8" in row["precision"].lower() else DType.BF16
    n, seq = _devices(row["devices"]), _int(row["input_len"])
    if n is None or seq is None:
        return None, "device count or sequence length not stated"
    try:
        system = parse_cluster(f"{n}x{row['accelerator']}", cat)
    except AccelmapError as e:
        return None, f"not predicted: {e}"
    spec = cat.models[row["model"]]
    best: tuple[float, str] | None = None
    for pdb in (1, 2, 4, 8):
        for rc in (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL):
            wl = Training(batch=n * pdb, seq_len=seq, recompute=rc, dtype=dtype)
            m = Mapping.for_world(n, zero=3, micro_batch=pdb, recompute=rc)
            e = api.estimate(spec, system, wl, m)
            if e.feasible:
                v = {"mfu": float(e.metrics["mfu"]),
                     "tokens_per_s_per_chip": float(e.metrics["tokens_per_s"]) / n,
                     "tokens_per_s_total": float(e.metrics["tokens_per_s"])}[row["metric"]]
                if best is None or v > best[0]:
                    best = (v, f"{n} x {row['accelerator']} fsdp={n} per-device batch {pdb} "
                               f"recompute {rc.value} ({e.calibration})")
                break  # the lightest recompute that fits at this batch
    if best is None:
        return None, "infeasible: no FSDP layout fits"
    return best


def predict(row: dict[str, str], cat: api.Catalog) -> tuple[float | None, str]:
    if row["phase"] == "training" and row["metric"] in TRAIN_METRICS:
        if row["accelerator"] not in cat.accelerators or row["model"] not in cat.models:
            return None, "accelerator or model is not in the catalog"
        return predict_training(row, cat)
    if not row["phase"].startswith("inference"):
        return None, f"phase {row['phase']} metric {row['metric']} is not predicted here"
    if row["metric"] not in METRICS:
        return None, f"metric {row['metric']} is not a serving figure the estimate gives"
    if "speculative" in (row["notes"] + row["verification"]).lower():
        return None, "measured with speculative decoding"
    if row["accelerator"] not in cat.accelerators:
        return None, f"accelerator {row['accelerator']!r} is not in the catalog"
    if row["model"] not in cat.models:
        return None, f"model {row['model']!r} is not a preset"
    acc = cat.accelerators[row["accelerator"]]
    batch = _int(row["batch"]) or 1
    prompt = _int(row["input_len"]) or 2048
    output = _int(row["output_len"]) or 256
    try:
        cmp = api.compare_accelerators(
            row["model"], hw=acc.id, batch=batch, prompt=prompt, output=output,
            precision=_precision(row["precision"], acc), devices=_devices(row["devices"]),
            catalog=cat)
    except AccelmapError as e:
        return None, f"not predicted: {e}"
    r = cmp.rows[0]
    if not r["feasible"]:
        return None, f"infeasible: {r['reason']}"
    value = {"tokens_per_s_per_user": r["tokens_per_s_per_user"],
             "latency_per_token_s": r["tpot_s"], "ttft_s": r["ttft_s"],
             "tokens_per_s_total": r["tokens_per_s"]}[row["metric"]]
    return value, f"{r['devices']} x {acc.id} {r['mapping']} {r['precision']} " \
                  f"({r['execution_model']})"


def fitted_rows() -> set[str]:
    """Rows a parameter was fitted on (cost/data/class_calibration.yaml): shown, not
    scored."""
    import yaml

    path = Path(__file__).resolve().parents[1] / "src/accelmap/cost/data/" \
        "class_calibration.yaml"
    table = yaml.safe_load(path.read_text()) or {} if path.exists() else {}
    return {str(v.get("fitted_on")) for part in table.values() for v in (part or {}).values()}


def main() -> None:
    cat = load_catalog()
    fitted = fitted_rows()
    mfu_runs = {(r["source_key"], r["accelerator"], r["model"], r["devices"])
                for r in csv.DictReader(DATA.open()) if r["metric"] == "mfu"}
    show = "--rows" in sys.argv
    errors: dict[str, list[float]] = {}
    skipped: dict[str, int] = {}
    for row in csv.DictReader(DATA.open()):
        value, how = predict(row, cat)
        pub = float(row["value"])
        if value is None:
            skipped[how.split(":")[0]] = skipped.get(how.split(":")[0], 0) + 1
            if show:
                print(f"{row['row_id']} skipped: {how}")
            continue
        lower_better = row["metric"] in ("latency_per_token_s", "ttft_s")
        # signed: + = optimistic (faster than published)
        err = (pub / value - 1) * 100 if lower_better else (value / pub - 1) * 100
        if row["row_id"] in fitted:
            how = f"FITTED (not scored); {how}"
        elif row["metric"] == "tokens_per_s_per_chip" and (
                row["source_key"], row["accelerator"], row["model"], row["devices"]) in mfu_runs:
            how = f"same run as its MFU row (not scored twice); {how}"
        else:
            errors.setdefault(row["class"], []).append(err)
            errors.setdefault("all", []).append(err)
        if show:
            print(f"{row['row_id']} {row['class']:12s} {row['accelerator']:14s} "
                  f"{row['model']:14s} {row['metric']:22s} published {pub:>9.4g} predicted "
                  f"{value:>9.4g} {err:+7.0f} %  {how}")
    print("\nclass            n   median |err|   within 25 %   signed median")
    for k, v in sorted(errors.items()):
        a = [abs(x) for x in v]
        print(f"{k:14s} {len(v):3d} {statistics.median(a):10.0f} % "
              f"{sum(x <= 25 for x in a):8d}/{len(a):<3d} {statistics.median(v):+10.0f} %")
    print("skipped:", ", ".join(f"{n} {k}" for k, n in sorted(skipped.items())))


if __name__ == "__main__":
    main()
