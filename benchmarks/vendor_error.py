"""Predicted vs published for the vendor and paper figures of every accelerator class
(data/vendor_figures.csv; sources and caveats in vendor_figures.md). These rows are a
check set: nothing is fitted on them.

A row is predicted when its accelerator and model are catalog entries and its metric is a
serving figure the estimate gives (tokens/s per user = 1 / TPOT, per-token latency = TPOT,
TTFT, total tokens/s at the stated batch; training MFU and tokens/s per chip through
``predict_training``). Each serving row is run through ``api.compare_accelerators``,
the same path as ``accelmap compare``: the part's execution model, its stated device count (or
the fewest devices that hold the model), the stated batch (1 when the row says per user) and
lengths (2,048 / 256 when not stated), and the stated precision mapped to a catalog dtype
(a row that states none ran at a precision that fits its devices: the widest of 16-bit,
8-bit and 4-bit weights that fits is used, and said in the row's note)
(16-bit -> bf16, fp16 -> fp16, 8-bit/fp8 -> fp8 or int8 where the part has no fp8, int4/Q4 ->
int4). A row's accelerator and model are read by ``resolve_accelerator`` and ``resolve_model``:
a catalog id, a name the catalog's own ids and aliases spell (parenthetical remarks dropped), a
Tenstorrent system as its Wormhole parts, an Apple chip by its GPU-core bin with the memory the
row names. Training MFU, ratios and rows with an unknown part or model are listed as skipped with
the reason. Rows marked in their notes as measured with speculative decoding are skipped; the
rows a class parameter was fitted on (fitters/fit_classes.py) are shown
as FITTED and left out of the statistics.

Run: python benchmarks/vendor_error.py [--rows]
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelmap import api
from accelmap.api import load_catalog
from accelmap.errors import AccelmapError
from accelmap.lookup import normalize

DATA = Path(__file__).resolve().parents[1] / "data" / "vendor_figures.csv"
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


def _stated(text: str) -> bool:
    """Whether the row names a precision ``_precision`` can read (else 16-bit is a guess)."""
    t = (text or "").lower()
    return any(k in t for k in ("int4", "q4", "w4", "8-bit", "fp8", "int8", "q8", "fp16",
                                "f16", "bf16", "16-bit", "fp32"))


def _precision(text: str, acc: api.Accelerator) -> str:
    t = (text or "").lower()
    if "int4" in t or "q4" in t or "w4" in t:
        return "int4"
    if "8-bit" in t or "fp8" in t or "int8" in t or "q8" in t:
        return "fp8" if api.DType.FP8 in acc.matrix else "int8"
    if "fp16" in t or t.strip() == "f16":
        return "fp16"
    return "bf16"


def _spelled(name: str, entries: dict[str, Any]) -> list[Any]:
    """Entries whose id, name or an alias is ``name`` once case and punctuation are dropped
    (the catalog lookup's exact tier; its loose word match is not used here)."""
    q = normalize(name)
    return [e for e in entries.values()
            if q and q in {normalize(x) for x in (e.id, e.name, *e.aliases)}]


def _bare(name: str) -> str:
    """The name without its parenthetical remarks: 'Jetson Orin Nano 8GB (original, ...)'."""
    return re.sub(r"\s*\([^)]*\)", "", name).strip()


def resolve_model(name: str, cat: api.Catalog) -> tuple[Any, str]:
    """(preset or None, how): a preset id; a row that names the preset it shares shapes with
    ('LLaMA 1 7B (llama-2-7b has identical shapes)', '... (same shapes as llama-3.1-70b)');
    else the one preset whose id, name or alias spells the name without its remarks."""
    if name in cat.models:
        return cat.models[name], ""
    m = (re.search(r"\(([\w.-]+) has identical shapes\)", name)
         or re.search(r"\(same shapes as ([\w.-]+)\)", name))
    if m and m.group(1) in cat.models:
        return cat.models[m.group(1)], f"{name!r} read as {m.group(1)} (the row's own note)"
    found = _spelled(_bare(name), dict(cat.models))
    if len(found) == 1:
        return found[0], f"{name!r} = preset {found[0].id}"
    return None, f"model {name!r} is not a preset"


# Tenstorrent's multi-chip Wormhole systems in the catalog's units. The wormhole-n300 entry is one
# n300 card of two Wormhole ASICs (its YAML: "two Wormhole ASICs ... figures per card"), and the
# QuietBox and T3000 are four n300 cards (8 chips, the entry's scale-up domain of 4). A Galaxy
# is 32 Wormhole chips on its own boards, all joined by Ethernet, not n300 cards: it is read as
# 32 of the one-chip part, wormhole-n150, whose scale-up domain (32) the catalog cites from
# the Galaxy. Per chip both parts have 12 GB of GDDR6 at 288 GB/s.
_TT_SYSTEMS = (("QuietBox", "wormhole-n300", 2), ("T3000", "wormhole-n300", 2),
               ("Galaxy", "wormhole-n150", 1))


def _tenstorrent_system(name: str, cat: api.Catalog) -> tuple[Any, int, str] | None:
    m = re.search(r"(\d+)\s+(?:Wormhole\s+)?chips", name)
    if "Tenstorrent" not in name or "Wormhole" not in name or not m:
        return None
    chips = int(m.group(1))
    for system, part, per_device in _TT_SYSTEMS:
        if system in name and part in cat.accelerators and chips % per_device == 0:
            n = chips // per_device
            return cat.accelerators[part], n, f"{name} = {n} x {part} ({chips} Wormhole chips)"
    return None


def _apple_bin(name: str, cat: api.Catalog) -> tuple[Any, str] | None:
    """'Apple M1 Max 24-core GPU 32GB', 'Apple M2 Max 30-core GPU (400 GB/s)': the Apple part of
    that chip with that many GPU cores; memory narrowed to the configuration the row names, and
    a stated bandwidth that the part does not have refuses the row."""
    m = re.match(r"Apple (M\d+(?: Pro| Max| Ultra)?) (\d+)-core GPU\b(.*)$", name)
    if not m:
        return None
    chip, cores, rest = m.group(1), int(m.group(2)), m.group(3)
    found = [a for a in cat.accelerators.values()
             if a.vendor == "Apple" and a.name.startswith(f"Apple {chip} (")
             and a.compute_units is not None and a.compute_units.count.value == cores]
    if len(found) != 1:
        return None
    acc, how = found[0], f"{name} = {found[0].id}"
    bw = re.search(r"(\d+)\s*GB/s", rest)
    stated_bw = float(bw.group(1)) * 1e9 if bw else None
    if stated_bw and acc.memory_bandwidth and abs(stated_bw / acc.memory_bandwidth - 1) > 0.05:
        return None
    gb = re.search(r"(\d+)\s*GB(?!/)", rest)
    if gb:
        want = float(gb.group(1)) * 1e9
        dev = acc.device_memory
        if want > dev.capacity.value * 1.001:
            return None
        if want < dev.capacity.value * 0.999:
            cap = type(dev.capacity).model_validate({
                "value": f"{gb.group(1)} GB", "source": list(dev.capacity.source),
                "note": "the configuration the published row names"})
            memory = tuple(lv.model_copy(update={"capacity": cap}) if lv is dev else lv
                           for lv in acc.memory)
            acc = acc.model_copy(update={"memory": memory})
            how += f" with {gb.group(1)} GB"
    return acc, how


def resolve_accelerator(name: str, cat: api.Catalog) -> tuple[Any, int | None, str]:
    """(part or None, devices the name implies or None, how): a catalog id; a Tenstorrent
    system as N Wormhole parts; an Apple chip by GPU-core bin; else the one part whose id, name
    or alias spells the name without its remarks."""
    if name in cat.accelerators:
        return cat.accelerators[name], None, ""
    if (tt := _tenstorrent_system(name, cat)) is not None:
        return tt
    if (apple := _apple_bin(name, cat)) is not None:
        return apple[0], None, apple[1]
    found = _spelled(_bare(name), dict(cat.accelerators))
    if len(found) == 1:
        return found[0], None, f"{name} = {found[0].id}"
    return None, None, f"accelerator {name!r} is not in the catalog"


TRAIN_METRICS = {"mfu", "tokens_per_s_per_chip", "tokens_per_s_total"}


def predict_training(row: dict[str, str], cat: api.Catalog) -> tuple[float | None, str]:
    """A published training run whose recipe is not transcribed (per-device batch, remat
    policy): MaxText's default layout, FSDP over every chip (``ici_fsdp_parallelism: -1``),
    tp = pp = 1, at the best of per-device batch 1, 2, 4, 8 and the lightest recompute that
    fits (none, selective, full): the tuned run a published table reports."""
    from accelmap.api import DType, Mapping, Training
    from accelmap.hardware.cluster import parse_cluster
    from accelmap.workload import Recompute

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
    acc, n_named, acc_how = resolve_accelerator(row["accelerator"], cat)
    if acc is None:
        return None, acc_how
    spec, model_how = resolve_model(row["model"], cat)
    if spec is None:
        return None, model_how
    if acc is not cat.accelerators.get(acc.id):  # a configuration of the part the row names
        cat = replace(cat, accelerators={**cat.accelerators, acc.id: acc})
    batch = _int(row["batch"]) or 1
    prompt = _int(row["input_len"]) or 2048
    output = _int(row["output_len"]) or 256
    devices = n_named if n_named is not None else _devices(row["devices"])
    stated = _precision(row["precision"], acc)
    # A row that does not state its precision ran at one that fits its devices: the widest
    # of 16-bit, 8-bit and 4-bit weights that does (said in the row's note), never narrower
    # than needed
    tries = [stated] if _stated(row["precision"]) else [
        "bf16", "fp8" if api.DType.FP8 in acc.matrix else "int8", "int4"]
    r: dict[str, object] = {}
    narrowed = False
    for i, precision in enumerate(tries):
        narrowed = i > 0
        try:
            cmp = api.compare_accelerators(
                spec.id, hw=acc.id, batch=batch, prompt=prompt, output=output,
                precision=precision, devices=devices, catalog=cat)
        except AccelmapError as e:
            return None, f"not predicted: {e}"
        r = cmp.rows[0].to_dict()
        if r["feasible"] or "memory" not in str(r["reason"]):
            break
    if not r["feasible"]:
        return None, f"infeasible: {r['reason']}"
    if narrowed:
        acc_how = "; ".join(h for h in (acc_how, f"precision not stated: {r['precision']}, "
                                                 "the widest that fits") if h)
    value = {"tokens_per_s_per_user": r["tokens_per_s_per_user"],
             "latency_per_token_s": r["tpot_s"], "ttft_s": r["ttft_s"],
             "tokens_per_s_total": r["tokens_per_s"]}[row["metric"]]
    names = "; ".join(h for h in (acc_how, model_how) if h)
    return value, f"{r['devices']} x {acc.id} {r['mapping']} {r['precision']} " \
                  f"({r['execution_model']})" + (f" [{names}]" if names else "")


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
            acc = resolve_accelerator(row["accelerator"], cat)[0]
            spec = resolve_model(row["model"], cat)[0]
            print(f"{row['row_id']} {row['class']:12s} {acc.id if acc else row['accelerator']:14s} "
                  f"{spec.id if spec else row['model']:14s} {row['metric']:22s} published "
                  f"{pub:>9.4g} predicted "
                  f"{value:>9.4g} {err:+7.0f} %  {how}")
    print("\nclass            n   median |err|   within 25 %   signed median")
    for k, v in sorted(errors.items()):
        a = [abs(x) for x in v]
        print(f"{k:14s} {len(v):3d} {statistics.median(a):10.0f} % "
              f"{sum(x <= 25 for x in a):8d}/{len(a):<3d} {statistics.median(v):+10.0f} %")
    print("skipped:", ", ".join(f"{n} {k}" for k, n in sorted(skipped.items())))


if __name__ == "__main__":
    main()
