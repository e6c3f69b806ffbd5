"""Design what-ifs against published cases: every line prints the tool's figure beside the
published one. Nothing is fitted here; each figure is what the engine or the check computes for
the setup the source describes.

Part 1, energy (cost/power.py: ops x pJ/FLOP by dtype and node, pJ/byte, links, a busy floor
   of 60 % TDP fitted on PaLM/TPU v4). The A100 power check: a large bf16 GEMM at the measured
   86.9 % of peak must draw the A100's 400 W (the anchoring case); LLaMA 65B on 2048 A100
   (Touvron et al. 2023, Table 15: 449 MWh, 173 t CO2e at 400 W, PUE 1.1, 0.385 kg/kWh); GPT-3
   175B on 10,000 V100 (Patterson et al. 2021, Table 4: 14.8 days, 330 W measured per
   processor with its host, 1,287 MWh, 552 t at 0.429 kg/kWh); PaLM 540B on 6144 TPU v4
   (Google's measured mean 170 W of 192 W: the fitted case); Llama 3.1 8B served on one H100
   at batch 64 (ML.ENERGY leaderboard: 0.20 J/token with vLLM 0.5.4, 0.12 J with 0.11.1).
Part 2, what-ifs. NVIDIA's H200 is an H100 with 4.8 TB/s of HBM3e and 141 GB (TensorRT-LLM
   docs/source/blogs/H200launch.md, v0.5.0): "First token latency is compute bound for most
   ISLs, meaning H200 retains similar time to first token as H100", "Max throughput improves
   due to its dependence on memory capacity and bandwidth", and Llama-70B offline 2048/128 on
   one H200 "is 1.9x more performant than" on one H100 (largest power-of-2 batch each; the
   blog's H200 row: batch 32, 303 tok/s). The what-if H100 --set memory_bandwidth=4.8TB/s
   --set memory_capacity=141GB is run beside the catalog's H100 and H200.
Part 3, claim checks. Published vendor claims through ``check-claim``:
   NVIDIA H200 11,819 tok/s on Llama 2 13B (batch 1024, 128/128, FP8; same blog); Groq
   300 tok/s per user on Llama 2 70B on 576 chips (Groq, Nov 2023); Cerebras 1,800 tok/s per
   user on Llama 3.1 8B (Cerebras Inference launch, Aug 2024); Etched's "over 500,000 tokens
   per second running Llama 70B" on one 8-chip Sohu server (FP8, 2048 in / 128 out; June 2024),
   on a spec that grants Sohu the most a 4 nm reticle die could plausibly compute
   (data/etched-sohu-like.yaml).

Part 4, shape advice. Karpathy (nanoGPT, Feb 2023): "the most dramatic optimization to nanoGPT
   so far (~25% speedup) is to simply increase vocab size from 50257 to 50304 (nearest
   multiple of 64)"; nanoGPT's model.py pads it "for efficiency". ``advise`` on GPT-2 124M,
   one A100, batch 12 x 1024 (nanoGPT's train_gpt2 micro-batch), torch.compile, and the same
   shape under Megatron-LM, which pads the vocabulary itself (no gain expected).
Part 5, shape search. Llama 2 7B's own shape (d 4096, 32 layers, 32 heads, FFN 11008) against
   the 7B shapes ``design`` finds for 64 H100 (4M-token batches of 4K sequences, ZeRO-1): where
   it falls, and the spread between the fastest and slowest shapes of one budget, beside
   Anthony et al. 2024 ("The Case for Co-Designing Model Architectures with Hardware",
   arXiv:2401.14489): "the throughput of models with efficient model shapes is up to 39%
   higher ... compared to models with a similar number of parameters".
Part 6, cost. DeepSeek-V3 (arXiv:2412.19437, Table 1): pre-training 2,664K H800 GPU-hours for 14.8T
   tokens, "$5.576M" in all at an assumed $2 per GPU-hour (2,788K hours); the engine's hours for the
   paper's layout (2048 H800, PP16 x EP64 under DualPipe, FP8, 4K sequences, 15,360 per step),
   priced with --price 2. LLaMA 65B (Touvron et al. 2023, sec. 2.4 and Table 15): "around 380
   tokens/sec/GPU on 2048 A100 GPU with 80GB", 1.4T tokens, 1,022,362 GPU-hours; the engine's hours
   (tp 8 x pp 4, selective recompute, 4M-token batches) at the catalog's A100 quote. Renting vs
   owning an H100 (DGX H100 ~$270,000 / 8 and 10.2 kW / 8, 5 years, $0.08/kWh, PUE 1.56) against the
   catalog's rental quote: the break-even, beside the 14-18 months that GPU TCO write-ups quote for
   an H100 node against cloud prices (a secondary source).

Run: python benchmarks/whatif_cases.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelmap import api

ROOT = Path(__file__).resolve().parents[1]
CAT = api.load_catalog()


def _row(*cells: Any) -> None:
    print("  " + " | ".join(str(c) for c in cells))


def _largest_fitting(spec: Any, system: Any, prompt: int, output: int, dtype: str) -> Any:
    """The largest power-of-2 batch whose memory fits (not merely 'tight')."""
    best = None
    for b in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        e = api.estimate(spec, system, api.inference(b, prompt, output, dtype),
                         api.serving_mapping(), framework="tensorrt-llm")
        if e.feasible and e.memory_fit.value == "fits":
            best = (b, e)
    return best


def part2_h200_as_h100_whatif() -> dict[str, float]:
    print("Part 2: H100 + (4.8 TB/s, 141 GB) what-if vs NVIDIA's H200 launch figures")
    spec = api.load_model("llama-2-70b", CAT)
    wi = api.what_if(["h100-sxm5-80gb:memory_bandwidth=4.8TB/s",
                      "h100-sxm5-80gb:memory_capacity=141GB"], catalog=CAT)
    cat2 = api.whatif.apply_whatif(CAT, wi)
    runs = {}
    for label, cat, hw in (("H100", CAT, "h100-sxm5-80gb"),
                           ("H100 what-if", cat2, "h100-sxm5-80gb"),
                           ("H200 (catalog)", CAT, "h200-sxm")):
        system = api.load_system(hw=hw, catalog=cat)
        b, e = _largest_fitting(spec, system, 2048, 128, "fp8")
        b32 = api.estimate(spec, system, api.inference(32, 2048, 128, "fp8"),
                           api.serving_mapping(), framework="tensorrt-llm")
        sens = api.sensitivity(spec, system, api.inference(32, 2048, 128, "fp8"),
                               api.serving_mapping(), framework="tensorrt-llm", base=b32)
        runs[label] = {"batch": b, "tok_s": e.tokens_per_s, "ttft": b32.ttft_s,
                       "tpot": b32.tpot_s, "tok_s_b32": b32.tokens_per_s,
                       "e_tpot_bw": sens.elasticity["tpot_s"]["memory_bandwidth"] if sens
                       else float("nan"),
                       "e_ttft_compute": sens.elasticity["ttft_s"]["compute"] if sens
                       else float("nan")}
        r = runs[label]
        _row(f"{label:15s}", f"largest fitting batch {b:3d}: {r['tok_s']:6.0f} tok/s",
             f"batch 32: TTFT {r['ttft'] * 1e3:6.0f} ms, TPOT {r['tpot'] * 1e3:5.1f} ms, "
             f"{r['tok_s_b32']:4.0f} tok/s",
             f"d ln TPOT/d ln BW {r['e_tpot_bw']:+.2f}, d ln TTFT/d ln FLOPs "
             f"{r['e_ttft_compute']:+.2f}")
    h, w = runs["H100"], runs["H100 what-if"]
    ratio = w["tok_s"] / h["tok_s"]
    _row("what-if / H100 at each's largest batch", f"{ratio:.2f}x",
         "published: 'up to 1.9x' (H200 vs H100, Llama-70B 2048/128 TP1)")
    _row("what-if TTFT / H100 TTFT (batch 32)", f"{w['ttft'] / h['ttft']:.3f}",
         "published: 'H200 retains similar time to first token as H100'")
    _row("what-if batch-32 tok/s", f"{w['tok_s_b32']:.0f}",
         "published H200 row: 303 tok/s at batch 32 (TensorRT-LLM v0.5.0, preliminary)")
    _row("what-if vs catalog H200 (batch 32)",
         f"{w['tok_s_b32'] / runs['H200 (catalog)']['tok_s_b32']:.3f}",
         "the what-if should land near the catalog's own H200")
    return {"ratio": ratio, "ttft_ratio": w["ttft"] / h["ttft"],
            "b32": w["tok_s_b32"], "vs_h200": w["tok_s_b32"] / runs["H200 (catalog)"][
                "tok_s_b32"]}


CLAIMS = (
    ("NVIDIA H200, TensorRT-LLM H200 launch blog", "h200-sxm",
     "11,819 tok/s on llama-2-13b at batch 1024 with fp8 prompt 128 output 128"),
    ("Groq, Nov 2023 (576 GroqChips)", "groq-lpu-v1",
     "300 tok/s per user on llama-2-70b on 576 chips"),
    ("Cerebras Inference launch, Aug 2024", "wse-3",
     "1800 tok/s per user on llama-3.1-8b"),
    ("Etched Sohu, June 2024 (output tokens)", str(ROOT / "data/"
                                                    "etched-sohu-like.yaml"),
     "500000 tok/s on llama-3.1-70b with fp8 on 8 chips prompt 2048 output 128"),
    ("Etched Sohu, June 2024 (input+output)", str(ROOT / "data/"
                                                   "etched-sohu-like.yaml"),
     "500000 tok/s (input+output) on llama-3.1-70b with fp8 on 8 chips prompt 2048 "
     "output 128"),
)


def part3_claims() -> list[dict[str, Any]]:
    print("\nPart 3: published vendor claims through check-claim")
    out = []
    for who, hw, text in CLAIMS:
        r = api.check_claim(hw, text, CAT)
        eng = r.engine or {}
        vs = (f"claim / engine {eng['claim_over_engine']:.2f}" if eng.get("feasible")
              else "engine: cannot run (no links in the spec)")
        worst = max(r.claim_bounds, key=lambda b: b.ratio)
        _row(f"{who:40s}", f"{r.verdict.value:11s}",
             f"tightest: {worst.name} at {worst.ratio:.2f}x", vs)
        out.append({"who": who, "verdict": r.verdict.value, "bound": worst.name,
                    "ratio": worst.ratio, "engine": eng.get("claim_over_engine")})
    return out


def part4_advise() -> dict[str, float]:
    print("\nPart 4: shape advice costed by the engine")
    spec = api.load_model("gpt2", CAT)
    system = api.load_system(hw="a100-sxm4-80gb", catalog=CAT)
    out = {}
    for fw in ("torch-compile", "megatron"):
        adv = api.advise(spec, system, api.training(12, 1024), framework=fw)
        f = next(x for x in adv.findings if x.kind == "vocab")
        _row(f"GPT-2 124M on A100, {fw}", f"{f.fix}: {f.speedup:.2f}x faster step, params "
             f"{f.params_change:+.2%}", "published: ~25 % faster (nanoGPT)" if fw !=
             "megatron" else "Megatron pads the vocabulary to 128 itself: no gain")
        out[fw] = f.speedup or 0.0
    return out


def part5_design() -> dict[str, float]:
    print("\nPart 5: 7B shapes for 64 H100")
    s = api.load_system(cluster="64xH100", catalog=CAT)
    wl = api.training(1024, 4096)
    m = api.mapping(s, wl, zero=1, micro_batch=1)
    llama = api.load_model("llama-2-7b", CAT)
    d = api.design(llama, s, wl, "7B", m)
    speeds = [r["speed"] for r in d.rows if r["speed"]]
    own = api.estimate(llama, s, wl, m).tokens_per_s or 0.0
    best = d.front[0]
    rank = sum(x > own for x in speeds) + 1
    _row("fastest 7B shape", f"d {best['d_model']}, {best['n_layers']} layers, "
         f"FFN {best['ffn_dim']:,}: {best['speed']:,.0f} tok/s",
         f"Llama 2 7B's shape: {own:,.0f} tok/s, rank {rank} of {len(speeds)} "
         f"({own / best['speed']:.2f} of the fastest)")
    spread = max(speeds) / min(speeds)
    _row("spread over the searched shapes", f"{spread - 1:.0%} fastest vs slowest",
         "published: efficient shapes up to 39 % faster (Anthony et al. 2024)")
    return {"spread": spread, "llama_vs_best": own / best["speed"], "rank": rank,
            "n": len(speeds)}


def part6_cost() -> dict[str, float]:
    print("\nPart 6: the cost of published training runs; renting vs owning")
    cat = api.whatif.apply_whatif(CAT, api.what_if(["h800-sxm5:price=2USD/h"], catalog=CAT))
    spec = api.load_model("deepseek-v3", cat)
    s = api.load_system(cluster="2048xh800-sxm5", catalog=cat)
    wl = api.training(15360, 4096, "fp8", recompute="full", tokens="14.8T")
    m = api.mapping(s, wl, pp=16, ep=64, zero=1, micro_batch=1, first_stage_layers=1,
                    last_stage_layers=4, schedule="dualpipe")
    e = api.estimate(spec, s, wl, m)
    rep = api.cost_report(e, s, catalog=cat).to_dict()
    hours = rep["device_hours"]
    _row("DeepSeek-V3 pre-training, 2048 H800 at $2/h",
         f"{hours / 1e6:.2f}M GPU-h, ${rep['cost_to_train_usd'] / 1e6:.2f}M",
         "published: 2.664M GPU-h, $5.33M (pre-training of the $5.576M)",
         f"ratio {hours / 2.664e6:.2f} (engine MFU {e.mfu:.1%}, DualPipe, full recompute)")
    spec = api.load_model("llama-65b", CAT)
    s = api.load_system(cluster="2048xa100-sxm4-80gb", catalog=CAT)
    wl = api.training(2048, 2048, "bf16", recompute="selective", tokens="1.4T")
    e = api.estimate(spec, s, wl, api.mapping(s, wl, tp=8, pp=4, zero=1, micro_batch=1))
    rep65 = api.cost_report(e, s, catalog=CAT).to_dict()
    _row("LLaMA 65B, 2048 A100 80GB, 1.4T tokens",
         f"{e.tokens_per_s_per_device:.0f} tok/s/GPU, {rep65['device_hours'] / 1e6:.3f}M GPU-h,"
         f" ${rep65['cost_to_train_usd'] / 1e6:.2f}M at the catalog's A100 quote",
         "published: ~380 tok/s/GPU, 1,022,362 GPU-h",
         f"ratio {rep65['device_hours'] / 1022362:.2f}")
    from accelmap.cost.ownership import Ownership, owned_cost

    o = owned_cost("h100-sxm5-80gb", 700, Ownership())
    rent = CAT.accelerators["h100-sxm5-80gb"].price.usd_per_hour.value  # type: ignore[union-attr]
    months = (o.breakeven_hours(rent) or 0) / 730.5
    _row("H100 owned (DGX H100 / 8, 5 y, $0.08/kWh, PUE 1.56)",
         f"${o.usd_per_hour:.2f} per busy hour; vs ${rent:.2f}/h rent: owning wins above "
         f"{o.breakeven_utilization(rent):.0%} utilization, pays back in {months:.1f} months",
         "published (secondary): ~$1.20 effective per hour owned, break-even 14-18 months")
    return {"dsv3_ratio": hours / 2.664e6, "llama65_ratio": rep65["device_hours"] / 1022362,
            "h100_owned": o.usd_per_hour, "months": months}


def part1_energy() -> dict[str, float]:
    print("Part 1: modelled energy and power against published measurements")
    from accelmap.cost.power import calibration_check

    a100 = calibration_check(CAT.accelerators["a100-sxm4-80gb"])
    _row("A100 SXM, bf16 GEMM at 86.9 % of peak", f"{a100:.0f} W", "TDP 400 W (the anchor)")
    out = {"a100_gemm_w": a100}

    def train(model: str, cluster: str, wl: Any, grid: float, host: float = 0.0, **mk: Any
              ) -> dict[str, Any]:
        s = api.load_system(cluster=cluster, catalog=CAT)
        e = api.estimate(api.load_model(model, CAT), s, wl, api.mapping(s, wl, **mk))
        r = api.energy_report(e, s, pue=1.1, grid_kg_per_kwh=grid,
                              host_w_per_device=host).to_dict()
        r["days"] = (e.time_to_train_s or 0) / 86400
        return r

    r = train("llama-65b", "2048xa100-sxm4-80gb",
              api.training(2048, 2048, "bf16", recompute="selective", tokens="1.4T"), 0.385,
              tp=8, pp=4, zero=1, micro_batch=1)
    _row("LLaMA 65B, 2048 A100", f"{r['power_w_per_device']:.0f} W/GPU (of 400 W), "
         f"{r['run_mwh']:.0f} MWh, {r['run_t_co2e']:.0f} t CO2e",
         "published: 400 W assumed, 449 MWh, 173 t (its 1.02M GPU-h; ours "
         f"{r['run_device_hours'] / 1e6:.2f}M)")
    out.update(llama65_w=r["power_w_per_device"], llama65_mwh=r["run_mwh"])
    r = train("gpt3-175b", "10240xv100-sxm2-32gb",
              api.training(1600, 2048, "fp16", recompute="full", tokens="300B"), 0.429,
              tp=8, pp=8, zero=1, micro_batch=1)
    gpu_w = r["power_w_per_device"]
    rh = train("gpt3-175b", "10240xv100-sxm2-32gb",
               api.training(1600, 2048, "fp16", recompute="full", tokens="300B"), 0.429,
               host=137.5, tp=8, pp=8, zero=1, micro_batch=1)
    _row("GPT-3 175B, 10,240 V100", f"{r['days']:.1f} days, {gpu_w:.0f} W/GPU + 137.5 W DGX-1 "
         f"host share = {gpu_w + 137.5:.0f} W, {rh['run_mwh']:.0f} MWh, "
         f"{rh['run_t_co2e']:.0f} t CO2e (GPU only: {r['run_mwh']:.0f} MWh)",
         "published: 14.8 days, 330 W per processor with its host, 1,287 MWh, 552 t")
    out.update(gpt3_w=gpu_w + 137.5, gpt3_mwh=rh["run_mwh"], gpt3_days=r["days"])
    r = train("palm-540b", "6144xtpu-v4",
              api.training(2048, 2048, "bf16", recompute="full", tokens="780B"), 0.385,
              tp=12, zero=3, micro_batch=1)
    _row("PaLM 540B, 6144 TPU v4", f"{r['power_w_per_device']:.0f} W/chip",
         "published: 170 W mean of 192 W (the fitted case)")
    out["palm_w"] = r["power_w_per_device"]
    spec = api.load_model("llama-3.1-8b", CAT)
    h = api.load_system(hw="h100-sxm5-80gb", catalog=CAT)
    for batch in (16, 64):
        e = api.estimate(spec, h, api.inference(batch, 512, 717))
        r = api.energy_report(e, h).to_dict()
        _row(f"Llama 3.1 8B on H100, batch {batch}, 512 + 717 tokens",
             f"model {r['energy_j_per_token']:.3f} J/token at {r['power_w_per_device']:.0f} W",
             f"bounds {r['energy_j_per_token_ops']:.3f} (ops) / "
             f"{r['energy_j_per_token_tdp']:.3f} (TDP) J",
             "ML.ENERGY measured at batch 64: 0.20 J (vLLM 0.5.4), 0.12 J (0.11.1)"
             if batch == 64 else "")
        out[f"h100_b{batch}_j"] = r["energy_j_per_token"]
    return out


def main() -> None:
    part1_energy()
    print()
    part2_h200_as_h100_whatif()
    part3_claims()
    part4_advise()
    part5_design()
    part6_cost()


if __name__ == "__main__":
    main()
