"""vLLM, SGLang and MaxText exporters: round trips, documented keys, device counts.

The documented names below are transcribed from the pinned releases (the PyPI wheels):

- vLLM 0.33.0: ``vllm/engine/arg_utils.py`` (``EngineArgs.add_cli_args``),
  ``vllm/entrypoints/common/cli_args.py`` (``FrontendArgs``: host, port),
  ``vllm/config/model.py`` (``ModelDType``), ``vllm/config/cache.py`` (``CacheDType``, first
  entries), ``vllm/model_executor/layers/quantization/__init__.py`` (``QuantizationMethods``,
  the entries named here).
- SGLang 0.5.23: ``python/sglang/srt/arg_groups/fields/{model,parallel,schedule,serving}.py``
  (flag = "--" + field name with dashes, ``arg_groups/arg_utils.py`` ``_field_to_cli_name``),
  ``arg_groups/choices.py`` (``QUANTIZATION_CHOICES``, the entries named here).
- MaxText 0.2.5: ``maxtext/configs/base.yml`` (``src/maxtext/configs/base.yml`` in the
  repository) and ``maxtext/configs/pyconfig.py`` (``base_config``).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from accelmap.catalog import Catalog
from accelmap.cost.schedules import Schedule
from accelmap.export.base import PlanJob, PlanKind, ReadBack, ServingChoice
from accelmap.export.formats import maxtext, sglang, vllm
from accelmap.export.registry import get_exporter
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.units import DType
from accelmap.workload import Recompute

VLLM_FLAGS = {
    "--host", "--port",  # entrypoints/common/cli_args.py FrontendArgs
    "--tensor-parallel-size", "--pipeline-parallel-size", "--enable-expert-parallel",
    "--nnodes", "--node-rank", "--master-addr",  # arg_utils.py parallel_group
    "--max-num-seqs", "--max-num-batched-tokens",  # scheduler_group
    "--max-model-len", "--dtype", "--quantization",  # model_group
    "--kv-cache-dtype",  # cache_group
}
VLLM_CHOICES = {
    "--dtype": {"auto", "half", "float16", "bfloat16", "float", "float32"},  # ModelDType
    "--kv-cache-dtype": {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"},
    "--quantization": {"awq", "fp8", "gptq", "gptq_marlin", "awq_marlin", "compressed-tensors",
                       "experts_int8", "int8_per_channel_weight_only"},
}
SGLANG_FLAGS = {
    "--model-path", "--context-length", "--dtype", "--quantization", "--kv-cache-dtype",
    "--tp-size", "--pp-size", "--dp-size", "--ep-size", "--nnodes", "--node-rank",
    "--dist-init-addr", "--max-running-requests", "--chunked-prefill-size", "--host", "--port",
    "--enable-dp-attention",  # fields/parallel.py (repository, commit 00ac7105)
}
SGLANG_CHOICES = {
    "--dtype": {"auto", "half", "float16", "bfloat16", "float", "float32"},
    "--kv-cache-dtype": {"auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4",
                         "fp4_mx_block16"},
    "--quantization": {"awq", "fp8", "mxfp8", "gptq", "gptq_marlin", "awq_marlin",
                       "w8a8_int8", "w8a8_fp8"},
}
MESH = ("data", "fsdp", "fsdp_transpose", "sequence", "context", "context_usp_ulysses",
        "context_autoregressive", "tensor", "tensor_sequence", "autoregressive", "pipeline",
        "expert", "diloco")
MAXTEXT_KEYS = {
    "base_config", "run_name", "model_name", "hardware", "dtype", "quantization",
    "max_target_length", "per_device_batch_size", "gradient_accumulation_steps",
    "num_pipeline_microbatches", "num_layers_per_pipeline_stage", "num_pipeline_repeats",
    "scan_layers", "remat_policy", "optimizer_memory_host_offload",
    "parameter_memory_host_offload", "shard_optimizer_over_data",
    *(f"{t}_{a}_parallelism" for t in ("ici", "dcn") for a in MESH),
}
# base.yml: "Choose 'remat_policy' between 'minimal_with_context', 'minimal', ... and 'full'."
MAXTEXT_REMAT = {"minimal_with_context", "minimal", "save_dot_with_context_except_mlp",
                 "save_dot_except_mlpwi", "save_dot_except_mlp", "save_qkv_proj",
                 "qkv_proj_offloaded", "custom", "minimal_offloaded", "save_out_proj", "full"}


def serve_job(model: str, nodes: int = 1, per_node: int = 8, *, tp: int = 1, pp: int = 1,
              ep: int = 1, replicas: int = 1, batch: int = 64,
              weight_dtype: DType = DType.BF16, kv_dtype: DType = DType.BF16,
              max_tokens: int | None = None, dp_attention: bool = False) -> PlanJob:
    return PlanJob(kind=PlanKind.SERVE, model=model, accelerator="h100-sxm5-80gb",
                   devices_per_node=per_node, nodes=nodes,
                   mapping=Mapping.serving(tp=tp, pp=pp, ep=ep, replicas=replicas,
                                           dp_attention=dp_attention),
                   serving=ServingChoice(batch, weight_dtype, kv_dtype, max_tokens),
                   seq_len=2304,
                   prompt_len=2048, output_len=256)


def train_job(model: str, accelerator: str, per_node: int, nodes: int, seq: int, batch: int,
              **degrees: Any) -> PlanJob:
    """A training plan; ``degrees`` are Mapping fields (ZeRO-0, full recompute unless given)."""
    m = Mapping(**{"zero": ZeroStage.NONE, "recompute": Recompute.FULL, **degrees})
    if m.interleaved:  # as a plan file's mapping reads (Mapping.from_dict)
        m = m.with_(schedule=Schedule.INTERLEAVED)
    return PlanJob(kind=PlanKind.TRAIN, model=model, accelerator=accelerator,
                   devices_per_node=per_node, nodes=nodes, mapping=m, seq_len=seq,
                   global_batch=batch)


def plan_values(job: PlanJob | ReadBack) -> dict[str, Any]:
    """The typed values behind each plan-file key (unsupported sentences name these keys)."""
    m, s = job.mapping, job.serving
    assert m is not None
    if s is not None:
        return {"tp": m.tp, "pp": m.pp, "ep": m.ep, "replicas": m.replicas,
                "dp_attention": m.dp_attention, "batch": s.batch,
                "weight_dtype": s.weight_dtype, "kv_dtype": s.kv_dtype,
                "max_batched_tokens": s.max_tokens}
    return {"dp": m.dp, "tp": m.tp, "pp": m.pp, "cp": m.cp, "ep": m.ep, "zero": m.zero,
            "micro_batch": m.micro_batch, "vpp": m.virtual_stages, "recompute": m.recompute,
            "offload": (m.offload_optimizer, m.offload_params)}


SERVE_PLANS = {
    "70b-fp8": serve_job("llama-3.1-70b", tp=2, replicas=4, batch=256, weight_dtype=DType.FP8,
                         kv_dtype=DType.FP8),
    "8b-bf16": serve_job("llama-3.1-8b", replicas=8, batch=128),
    "mixtral-ep": serve_job("mixtral-8x7b", tp=4, ep=4, replicas=2, batch=64),
    "mixtral-ep-in-tp": serve_job("mixtral-8x7b", tp=4, ep=2, replicas=2, batch=64),
    "70b-int4": serve_job("llama-3.1-70b", tp=2, replicas=4, batch=128,
                          weight_dtype=DType.INT4, kv_dtype=DType.FP8),
    "405b-two-nodes": serve_job("llama-3.1-405b", nodes=4, tp=8, pp=2, replicas=2, batch=32),
    "8b-fp16": serve_job("llama-3.1-8b", tp=2, replicas=4, batch=32, weight_dtype=DType.FP16,
                         kv_dtype=DType.FP16),
    # a plan of the offline/server scenarios: the scheduler caps it was simulated under
    # DP attention (issue 22 part 3): SGLang writes it, vLLM's exporter says it cannot
    "deepseek-dp-attention": serve_job("deepseek-v3", tp=8, ep=8, batch=512,
                                       weight_dtype=DType.FP8, kv_dtype=DType.FP8,
                                       dp_attention=True),
    "70b-scheduler-caps": serve_job("llama-3.1-70b", tp=4, replicas=2, batch=1024,
                                    weight_dtype=DType.FP8, kv_dtype=DType.FP8,
                                    max_tokens=8192),
}
# plan -> (exporter -> the mapping fields it must name in `unsupported`)
EXPECTED_UNSUPPORTED = {
    "mixtral-ep-in-tp": {"vllm": {"ep"}, "sglang": set()},
    "deepseek-dp-attention": {"vllm": {"dp_attention"}, "sglang": set()},
    "70b-int4": {"vllm": {"weight_dtype"}, "sglang": {"weight_dtype"}},
}


def named(field: str, unsupported: list[str]) -> bool:
    return any(re.match(rf"{field}\b", u) for u in unsupported)


def check_round_trip(job: PlanJob, back: ReadBack, unsupported: list[str]) -> set[str]:
    """Every field either reads back equal or is named in `unsupported`; returns the named.
    With nothing named, the typed values read back are the exported ones."""
    want, got = plan_values(job), plan_values(back)
    lost = {k for k in want if got[k] != want[k]}
    for k in lost:
        assert named(k, unsupported), (k, want[k], got[k], unsupported)
    named_fields = {k for k in want if named(k, unsupported)}
    if not named_fields:
        assert (back.mapping, back.serving) == (job.mapping, job.serving)
    return named_fields


def serve_commands(text: str, program: str) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in text.splitlines()
            if program in line and not line.lstrip().startswith("#")]


def flag_values(tokens: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, t in enumerate(tokens):
        if t.startswith("--"):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
            out[t] = "" if nxt.startswith("--") or nxt == "&" else nxt
    return out


@pytest.mark.parametrize("plan", sorted(SERVE_PLANS))
@pytest.mark.parametrize("module", [vllm, sglang], ids=["vllm", "sglang"])
def test_serving_round_trip(catalog: Catalog, module: Any, plan: str) -> None:
    job = SERVE_PLANS[plan]
    r = module.EXPORTER.export(job, catalog.models[job.model])
    back = module.EXPORTER.read_back(r.files)
    lost = check_round_trip(job, back, r.unsupported)
    assert lost == EXPECTED_UNSUPPORTED.get(plan, {}).get(module.EXPORTER.name, set())
    assert r.launch.endswith("serve.sh") or "bash serve.sh" in r.launch


@pytest.mark.parametrize("plan", sorted(SERVE_PLANS))
@pytest.mark.parametrize(("module", "program", "flags", "choices", "length"), [
    (vllm, "vllm serve", VLLM_FLAGS, VLLM_CHOICES, "--max-model-len"),
    (sglang, "sglang.launch_server", SGLANG_FLAGS, SGLANG_CHOICES, "--context-length"),
], ids=["vllm", "sglang"])
def test_serving_flags_documented(catalog: Catalog, module: Any, program: str, flags: set[str],
                                  choices: dict[str, set[str]], length: str, plan: str) -> None:
    job = SERVE_PLANS[plan]
    r = module.EXPORTER.export(job, catalog.models[job.model])
    cmds = serve_commands(r.files["serve.sh"], program)
    assert cmds
    for tokens in cmds:
        values = flag_values(tokens)
        assert set(values) <= flags, set(values) - flags
        for flag, allowed in choices.items():
            if flag in values:
                assert values[flag] in allowed, (flag, values[flag])
        assert int(values[length]) >= job.prompt_len + job.output_len


def test_vllm_devices_and_layout(catalog: Catalog) -> None:
    job = SERVE_PLANS["70b-fp8"]
    r = vllm.EXPORTER.export(job, catalog.models[job.model])
    script = r.files["serve.sh"]
    gpus = [g for line in script.splitlines() for g in
            re.findall(r"CUDA_VISIBLE_DEVICES=([\d,]+)", line)]
    used = [int(x) for g in gpus for x in g.split(",")]
    assert sorted(used) == list(range(8))  # 4 replicas x tp 2 fill the node, no GPU twice
    assert len(set(re.findall(r"--port (\d+)", script))) == 4
    assert "meta-llama/Llama-3.1-70B" in script and "--quantization fp8" in script
    assert r.unsupported == []


def test_multi_node_replicas(catalog: Catalog) -> None:
    job = SERVE_PLANS["405b-two-nodes"]
    for module, program in ((vllm, "vllm serve"), (sglang, "sglang.launch_server")):
        r = module.EXPORTER.export(job, catalog.models[job.model])
        cmds = [flag_values(t) for t in serve_commands(r.files["serve.sh"], program)]
        assert len(cmds) == 4  # 2 replicas x 2 nodes
        assert {c["--nnodes"] for c in cmds} == {"2"}
        assert sorted(c["--node-rank"] for c in cmds) == ["0", "0", "1", "1"]
        assert "NODE_RANK" in r.launch
        back = module.EXPORTER.read_back(r.files).mapping
        assert back is not None and back.replicas == 2
        assert back.replicas * job.mapping.devices_per_replica == back.world == job.devices


def test_sglang_one_server_per_node(catalog: Catalog) -> None:
    job = serve_job("llama-3.1-8b", nodes=2, replicas=16, batch=32)
    r = sglang.EXPORTER.export(job, catalog.models[job.model])
    cmds = [flag_values(t) for t in serve_commands(r.files["serve.sh"], "launch_server")]
    assert [c["--dp-size"] for c in cmds] == ["8", "8"]
    back = sglang.EXPORTER.read_back(r.files).mapping
    assert back is not None and back.replicas == 16


def test_sglang_dp_attention(catalog: Catalog) -> None:
    """--dp-size is the attention-DP size under --enable-dp-attention: one replica per
    server, and two DP-attention replicas on one node are said, not merged."""
    job = SERVE_PLANS["deepseek-dp-attention"]
    r = sglang.EXPORTER.export(job, catalog.models[job.model])
    [c] = [flag_values(t) for t in serve_commands(r.files["serve.sh"], "launch_server")]
    assert c["--dp-size"] == c["--tp-size"] == "8" and "--enable-dp-attention" in c
    two = serve_job("deepseek-v3", tp=4, ep=4, replicas=2, dp_attention=True)
    r = sglang.EXPORTER.export(two, catalog.models[two.model])
    assert any(u.startswith("replicas=2") for u in r.unsupported)


def test_unknown_hf_model_and_long_context(catalog: Catalog) -> None:
    job = serve_job("megatron-1.7b")
    for module in (vllm, sglang):
        r = module.EXPORTER.export(job, catalog.models["megatron-1.7b"])
        assert "megatron-1.7b" in r.files["serve.sh"]
        assert named("model", r.unsupported)  # "set the model path"
        assert named("context", r.unsupported)  # 2304 > its 2048-token window


def test_max_model_len_rounding(catalog: Catalog) -> None:
    job = replace(serve_job("llama-3.1-8b"), prompt_len=1000, output_len=100)
    r = vllm.EXPORTER.export(job, catalog.models[job.model])
    assert "--max-model-len 1280" in r.files["serve.sh"]  # 1100 rounded up to 256s
    job = replace(job, prompt_len=3900, output_len=50)
    r = vllm.EXPORTER.export(job, SimpleNamespace(max_seq_len=4000))
    assert "--max-model-len 4000" in r.files["serve.sh"]  # capped at the model's window
    assert not named("context", r.unsupported)
    job = replace(serve_job("llama-3.1-8b"), prompt_len=0, output_len=0)
    r = sglang.EXPORTER.export(job, catalog.models[job.model])
    assert "--context-length 2304" in r.files["serve.sh"]  # no prompt/output: the job's seq


# --- MaxText --------------------------------------------------------------------------------

TRAIN_PLANS = {
    "gpu-70b": train_job("llama-3.1-70b", "h100-sxm5-80gb", 8, 8, 8192, 256, dp=4, tp=8, pp=2,
                         zero=ZeroStage.OPTIMIZER, micro_batch=1, recompute=Recompute.FULL),
    "v5p-slice": train_job("llama-3.1-70b", "tpu-v5p", 4, 128, 8192, 512, dp=128, tp=4,
                           zero=ZeroStage.PARAMETERS, micro_batch=1,
                           recompute=Recompute.SELECTIVE),
    "v5p-two-slices": train_job("llama-3.1-70b", "tpu-v5p", 4, 256, 8192, 1024, dp=256, tp=4,
                                zero=ZeroStage.PARAMETERS, micro_batch=2,
                                recompute=Recompute.NONE),
    "v5p-two-slices-zero1": train_job("llama-3.1-8b", "tpu-v5p", 4, 256, 4096, 2048, dp=512,
                                      tp=2, zero=ZeroStage.OPTIMIZER, micro_batch=2,
                                      offload_optimizer=Offload.CPU,
                                      offload_params=Offload.CPU),
    "mixtral-ep-vpp": train_job("mixtral-8x7b", "h100-sxm5-80gb", 8, 8, 4096, 512, dp=16, tp=2,
                                pp=2, ep=8, zero=ZeroStage.PARAMETERS, micro_batch=1,
                                virtual_stages=2),
    "zero2-cp": train_job("llama-3.1-8b", "h100-sxm5-80gb", 8, 2, 32768, 64, dp=4, tp=2, cp=2,
                          zero=ZeroStage.GRADIENTS, micro_batch=1),
    # only the optimizer state on the host (optimizer_memory_host_offload alone)
    "offload-optimizer": train_job("llama-3.1-8b", "h100-sxm5-80gb", 8, 1, 4096, 64, dp=8,
                                   zero=ZeroStage.OPTIMIZER, offload_optimizer=Offload.CPU),
}
TRAIN_UNSUPPORTED = {"zero2-cp": {"zero"}}
SLICE = {"gpu-70b": 8, "v5p-slice": 512, "v5p-two-slices": 512, "v5p-two-slices-zero1": 512,
         "mixtral-ep-vpp": 8, "zero2-cp": 8, "offload-optimizer": 8}


def maxtext_config(r: Any) -> dict[str, Any]:
    cfg = yaml.safe_load(r.files["maxtext_overrides.yml"])
    assert isinstance(cfg, dict)
    return cfg


@pytest.mark.parametrize("plan", sorted(TRAIN_PLANS))
def test_maxtext_round_trip_and_devices(catalog: Catalog, plan: str) -> None:
    job = TRAIN_PLANS[plan]
    r = maxtext.EXPORTER.export(job, catalog.models[job.model])
    back = maxtext.EXPORTER.read_back(r.files)
    assert check_round_trip(job, back, r.unsupported) == TRAIN_UNSUPPORTED.get(plan, set())
    cfg = maxtext_config(r)
    axes = ("data", "fsdp", "pipeline", "expert", "context", "tensor")
    ici = math.prod(cfg[f"ici_{a}_parallelism"] for a in axes)
    dcn = math.prod(cfg[f"dcn_{a}_parallelism"] for a in axes)
    assert ici * dcn == job.devices
    assert ici == SLICE[plan]  # ICI covers one TPU slice / one GPU node
    steps = cfg["gradient_accumulation_steps"]
    assert int(job.devices * cfg["per_device_batch_size"]) * steps == job.global_batch
    assert cfg["max_target_length"] == job.seq_len


@pytest.mark.parametrize("plan", sorted(TRAIN_PLANS))
def test_maxtext_keys_documented(catalog: Catalog, plan: str) -> None:
    job = TRAIN_PLANS[plan]
    r = maxtext.EXPORTER.export(job, catalog.models[job.model])
    cfg = maxtext_config(r)
    assert set(cfg) <= MAXTEXT_KEYS, set(cfg) - MAXTEXT_KEYS
    assert cfg["remat_policy"] in MAXTEXT_REMAT
    assert cfg["hardware"] in {"tpu", "gpu"}  # base.yml: 'tpu', 'gpu', 'gpu_multiprocess', 'cpu'
    tokens = shlex.split(r.launch)
    assert tokens[:4] == ["python3", "-m", "maxtext.trainers.pre_train.train",
                          "src/maxtext/configs/base.yml"]
    launched = dict(t.split("=", 1) for t in tokens[4:])
    assert set(launched) <= MAXTEXT_KEYS
    assert {k for k in cfg if k != "base_config"} <= set(launched)


def test_maxtext_mesh_placement(catalog: Catalog) -> None:
    spec = catalog.models["llama-3.1-70b"]
    one = maxtext_config(maxtext.EXPORTER.export(TRAIN_PLANS["v5p-slice"], spec))
    assert (one["ici_fsdp_parallelism"], one["ici_tensor_parallelism"]) == (128, 4)
    assert all(one[f"dcn_{a}_parallelism"] == 1 for a in ("data", "fsdp", "pipeline"))
    assert one["hardware"] == "tpu" and one["remat_policy"] == "minimal"
    two = maxtext_config(maxtext.EXPORTER.export(TRAIN_PLANS["v5p-two-slices"], spec))
    assert (two["dcn_fsdp_parallelism"], two["ici_fsdp_parallelism"]) == (2, 128)  # dp on DCN
    z1 = maxtext_config(maxtext.EXPORTER.export(TRAIN_PLANS["v5p-two-slices-zero1"],
                                                catalog.models["llama-3.1-8b"]))
    assert (z1["dcn_data_parallelism"], z1["ici_data_parallelism"]) == (2, 256)
    assert z1["shard_optimizer_over_data"] is True and z1["ici_fsdp_parallelism"] == 1
    gpu = maxtext_config(maxtext.EXPORTER.export(TRAIN_PLANS["gpu-70b"], spec))
    assert (gpu["dcn_data_parallelism"], gpu["dcn_pipeline_parallelism"]) == (4, 2)
    assert gpu["num_pipeline_microbatches"] == 64 and gpu["num_layers_per_pipeline_stage"] == 40
    assert gpu["num_pipeline_microbatches"] % 2 == 0  # a multiple of pp (types.py)


def test_exporters_registered() -> None:
    for name, kinds in (("vllm", (PlanKind.SERVE,)), ("sglang", (PlanKind.SERVE,)),
                        ("maxtext", (PlanKind.TRAIN,))):
        e = get_exporter(name)
        assert e.kinds == kinds and e.url.startswith("https://") and e.version[0].isdigit()
