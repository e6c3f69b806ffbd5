"""Fine-tuning (LoRA / QLoRA) against the published cases of issue 17. Nothing is fitted here:
every figure is the engine's prediction for the setup the source describes.

1. QLoRA (Dettmers et al. 2023, arXiv:2305.14314, abstract and sec. 1): "finetune a 65B
   parameter model on a single 48GB GPU". Setup from the paper and its qlora.py /
   scripts/finetune_guanaco_65b.sh: LLaMA 65B in NF4 with double quantization, LoRA r = 64 on
   every linear layer of the blocks (sec. 4, "LoRA on all linear transformer block layers"),
   bf16 adapters, paged 32-bit AdamW, gradient checkpointing, per-device batch 1, sequences
   of at most 512 tokens (source 16 + target 512 in the 65B script: 528 at most, 512 here).
   Device: a 48 GB card of the catalog (L40S, 48 GB GDDR6; the paper names no card).
2. LoRA vs full fine-tuning of GPT-3 175B (Hu et al. 2021, arXiv:2106.09685, sec. 4.2):
   "we reduce the VRAM consumption during training from 1.2TB to 350GB" with r = 4 on W_q
   and W_v, and "a 25% speedup during training ... compared to full fine-tuning". Memory is
   compared as the model states summed over the devices (the paper's 2/3 saving is the
   optimizer states of the frozen weights) in two precisions: the paper's arithmetic
   (fp16 weights, fp16 gradients and fp16 Adam moments, no fp32 master: 8 B per parameter)
   and mixed-precision Adam (16 B: fp32 gradients, master and moments). Speed: the same
   mapping for both (64 x V100 32 GB, tp 8 x pp 8, global batch 128 of 2048 tokens, full
   recompute as GPT-3-scale training then ran); the paper names neither cluster nor mapping.
3. The NeMo LoRA rows of the shared training measurements (T0332-T0334): `accelmap validate`,
   NeMo 1.x LoRA defaults (rank 32 on the fused QKV projection).

Run: python benchmarks/finetune_cases.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from accelmap import api
from accelmap.api import DType, Training, load_catalog
from accelmap.workload import Adapters, Finetune, LoraTarget, Optimizer, Recompute

ROOT = Path(__file__).resolve().parents[1]
GiB = 2**30
STATES = ("weights", "frozen_weights", "gradients", "optimizer/master_weights",
          "optimizer/states")


def qlora_65b() -> None:
    cat = load_catalog()
    spec = cat.models["llama-65b"]
    system = api.load_system("l40s", catalog=cat)
    ad = api.adapters("qlora", rank=64)
    wl = api.training(1, 512, "bf16", recompute="full", finetune=ad)
    est = api.estimate(spec, system, wl, api.mapping(system, wl))
    items = est.memory.items
    total = sum(items.values())
    cap = est.memory.capacity
    print("1. QLoRA 65B on one 48 GB GPU (Dettmers et al. 2023): published: fits "
          "(L40S, 512-token sequences, batch 1)")
    print(f"   predicted: {est.memory_fit.value}: {total / 1e9:.1f} GB "
          f"of {cap / 1e9:.1f} GB, margin {(cap - total) / 1e9:.1f} GB "
          f"({(cap - total) / cap:.0%})")
    for k, v in sorted(items.items(), key=lambda kv: -kv[1]):
        print(f"     {k:26s} {v / 1e9:7.2f} GB")
    for seq in (1024, 2048):
        e2 = api.estimate(spec, system, api.training(1, seq, "bf16", recompute="full",
                                                     finetune=ad), None)
        print(f"   at {seq} tokens: {sum(e2.memory.items.values()) / 1e9:.1f} GB "
              f"({e2.memory_fit.value}: within the memory model's {e2.memory.band:.1%} error "
              "band counts as tight)")


def _states(est: object) -> float:
    items = est.memory.items  # type: ignore[attr-defined]
    return sum(v for k, v in items.items() if k in STATES)


def lora_gpt3() -> None:
    cat = load_catalog()
    spec = cat.models["gpt3-175b"]
    system = api.load_system(cluster="64xv100-sxm2-32gb", catalog=cat)
    lora = Adapters(method=Finetune.LORA, rank=4,
                    targets=frozenset({LoraTarget.Q, LoraTarget.V}))
    print("2. LoRA vs full fine-tuning, GPT-3 175B (Hu et al. 2021 sec. 4.2): published "
          "VRAM 1.2 TB -> 350 GB (ratio 0.292), training 25 % faster (time ratio 0.80)")
    paper = dict(dtype=DType.FP16, master_dtype=DType.FP16, grad_dtype=DType.FP16,
                 state_dtype=DType.FP16)
    mixed = dict(dtype=DType.FP16)
    for label, prec in (("fp16 weights/grads/moments (8 B)", paper),
                        ("mixed-precision Adam (16 B)", mixed)):
        res = {}
        for name, ad in (("full", None), ("lora", lora)):
            wl = Training(batch=128, seq_len=2048, optimizer=Optimizer.ADAMW,
                          recompute=Recompute.FULL, adapters=ad, **prec)  # type: ignore[arg-type]
            m = api.mapping(system, wl, tp=8, pp=8)
            res[name] = api.estimate(spec, system, wl, m)
        world = 64
        full_s, lora_s = (_states(res[k]) * world for k in ("full", "lora"))
        ratio = lora_s / full_s
        fit = ", ".join(f"{k} {res[k].memory_fit.value}" for k in res)
        print(f"   {label} ({fit} on 64 x V100 32 GB, tp 8 x pp 8):")
        print(f"     model states full {full_s / 1e12:.2f} TB, LoRA "
              f"{lora_s / 1e9:.0f} GB: ratio {ratio:.3f} ({ratio / (350 / 1200) - 1:+.0%} vs "
              "published)")
        t = res["lora"].step_time_s / res["full"].step_time_s
        print(f"     step time full {res['full'].step_time_s:.1f} s, LoRA "
              f"{res['lora'].step_time_s:.1f} s: time ratio {t:.3f} (speedup "
              f"{1 / t - 1:.0%}; {t / 0.8 - 1:+.0%} vs published 0.80)")


def nemo_rows() -> None:
    print("3. NeMo LoRA rows (shared training.csv, model TFLOP/s per GPU)")
    csv = ROOT / "data" / "reference" / "measurements" / "training.csv"
    if not csv.exists():
        print(f"   {csv} not found: skipped")
        return
    out = subprocess.run([sys.executable, "-c", "from accelmap.cli.app import main; main()",
                          "validate", "--cases", str(csv), "--json"],
                         capture_output=True, text=True, check=False)
    rows = json.loads(out.stdout)["rows"] if out.returncode == 0 else []
    for r in rows:
        if r["row_id"] in ("T0332", "T0333", "T0334"):
            err = r["predicted"] / r["measured"] - 1
            print(f"   {r['row_id']} {r.get('model_id', '')}: measured {r['measured']:.0f}, "
                  f"predicted {r['predicted']:.0f} ({err:+.1%})")


if __name__ == "__main__":
    qlora_65b()
    print()
    lora_gpt3()
    print()
    nemo_rows()
