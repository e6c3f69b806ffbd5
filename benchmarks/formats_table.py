"""Print what the number formats change, per part: serving llama-3.1-70b (batch 32, 1024 in /
256 out) and one training step of llama-3.1-8b (4 x 4096 tokens), in each format the part runs
natively or weight-only; and the mixed recipe's deepseek-v3 weight bytes against the published
nvidia/DeepSeek-R1-FP4 checkpoint.

Run: PYTHONPATH=src python benchmarks/formats_table.py
"""

from __future__ import annotations

from accelmap import api
from accelmap.api import DType, Inference, estimate
from accelmap.errors import InputError
from accelmap.memory.budget import weight_storage_bytes
from accelmap.models.geometry import Geometry

PARTS = ("h100-sxm5-80gb", "h200-sxm", "b200", "gb200", "b300", "gb300", "mi300x", "mi355x")
SERVE = ("bf16", "fp8", "nvfp4", "mxfp4", "fp4")
TRAIN = ("bf16", "fp8", "mxfp8", "nvfp4", "mxfp4")
PUBLISHED_R1_FP4_ELEMENTS = 396.8e9  # Hugging Face's count for nvidia/DeepSeek-R1-FP4


def serving() -> None:
    spec = api.load_model("llama-3.1-70b")
    print("serving llama-3.1-70b, batch 32, 1024 in / 256 out, one device: TTFT s / TPOT ms "
          "/ weights GB")
    print(f"{'part':16}" + "".join(f"{w:>24}" for w in SERVE))
    for part in PARTS:
        cells = []
        for w in SERVE:
            e = estimate(spec, api.load_system(hw=part), api.inference(32, 1024, 256, w))
            cells.append(f"{e.ttft_s:7.2f} /{e.tpot_s * 1e3:6.1f} /{e.memory.items['weights'] / 1e9:5.1f}")  # type: ignore[attr-defined]  # noqa: E501
        print(f"{part:16}" + "".join(f"{c:>24}" for c in cells))


def training() -> None:
    spec = api.load_model("llama-3.1-8b")
    print("\ntraining llama-3.1-8b, 4 x 4096 tokens, one device: step time s ('-': the part "
          "cannot run the recipe)")
    print(f"{'part':16}" + "".join(f"{d:>9}" for d in TRAIN))
    for part in PARTS:
        cells = []
        for d in TRAIN:
            try:
                cells.append(f"{estimate(spec, api.load_system(hw=part), api.training(4, 4096, d)).step_time_s:.3f}")  # type: ignore[attr-defined]  # noqa: E501
            except InputError:
                cells.append("-")
        print(f"{part:16}" + "".join(f"{c:>9}" for c in cells))


def checkpoint() -> None:
    spec = api.load_model("deepseek-v3")
    main = weight_storage_bytes(spec, Inference(weight_dtype=DType.FP8,
                                                moe_weight_dtype=DType.NVFP4))
    geo = Geometry.of(spec)
    block = next(g for g in geo.groups if g.moe)
    mtp = sum(t.params for t in block.tensors) + 2 * geo.d_model ** 2
    print(f"\ndeepseek-v3 --weights fp8 --moe-weights nvfp4: {main / 1e9:.1f} GB of weights; "
          f"+ the unquantized MTP module ({mtp / 1e9:.2f} B) = {(main + mtp) / 1e9:.1f} B stored "
          f"elements vs {PUBLISHED_R1_FP4_ELEMENTS / 1e9:.1f} B published "
          f"({(main + mtp) / PUBLISHED_R1_FP4_ELEMENTS - 1:+.2%})")


if __name__ == "__main__":
    serving()
    training()
    checkpoint()
