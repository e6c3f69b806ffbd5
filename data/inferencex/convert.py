"""Convert SemiAnalysis InferenceX (formerly InferenceMAX) benchmark rows into the run format.

Source: the InferenceX dashboard's benchmark API, as its app repository keeps a snapshot of it
for its end-to-end tests: ``packages/app/cypress/fixtures/api/benchmarks.json`` in
``SemiAnalysisAI/InferenceX-app``. The snapshot this project converted is the one at commit
``528c4146b8f502fcbce8df7870a935a970cbae25`` (2026-06-14, "chore(e2e): refresh Cypress
fixtures so MiniMax M3 appears in dropdown (#458)"), read from the fork
``vngcloud/InferenceX-app`` (the upstream mirror reachable here stops on 2026-03-18). The
2.3 MB snapshot at upstream commit ``3a600f1d9ce155536d52e2f58f744f27a301aac9`` has the same
row layout and converts with this script unchanged.

Each fixture row is one point of a concurrency sweep: ``vllm bench serve``-style closed loop
with ``conc`` clients (InferenceX ``utils/bench_serving/benchmark_serving.py``), random prompts
of ``isl``/``osl`` tokens drawn uniformly from ``[int(0.8 L), L]`` (``--random-range-ratio
0.8``, the default of InferenceX's ``.github/workflows/benchmark-tmpl.yml``; the sampler is
``sample_uniform`` in ``benchmark_serving.py``) and ``10 x conc`` prompts (``--num-prompts
$((CONC * 10))`` in every ``benchmarks/single_node/fixed_seq_len/*.sh``). Facts read from the
InferenceX repository are cited at commit ``843c6254ff69b567f772f6a5fd97675af3d04431``
(2026-08-21): they are today's scripts, not necessarily those of each run's date.

Subset rule (fixed before any row was scored): for each configuration (hardware, framework,
model, precision, spec_method, disagg, the prefill and decode tp/ep/dp-attention/workers/GPUs,
isl, osl) keep only the rows of its newest ``date``, every concurrency of that date; where one
concurrency has several rows on that date, the one of the highest GitHub Actions run id.
Each kept row gives three run records: output tokens/s per GPU (``output_tput_per_gpu``; for
disaggregated rows and rows without it, total tokens/s per GPU from ``tput_per_gpu``),
tokens/s per user (1 / median TPOT) and median TTFT.

    python3 data/inferencex/convert.py FIXTURE.json [-o data/inferencex_published.yaml]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

SOURCE = ("the SemiAnalysis InferenceX dashboard API snapshot,\n# SemiAnalysisAI/InferenceX-app "
          "packages/app/cypress/fixtures/api/benchmarks.json")
FIXTURE_COMMIT = "528c4146b8f502fcbce8df7870a935a970cbae25"
INFERENCEX_COMMIT = "843c6254ff69b567f772f6a5fd97675af3d04431"
RANGE_RATIO = 0.8  # --random-range-ratio (benchmark-tmpl.yml default)
PROMPTS_PER_CLIENT = 10  # --num-prompts $((CONC * 10))

# InferenceX hardware ids -> catalog ids. The dashboard's h100/h200 runners are SXM parts
# (configs/runners.yaml: CoreWeave "h100-cw" and DGX Cloud "h100-dgxc" pools; DGX H100 is
# the SXM5 80 GB part). Ids not here (e.g. rtx6000pro) have no catalog part: not written.
HARDWARE = {"b200": "b200", "b300": "b300", "gb200": "gb200", "gb300": "gb300",
            "h100": "h100-sxm5-80gb", "h200": "h200-sxm", "mi300x": "mi300x",
            "mi325x": "mi325x", "mi355x": "mi355x"}
AMD = ("mi300x", "mi325x", "mi355x")

# InferenceX model prefixes -> catalog presets. llama70b is Llama 3.3 70B Instruct, the
# llama-3.1-70b geometry. Without a preset (not written): dsv4 (DeepSeek-V4-Pro), qwen3.5
# (Qwen3.5-397B-A17B), kimik2.5, glm5/glm5.1, minimaxm2.5/minimaxm3.
MODELS = {"dsr1": "deepseek-r1", "gptoss": "gpt-oss-120b", "gptoss120b": "gpt-oss-120b",
          "llama70b": "llama-3.1-70b"}

# Framework ids -> (framework word, Dynamo engine or None). mori-sglang is SGLang's PD
# disaggregation with AMD's MoRI transfer (benchmarks/multi_node/dsr1_fp4_mi355x_sglang-disagg.sh).
FRAMEWORKS = {"sglang": ("sglang", None), "trt": ("tensorrt-llm", None),
              "vllm": ("vllm", None), "atom": ("atom", None),
              "mori-sglang": ("sglang", None), "sglang-disagg": ("sglang", None),
              "dynamo-trt": ("dynamo", "tensorrt-llm"),
              "dynamo-sglang": ("dynamo", "sglang"), "dynamo-vllm": ("dynamo", "vllm")}


def precision_fields(model: str, precision: str, amd: bool) -> dict[str, str] | None:
    """The run format's precision words for an InferenceX (model, precision) on a vendor.

    DeepSeek-R1 FP4 on NVIDIA is nvidia/DeepSeek-R1-0528-FP4-V2 (configs/nvidia-master.yaml,
    dsr1-fp4-*-sglang/-trt; ModelOpt NVFP4 routed experts and attention wo, the rest FP8);
    on AMD amd/DeepSeek-R1-0528-MXFP4-Preview (configs/amd-master.yaml; its Hugging Face card:
    Quark w_mxfp4_a_mxfp4 on every linear layer except ``*self_attn*``, ``*mlp.gate.*`` and
    ``lm_head``, which stay BF16). FP8 is deepseek-ai/DeepSeek-R1-0528 (block FP8).
    gpt-oss-120b is openai/gpt-oss-120b on every part: MXFP4 routed experts, BF16 elsewhere
    (its model card). Other FP4 rows: ``fp4`` = the part's own 4-bit format.
    """
    if model == "deepseek-r1" and precision == "fp4":
        return ({"precision": "bf16", "moe_precision": "mxfp4"} if amd
                else {"precision": "fp8", "moe_precision": "nvfp4"})
    if model == "gpt-oss-120b" and precision == "fp4":
        return {"precision": "bf16", "moe_precision": "mxfp4"}
    if precision in ("fp4", "fp8", "bf16", "fp16"):
        return {"precision": precision}
    return None


def kv_fp8(model: str, framework: str, hardware: str, disagg: bool) -> bool:
    """FP8 KV cache where InferenceX's single-node DeepSeek-R1 scripts set it:
    ``--kv-cache-dtype fp8_e4m3`` (SGLang, every dsr1 script but dsr1_fp8_h200*.sh),
    ``kv_cache_config: dtype: fp8`` (TensorRT-LLM) and ``--kv_cache_dtype fp8`` (ATOM)."""
    if model != "deepseek-r1" or disagg:
        return False
    return not (framework == "sglang" and hardware == "h200")


def mtp_tokens(framework: str, amd: bool, dp_attention: bool) -> int | None:
    """Draft tokens per step of an MTP row, where InferenceX's scripts state them:
    SGLang on NVIDIA ``SPECULATIVE_NUM_STEPS=2`` (dsr1_fp*_b200_mtp.sh, h200, b300), on AMD
    ``--speculative-num-steps 3`` (dsr1_fp*_mi3*_mtp.sh); TensorRT-LLM
    ``num_nextn_predict_layers`` 3, 1 with attention DP (dsr1_fp*_trt_mtp.sh). ATOM's scripts
    (``--method mtp``) and the disaggregated recipes are not read: None (row not written)."""
    if framework == "sglang":
        return 3 if amd else 2
    if framework == "trt":
        return 1 if dp_attention else 3
    return None


def recv_interval(r: dict[str, Any]) -> int | None:
    """SGLang's ``--scheduler-recv-interval`` where InferenceX's scripts set it: the single-node
    DeepSeek-R1 scripts on B200 and B300 (dsr1_fp4/fp8_b200/b300[_mtp].sh: "if [[ $CONC -ge 16 ]];
    then SCHEDULER_RECV_INTERVAL=30 else 10"), in every version of them on the dates of the
    fixture's rows (B200 since #35/#42, 2025-09-21/23; B300 since their first scripts,
    2026-04-17); with DP attention the script of 2026-06-23 sets 1, the default. The H200 and
    AMD DeepSeek-R1 scripts and the disaggregated recipes set none: None (SGLang's 1)."""
    if r["framework"] != "sglang" or r["disagg"] or r["model"] != "dsr1" \
            or r["hardware"] not in ("b200", "b300") or r["decode_dp_attention"]:
        return None
    return 30 if r["conc"] >= 16 else 10


ADP_BALANCE_ITERS = 60  # attention_dp_config timeout_iters of InferenceX's TensorRT-LLM scripts


def adp_balance(r: dict[str, Any]) -> int | None:
    """TensorRT-LLM's attention-DP balance where InferenceX's scripts set it: every single-node
    DeepSeek-R1 TensorRT-LLM script (dsr1_fp4/fp8_b200_trt[_mtp].sh, dsr1_fp8_h200_trt[_mtp].sh,
    and before 2026-01-05 benchmarks/dsr1_fp*_trt_slurm.sh) appends ``attention_dp_config:
    {batching_wait_iters: 0, enable_balance: true, timeout_iters: 60}`` when DP_ATTENTION is
    true. The Dynamo recipes set none: None (TensorRT-LLM's default, off)."""
    if r["framework"] != "trt" or r["disagg"] or r["model"] != "dsr1" \
            or not r["decode_dp_attention"]:
        return None
    return ADP_BALANCE_ITERS


_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?(?:(?:\.?post|rc)\d+)*)")


def version(image: str | None, framework: str) -> str:
    """The framework's release from the container tag (``lmsysorg/sglang:v0.5.12-cu130`` ->
    0.5.12, ``tensorrt-llm/release:1.3.0rc14``, ``ai-dynamo/tensorrtllm-runtime:0.8.1.post2``,
    ``rocm/atom:...atom0.1.3``; a dated ATOM nightly ``atom20260511`` -> 20260511)."""
    if not image:
        return ""
    tag = image.rsplit(":", 1)[-1]
    if framework == "atom":
        m = re.search(r"atom(\d+\.\d+\.\d+|\d{8})", tag)
        return m.group(1) if m else ""
    m = _VERSION.search(tag.split("rocm")[0] if "sgl-dev" not in image else tag)
    return m.group(1) if m else ""


# Containers of the rows whose fixture entry names no image (``image: null``), read from
# InferenceX's ``.github/configs/nvidia-master.yaml`` at the last commit on or before the row's
# date, where the entry held that image for days on either side of it (so the run cannot have
# used another): keyed (hardware, framework, precision, date). TensorRT-LLM 1.1.0rc2.post2 is
# the ``dsr1-fp8-h200-trt`` / ``dsr1-fp4-b200-trt`` image from commit 534d98c2b (2025-10-30)
# through 25506e87c (2025-12-05); SGLang v0.5.3rc1-cu129-b200 the ``dsr1-fp4-b200-sglang`` one
# at 534d98c2b until #204 (d8fe8f73e, 2025-11-10) moved it to v0.5.5-cu129-amd64, which
# ``dsr1-fp8-b200-sglang`` keeps through 25506e87c. Rows of 2025-11-10 (the day of that change)
# and the image-less Dynamo and ROCm rows stay unversioned. The version matters for
# TensorRT-LLM (1.0 and later run the PyTorch executor behind trtllm-serve: the
# ``tensorrt-llm-1`` profile, cost/framework.py ``release_stack``); for the others it is
# information only.
IMAGE_ON_DATE = {
    ("h200", "trt", "fp8", "2025-11-02"): "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2",
    ("b200", "trt", "fp4", "2025-11-02"): "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc2.post2",
    ("b200", "sglang", "fp4", "2025-11-02"): "lmsysorg/sglang:v0.5.3rc1-cu129-b200",
    ("b200", "sglang", "fp8", "2025-11-18"): "lmsysorg/sglang:v0.5.5-cu129-amd64",
}


def image_of(r: dict[str, Any]) -> str:
    """The row's container image: the fixture's, else the dated one of ``IMAGE_ON_DATE``."""
    key = (r["hardware"], r["framework"], r["precision"], r["date"])
    return r.get("image") or IMAGE_ON_DATE.get(key, "")


def config_key(r: dict[str, Any]) -> tuple[Any, ...]:
    keys = ("hardware", "framework", "model", "precision", "spec_method", "disagg",
            "prefill_tp", "prefill_ep", "prefill_dp_attention", "prefill_num_workers",
            "decode_tp", "decode_ep", "decode_dp_attention", "decode_num_workers",
            "num_prefill_gpu", "num_decode_gpu", "isl", "osl")
    return tuple(r.get(k) for k in keys)


def run_id(r: dict[str, Any]) -> int:
    m = re.search(r"/runs/(\d+)", r.get("run_url") or "")
    return int(m.group(1)) if m else 0


def select(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The subset rule: newest date per configuration, every concurrency of it, the highest
    run id where one concurrency repeats."""
    rows = list(rows)
    newest: dict[tuple[Any, ...], str] = {}
    for r in rows:
        k = config_key(r)
        newest[k] = max(newest.get(k, ""), r["date"])
    best: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        k = config_key(r)
        if r["date"] != newest[k]:
            continue
        kc = (*k, r["conc"])
        if kc not in best or run_id(r) > run_id(best[kc]):
            best[kc] = r
    return sorted(best.values(), key=lambda r: (*map(str, config_key(r)), r["conc"]))


def lengths(nominal: int) -> tuple[int, float]:
    """Mean and +-spread (fraction of the mean) of lengths uniform on [int(0.8 L), L]."""
    lo = int(nominal * RANGE_RATIO)
    mean = (lo + nominal) / 2
    return round(mean), round((nominal - lo) / 2 / mean, 4)


def layout(r: dict[str, Any]) -> dict[str, Any]:
    """Devices and parallel layout. Aggregated rows: the engine's tp is its GPU count (the
    fixture's num_*_gpu there is tp x ep, not GPUs: per-GPU throughput divides by tp).
    Disaggregated rows: each pool's devices, tp, ep and DP attention as the fixture states
    them (a recipe may run DP attention in one pool only)."""
    if not r["disagg"]:
        out: dict[str, Any] = {"devices": r["decode_tp"], "tp": r["decode_tp"]}
        if r["decode_ep"] > 1:
            out["ep"] = r["decode_ep"]
        out["dp_attention"] = bool(r["decode_dp_attention"])
        return out
    return {"devices": r["num_prefill_gpu"] + r["num_decode_gpu"],
            "disaggregated": True,
            "prefill_devices": r["num_prefill_gpu"], "decode_devices": r["num_decode_gpu"],
            "prefill_tp": r["prefill_tp"], "decode_tp": r["decode_tp"],
            "prefill_ep": r["prefill_ep"], "decode_ep": r["decode_ep"],
            "prefill_dp_attention": bool(r["prefill_dp_attention"]),
            "decode_dp_attention": bool(r["decode_dp_attention"])}


def unstated_pools(r: dict[str, Any]) -> bool:
    """A disaggregated row whose pools the dashboard does not describe: no worker count in
    either pool and each pool's tp equal to its GPU count (20, 28, 36, 48, 72 GPUs of GB200
    NVL72 racks: no such tensor-parallel group splits DeepSeek-R1's 128 heads), which is the
    dashboard's default when the recipe's launch script holds the layout."""
    return bool(r["disagg"]) and not r.get("prefill_num_workers") \
        and not r.get("decode_num_workers") and r["prefill_tp"] == r["num_prefill_gpu"] \
        and r["decode_tp"] == r["num_decode_gpu"]


def base_record(r: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The configuration's fields, or None and why the row is not written."""
    hw, amd = HARDWARE.get(r["hardware"]), r["hardware"] in AMD
    model = MODELS.get(r["model"])
    fw = FRAMEWORKS.get(r["framework"])
    if hw is None:
        return None, f"hardware {r['hardware']!r} has no catalog part"
    if model is None:
        return None, f"model {r['model']!r} has no catalog preset"
    if fw is None:
        return None, f"framework {r['framework']!r} is not a run-format framework"
    prec = precision_fields(model, r["precision"], amd)
    if prec is None:
        return None, f"precision {r['precision']!r} has no run-format word"
    if unstated_pools(r):
        return None, ("pool layout not stated: each pool's tp is its GPU count and no worker "
                      "count is given (InferenceX's GB200 Dynamo recipes set tp, ep and DP "
                      "attention in their launch scripts; .github/configs/nvidia-master.yaml: "
                      "'tp, ep, and dp-attn do nothing because they are hardcoded')")
    rec: dict[str, Any] = {"accelerator": hw, "model": model, **layout(r)}
    image = image_of(r)
    # a Dynamo row's version is Dynamo's only when its container is Dynamo's (ai-dynamo/...);
    # dynamo-sglang rows run in SGLang's container: no Dynamo version is stated
    ver = version(image, fw[0]) if fw[1] is None or "ai-dynamo" in image else ""
    rec["framework"] = f"{fw[0]} {ver}".strip()
    if fw[1]:
        rec["engine"] = fw[1]
    rec["year"] = int(r["date"][:4])
    if (iters := adp_balance(r)) is not None:
        rec["attention_dp_balance"] = iters
    rec.update(prec)
    if kv_fp8(model, r["framework"], r["hardware"], r["disagg"]):
        rec["kv_precision"] = "fp8"
    if r["spec_method"] not in ("none", None, ""):
        if r["spec_method"] != "mtp":
            return None, f"spec_method {r['spec_method']!r} has no run-format field"
        n = None if r["disagg"] else mtp_tokens(r["framework"], amd,
                                               bool(r["decode_dp_attention"]))
        if n is None:
            return None, "MTP draft tokens per step not stated (ATOM, disaggregated recipes)"
        rec["mtp"] = n
    rec["scenario"] = "concurrency"
    (rec["input_len"], spread), (rec["output_len"], _) = lengths(r["isl"]), lengths(r["osl"])
    rec["length_dist"] = "uniform"
    rec["length_spread"] = spread
    return rec, ""


def metrics(r: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(short name, run-format metric, value) of one fixture row."""
    m = r["metrics"]
    out: list[tuple[str, str, float]] = []
    if not r["disagg"] and m.get("output_tput_per_gpu"):
        out.append(("out", "output_tokens_per_s_per_device", m["output_tput_per_gpu"]))
    elif m.get("tput_per_gpu"):
        out.append(("tot", "total_tokens_per_s_per_device", m["tput_per_gpu"]))
    if m.get("median_tpot"):
        out.append(("user", "tokens_per_s_per_user", 1.0 / m["median_tpot"]))
    if m.get("median_ttft"):
        out.append(("ttft", "ttft_p50_ms", 1000.0 * m["median_ttft"]))
    return out


def slug(r: dict[str, Any]) -> str:
    lay = (f"p{r['num_prefill_gpu']}d{r['num_decode_gpu']}" if r["disagg"]
           else f"tp{r['decode_tp']}ep{r['decode_ep']}")
    dpa = "-dpa" if r["decode_dp_attention"] or r["prefill_dp_attention"] else ""
    spec = "-mtp" if r["spec_method"] == "mtp" else ""
    return (f"ix-{r['model']}-{r['hardware']}-{r['precision']}-{r['framework']}-{lay}{dpa}"
            f"{spec}-{r['isl'] // 1024}k{r['osl'] // 1024}k")


Record = dict[str, Any]


def convert(rows: Sequence[Record]) -> tuple[list[tuple[Record, list[Record]]], Counter[str]]:
    """(configuration record, its point records) per configuration, and the not-written
    reasons with their counts (fixture rows)."""
    groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    dropped: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for r in select(rows):
        base, why = base_record(r)
        if base is None:
            dropped[why] += 1
            continue
        name = slug(r)
        if name not in groups:
            groups[name] = (base, [])
        for short, metric, value in metrics(r):
            rid = f"{name}-c{r['conc']}-{short}"
            seen[rid] += 1
            if seen[rid] > 1:
                rid += f"-{seen[rid]}"
            point = {"id": rid, "source": r["run_url"], "concurrency": r["conc"],
                     "requests": PROMPTS_PER_CLIENT * r["conc"]}
            if (interval := recv_interval(r)) is not None:
                point["scheduler_recv_interval"] = interval
            groups[name][1].append({**point, "metric": metric, "value": round(value, 4)})
    return list(groups.values()), dropped


HEADER = """\
# SemiAnalysis InferenceX (formerly InferenceMAX) concurrency sweeps, in the run format of
# docs/validate-format.md (serving runs, scenario: concurrency). Report only, but for SGLang's
# and ATOM's host figures (fitters/fit_sglang_profile.py, fit_atom_profile.py: one
# configuration in four by a fixed hash; the rest held out). Written by
# data/inferencex/convert.py (read its docstring for every rule and citation) from {source}
# at commit {commit}.
# Print the error with
#   PYTHONPATH=src python3 benchmarks/inferencex_error.py
#
# Subset rule (fixed before scoring): per configuration the newest date only, every
# concurrency of it; three records per point (output or total tokens/s per GPU, tokens/s per
# user = 1 / median TPOT, median TTFT). Every record's source is the run's GitHub Actions URL.
# Lengths: uniform on [0.8 L, L] (--random-range-ratio 0.8): input_len/output_len are the
# means, length_spread the half-width over the mean. 10 prompts per client.
# Fixture rows kept: {kept}; configurations: {configs}; records: {records}.
# Fixture rows not written, by reason:
{dropped}
"""


def dump(groups: list[tuple[dict[str, Any], list[dict[str, Any]]]], dropped: Counter[str],
         kept: int, commit: str) -> str:
    records = sum(len(p) for _, p in groups)
    lines = [HEADER.format(source=SOURCE, commit=commit, kept=kept, configs=len(groups),
                           records=records,
                           dropped="\n".join(f"#   {n:4d}  {why}" for why, n in
                                             dropped.most_common()) or "#   none")]
    for i, (base, points) in enumerate(groups):
        if not points:
            continue
        head = points[0]
        first = {"id": head["id"], "source": head["source"], **base,
                 **{k: v for k, v in head.items() if k not in ("id", "source")}}
        flow = yaml.safe_dump(first, sort_keys=False, default_flow_style=True, width=10**6)
        lines.append(f"- &c{i} {flow.strip()}")
        for p in points[1:]:
            flow = yaml.safe_dump(p, sort_keys=False, default_flow_style=True, width=10**6)
            lines.append(f"- {{<<: *c{i}, {flow.strip()[1:]}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fixture", type=Path, help="benchmarks.json of InferenceX-app")
    ap.add_argument("-o", "--out", type=Path, help="YAML to write (default: stdout)")
    ap.add_argument("--commit", default=FIXTURE_COMMIT, help="the fixture's commit, for the header")
    args = ap.parse_args(argv)
    try:
        rows = json.loads(args.fixture.read_text())
    except (OSError, ValueError) as e:
        print(f"cannot read {args.fixture}: {e}; give the path of benchmarks.json", file=sys.stderr)
        return 2
    if not isinstance(rows, list):
        print(f"{args.fixture} is not a list of benchmark rows", file=sys.stderr)
        return 2
    kept = select(rows)
    groups, dropped = convert(rows)
    text = dump(groups, dropped, len(kept), args.commit)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
