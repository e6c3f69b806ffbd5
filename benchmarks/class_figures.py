"""Predicted vs published figures for the non-GPU execution models (cost/execution.py):
Cerebras and Groq tokens/s per user, PaLM's TPU v4 MFU. Prints a table; asserts nothing.

    PYTHONPATH=src python3 benchmarks/class_figures.py
"""

from __future__ import annotations

import csv
from pathlib import Path

from accelmap.api import DType, Inference, Mapping, Training, estimate, load_catalog
from accelmap.errors import InputError
from accelmap.hardware.cluster import parse_cluster
from accelmap.workload import Recompute

DATA = Path(__file__).resolve().parents[1] / "data" / "class_figures.csv"


def predict(row: dict[str, str]) -> tuple[float | None, str]:
    cat = load_catalog()
    model = cat.models[row["model"]]
    system = parse_cluster(row["system"], cat)
    if row["kind"] == "serve":
        wl = Inference(batch=int(row["batch"]), prompt_len=int(row["prompt"]),
                       output_len=int(row["output"]), weight_dtype=DType(row["weights"]))
        e = estimate(model, system, wl)
        if not e.feasible:
            return None, e.reason or "infeasible"
        return 1.0 / e.metrics["tpot_s"], "1 / TPOT"
    # PaLM: weights and optimizer state sharded over the data axis, rematerialization
    # (Chowdhery et al. 2022 sec. 4 and 5)
    wl = Training(batch=int(row["global_batch"]), seq_len=int(row["seq"]),
                  recompute=Recompute.FULL)
    m = Mapping.for_world(system.devices, tp=int(row["tp"]), pp=int(row["pp"]), zero=3,
                          recompute=Recompute.FULL)
    e = estimate(model, system, wl, m)
    return (e.metrics["mfu"], "MFU") if e.feasible else (None, e.reason or "infeasible")


def main() -> None:
    print(f"{'id':4} {'model':15} {'system':18} {'metric':22} {'published':>10} "
          f"{'predicted':>10} {'error':>8}")
    for row in csv.DictReader(DATA.open()):
        try:
            value, how = predict(row)
        except (InputError, TypeError, KeyError) as exc:
            value, how = None, f"not predicted: {exc}"
        pub = float(row["published"])
        err = f"{(value / pub - 1) * 100:+.0f}%" if value else "-"
        shown = f"{value:.4g}" if value else how[:60]
        print(f"{row['id']:4} {row['model']:15} {row['system']:18} {row['metric']:22} "
              f"{pub:>10g} {shown:>10} {err:>8}")


if __name__ == "__main__":
    main()
