"""Training exporters (deepspeed, megatron, torchtitan, slurm): round trip, documented keys,
batch arithmetic and launch lines, on hand-built plans. Offline; no framework is installed.

The documented-key sets below are transcribed from the pinned sources each exporter names
(repository, file, commit):
  DeepSpeed   deepspeedai/DeepSpeed docs/_pages/config-json.md
              @ 00376da49967bc6a15d70a550200ac67277b1fb4; launcher flags from
              deepspeed/launcher/runner.py @ 2d991ba352b73e1bdc3d754a245bb85d61f0eb6e
  Megatron    NVIDIA/Megatron-LM megatron/training/arguments.py
              @ 000c4ac24f61159c138b0975def722c65245983c
  torchtitan  pytorch/torchtitan torchtitan/config/job_config.py
              @ 038d5fd1bb3056e3c676d261fd720e1dfbc04bfe
  torchrun    pytorch/pytorch torch/distributed/run.py
              @ 010929fd3f401c3868310396e6a91ed95aa0305b
  sbatch      https://slurm.schedmd.com/sbatch.html
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from typing import Any

import pytest

from accelmap.catalog import Catalog
from accelmap.cost.schedules import Schedule
from accelmap.errors import InputError
from accelmap.export.base import Exporter, PlanJob, PlanKind, ReadBack
from accelmap.export.formats import deepspeed, launch, megatron, torchtitan
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.units import DType
from accelmap.workload import Recompute

MAPPING_FIELDS = launch.MAPPING_FIELDS
EXPORTERS: dict[str, Exporter] = {m.EXPORTER.name: m.EXPORTER
                                  for m in (deepspeed, megatron, torchtitan, launch)}
CPU = {"offload_optimizer": Offload.CPU, "offload_params": Offload.CPU}


def _job(model: str, nodes: int, gpus: int, seq: int, batch: int, dtype: DType = DType.BF16,
         **degrees: Any) -> PlanJob:
    """A training plan; ``degrees`` are Mapping fields (ZeRO-1 unless given)."""
    m = Mapping(**{"zero": ZeroStage.OPTIMIZER, **degrees})
    if m.interleaved:  # as a plan file's mapping reads (Mapping.from_dict)
        m = m.with_(schedule=Schedule.INTERLEAVED)
    assert m.world == nodes * gpus
    return PlanJob(kind=PlanKind.TRAIN, model=model, accelerator="h100-sxm5-80gb",
                   devices_per_node=gpus, nodes=nodes, mapping=m, seq_len=seq,
                   global_batch=batch, dtype=dtype)


def plan_values(m: Mapping) -> dict[str, Any]:
    """The typed values behind each plan-file key (unsupported sentences name these keys)."""
    return {"dp": m.dp, "tp": m.tp, "pp": m.pp, "cp": m.cp, "ep": m.ep, "zero": m.zero,
            "micro_batch": m.micro_batch, "vpp": m.virtual_stages, "recompute": m.recompute,
            "offload": (m.offload_optimizer, m.offload_params)}


PLANS = {
    # the reference plan: Llama 3.1 70B on 8 x 8 H100, 8192 tokens, 256 sequences per step
    "dense-70b": _job("llama-3.1-70b", 8, 8, 8192, 256, dp=4, tp=8, pp=2,
                      zero=ZeroStage.OPTIMIZER, recompute=Recompute.FULL),
    # interleaved pipeline and context parallelism, selective recompute
    "vpp-cp": _job("llama-3.1-70b", 16, 8, 16384, 128, dp=2, tp=8, pp=4, cp=2,
                   virtual_stages=5, micro_batch=1, recompute=Recompute.SELECTIVE),
    # MoE with expert parallelism (ep carved out of dp x cp)
    "moe-mixtral": _job("mixtral-8x7b", 4, 8, 4096, 512, dp=8, tp=2, pp=2, ep=8,
                        micro_batch=2),
    # MLA + shared experts + dense first layers, fp8
    "moe-dsv3": _job("deepseek-v3", 32, 8, 4096, 1024, DType.FP8, dp=32, tp=8, ep=32,
                     recompute=Recompute.FULL),
    # ZeRO-3 with optimizer and parameters on the CPU
    "offload-z3": _job("llama-3.1-8b", 1, 8, 8192, 64, dp=8, zero=ZeroStage.PARAMETERS,
                       micro_batch=2, recompute=Recompute.FULL, **CPU),
    # plain data parallel, ZeRO-0
    "ddp-z0": _job("llama-3.1-8b", 2, 8, 4096, 128, dp=16, zero=ZeroStage.NONE),
    # ZeRO-2 with TP, fp16
    "z2-fp16": _job("llama-3.1-8b", 2, 8, 4096, 64, DType.FP16, dp=8, tp=2,
                    zero=ZeroStage.GRADIENTS, micro_batch=2, recompute=Recompute.SELECTIVE),
    # ZeRO-1 with only the optimizer state on the CPU (parameters stay): no plan file says
    # this (its one "offload" key moves both), a typed Mapping can
    "offload-optimizer-z1": _job("llama-3.1-8b", 1, 8, 4096, 64, dp=4, tp=2,
                                 offload_optimizer=Offload.CPU),
}


def _named(unsupported: list[str]) -> set[str]:
    """Fields an unsupported sentence names: its ``field=value[, field=value]:`` prefix."""
    names: set[str] = set()
    for sentence in unsupported:
        head = sentence.split(": ", 1)[0]
        names |= set(re.findall(r"([a-z_]+)=", head))
    return names


@pytest.fixture(scope="module")
def results(catalog: Catalog) -> dict[tuple[str, str], Any]:
    out = {}
    for plan, job in PLANS.items():
        spec = catalog.models[job.model]
        for name, exporter in EXPORTERS.items():
            out[name, plan] = exporter.export(job, spec)
    return out


# --- round trip ---------------------------------------------------------------------------

@pytest.mark.parametrize("plan", sorted(PLANS))
@pytest.mark.parametrize("name", sorted(EXPORTERS))
def test_round_trip(results: dict[tuple[str, str], Any], name: str, plan: str) -> None:
    job, result = PLANS[plan], results[name, plan]
    back = EXPORTERS[name].read_back(result.files)
    assert isinstance(back, ReadBack) and back.serving is None
    assert (back.nodes, back.devices_per_node) == (job.nodes, job.devices_per_node)
    named = _named(result.unsupported)
    assert named <= {*MAPPING_FIELDS, "model", "dtype"}, result.unsupported
    if not named & set(MAPPING_FIELDS):  # everything expressed: the same typed Mapping
        assert back.mapping == job.mapping, (name, plan, back.mapping)
    for field, value in plan_values(job.mapping).items():
        if field in named:
            continue
        assert back.mapping is not None, f"{name}: {field} neither read back nor named"
        assert plan_values(back.mapping)[field] == value, (name, plan, field, back.mapping)


def test_slurm_expresses_only_the_cluster(results: dict[tuple[str, str], Any]) -> None:
    for plan, job in PLANS.items():
        result = results["slurm", plan]
        assert _named(result.unsupported) == set(MAPPING_FIELDS)
        assert len(result.unsupported) == 1  # said once
        assert launch.read_back(result.files) == ReadBack(nodes=job.nodes,
                                                          devices_per_node=job.devices_per_node)


def test_unsupported_sentences_where_expected(results: dict[tuple[str, str], Any]) -> None:
    ds = {plan: _named(results["deepspeed", plan].unsupported) for plan in PLANS}
    assert ds["dense-70b"] == {"pp"}
    assert ds["vpp-cp"] >= {"pp", "vpp", "cp", "recompute"}
    assert "ep" in ds["moe-mixtral"]  # AutoEP cannot combine with AutoTP
    assert "dtype" in ds["moe-dsv3"]
    assert ds["offload-z3"] == set()  # ZeRO-3 offloads both optimizer and parameters
    mg = {plan: _named(results["megatron", plan].unsupported) for plan in PLANS}
    assert mg["dense-70b"] == mg["vpp-cp"] == mg["ddp-z0"] == set()
    assert mg["offload-z3"] == {"offload"}  # optimizer offload only
    assert ds["offload-optimizer-z1"] == mg["offload-optimizer-z1"] == set()
    tt = {plan: _named(results["torchtitan", plan].unsupported) for plan in PLANS}
    assert tt["dense-70b"] == {"zero"}  # FSDP2 has no optimizer-only sharding
    assert tt["ddp-z0"] == set() and tt["offload-z3"] == set()
    assert tt["offload-optimizer-z1"] == {"zero", "offload"}  # FSDP2 offloads params too
    assert "model" in tt["moe-mixtral"]  # no registered flavor
    assert "dtype" in tt["z2-fp16"]
    for result in results.values():
        assert all(s.strip() and s[0].isalpha() for s in result.unsupported)


# --- documented keys ----------------------------------------------------------------------

# config-json.md: the sections and keys this exporter may emit
DS_KEYS: dict[str, set[str]] = {
    "": {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
         "gradient_clipping", "fp16", "bf16", "zero_optimization", "activation_checkpointing",
         "tensor_parallel", "expert_parallel", "optimizer", "scheduler", "steps_per_print",
         "wall_clock_breakdown", "communication_data_type", "torch_autocast"},
    "fp16": {"enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window",
             "hysteresis", "consecutive_hysteresis", "min_loss_scale",
             "fp16_master_weights_and_grads"},
    "bf16": {"enabled", "bf16_master_weights_and_grads", "bf16_optimizer_states"},
    "zero_optimization": {
        "stage", "allgather_partitions", "allgather_bucket_size", "compute_grad_norm",
        "overlap_comm", "reduce_scatter", "reduce_bucket_size", "contiguous_gradients",
        "load_from_fp32_weights", "round_robin_gradients", "parameter_alignment",
        "offload_param", "offload_optimizer", "stage3_max_live_parameters",
        "stage3_max_reuse_distance", "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold", "sub_group_size",
        "stage3_gather_16bit_weights_on_model_save", "zero_hpz_partition_size",
        "zero_quantized_weights", "zero_quantized_gradients", "ignore_unused_parameters"},
    "offload_param": {"device", "nvme_path", "pin_memory", "buffer_count", "buffer_size",
                      "max_in_cpu"},
    "offload_optimizer": {"device", "nvme_path", "pin_memory", "ratio", "buffer_count",
                          "fast_init"},
    "activation_checkpointing": {"partition_activations", "cpu_checkpointing",
                                 "contiguous_memory_optimization", "number_checkpoints",
                                 "synchronize_checkpoint_boundary", "profile"},
    "tensor_parallel": {"autotp_size", "preset_model", "tp_overlap_comm",
                        "vocab_parallel_lm_head", "partition_config"},
    "expert_parallel": {"enabled", "autoep_size", "expert_tensor_parallel_size",
                        "preset_model", "use_grouped_mm"},
}
# runner.py parse_args
DS_LAUNCHER_FLAGS = {"--hostfile", "--include", "--exclude", "--num_nodes", "--num_gpus",
                     "--master_port", "--master_addr", "--launcher"}

# arguments.py: flags (value-taking ones map to their documented choices, or None if free)
MEGATRON_VALUE_FLAGS: dict[str, set[str] | None] = {
    "--tensor-model-parallel-size": None, "--pipeline-model-parallel-size": None,
    "--context-parallel-size": None, "--expert-model-parallel-size": None,
    "--expert-tensor-parallel-size": None, "--num-layers-per-virtual-pipeline-stage": None,
    "--num-virtual-stages-per-pipeline-rank": None,
    "--decoder-first-pipeline-num-layers": None, "--decoder-last-pipeline-num-layers": None,
    "--data-parallel-sharding-strategy": {"no_shard", "optim", "optim_grads",
                                          "optim_grads_params"},
    "--ckpt-format": {"torch", "torch_dist", "zarr", "torch_dcp", "fsdp_dtensor"},
    "--recompute-granularity": {"full", "selective"},
    "--recompute-method": {"uniform", "block"}, "--recompute-num-layers": None,
    "--optimizer-offload-fraction": None,
    "--micro-batch-size": None, "--global-batch-size": None, "--seq-length": None,
    "--max-position-embeddings": None, "--num-layers": None, "--hidden-size": None,
    "--ffn-hidden-size": None, "--num-attention-heads": None, "--kv-channels": None,
    "--num-query-groups": None, "--normalization": {"LayerNorm", "RMSNorm"},
    "--position-embedding-type": {"learned_absolute", "rope", "mrope", "relative", "none"},
    "--rotary-percent": None, "--rotary-base": None,
    "--num-experts": None, "--moe-router-topk": None, "--moe-ffn-hidden-size": None,
    "--moe-layer-freq": None, "--moe-shared-expert-intermediate-size": None,
    "--moe-token-dispatcher-type": {"allgather", "alltoall", "flex"},
    "--q-lora-rank": None, "--kv-lora-rank": None, "--qk-head-dim": None,
    "--qk-pos-emb-head-dim": None, "--v-head-dim": None,
    "--fp8-format": {"e4m3", "hybrid"},
    "--tokenizer-type": {"GPT2BPETokenizer", "SentencePieceTokenizer", "HuggingFaceTokenizer",
                         "Llama2Tokenizer", "TikTokenizer", "NullTokenizer"},
    "--vocab-size": None, "--train-iters": None, "--lr": None,
}
MEGATRON_SWITCHES = {  # action='store_true'
    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
    "--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp",
    "--use-torch-fsdp2", "--optimizer-cpu-offload", "--use-precision-aware-optimizer",
    "--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights",
    "--disable-bias-linear", "--add-qkv-bias", "--qk-layernorm", "--multi-latent-attention",
    "--moe-router-enable-expert-bias", "--use-rope-scaling", "--bf16", "--fp16", "--mock-data",
}

# job_config.py dataclasses -> fields, and the Literal choices of the ones we set
TITAN_KEYS: dict[str, set[str]] = {
    "job": {"config_file", "dump_folder", "description", "use_for_integration_test",
            "print_args"},
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters",
              "print_after_conversion"},
    "training": {"dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len",
                 "max_norm", "steps", "enable_cpu_offload", "mixed_precision_param",
                 "mixed_precision_reduce", "gc_freq", "gc_debug", "seed", "deterministic"},
    "parallelism": {
        "data_parallel_replicate_degree", "enable_compiled_autograd",
        "data_parallel_shard_degree", "fsdp_reshard_after_forward", "tensor_parallel_degree",
        "disable_loss_parallel", "enable_async_tensor_parallel", "pipeline_parallel_degree",
        "pipeline_parallel_split_points", "module_fqns_per_model_part",
        "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
        "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
        "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size",
        "context_parallel_degree", "context_parallel_rotate_method", "expert_parallel_degree",
        "expert_tensor_parallel_degree"},
    "activation_checkpoint": {"mode", "selective_ac_option",
                              "per_op_sac_force_recompute_mm_shapes_by_fqns"},
}
TITAN_CHOICES = {
    ("activation_checkpoint", "mode"): {"selective", "full", "none"},
    ("parallelism", "fsdp_reshard_after_forward"): {"default", "always", "never"},
    ("training", "mixed_precision_param"): {"bfloat16", "float32"},
    # torch/distributed/pipelining/schedules.py get_schedule_class names
    ("parallelism", "pipeline_parallel_schedule"): {"1F1B", "Interleaved1F1B", "GPipe",
                                                    "LoopedBFS", "InterleavedZeroBubble",
                                                    "ZBVZeroBubble"},
}

# run.py get_args_parser (value-taking flags) and the positional entry points we launch
TORCHRUN_VALUE_FLAGS = {"--nnodes", "--nproc-per-node", "--rdzv-backend", "--rdzv-endpoint",
                        "--rdzv-id", "--rdzv-conf", "--max-restarts", "--master-addr",
                        "--master-port", "--node-rank"}
SBATCH_OPTIONS = {"--job-name", "--nodes", "--ntasks-per-node", "--gpus-per-node"}


def _torchrun_flags(command: str) -> tuple[dict[str, str], list[str]]:
    """torchrun's own ``--flag value`` pairs, and the rest (entry point and its arguments)."""
    words = shlex.split(command.split("torchrun", 1)[1], posix=True)
    flags: dict[str, str] = {}
    i = 0
    while i < len(words) and words[i] in TORCHRUN_VALUE_FLAGS:
        flags[words[i]] = words[i + 1]
        i += 2
    return flags, words[i:]


def test_deepspeed_keys_are_documented(results: dict[tuple[str, str], Any]) -> None:
    for plan in PLANS:
        result = results["deepspeed", plan]
        cfg = json.loads(result.files[deepspeed.CONFIG_FILE])
        assert set(cfg) <= DS_KEYS[""], plan
        for section, value in cfg.items():
            if isinstance(value, dict):
                assert set(value) <= DS_KEYS[section], (plan, section)
        for key in ("offload_param", "offload_optimizer"):
            sub = cfg["zero_optimization"].get(key)
            if sub is not None:
                assert set(sub) <= DS_KEYS[key] and sub["device"] == "cpu"
        assert cfg["zero_optimization"]["stage"] in (0, 1, 2, 3)
        words = result.launch.split()
        assert words[0] == "deepspeed"
        assert {w for w in words[:words.index("train.py")] if w.startswith("-")} \
            <= DS_LAUNCHER_FLAGS
        assert words[words.index("train.py") + 1:] == ["--deepspeed", "--deepspeed_config",
                                                      deepspeed.CONFIG_FILE]


def test_megatron_flags_are_documented(results: dict[tuple[str, str], Any]) -> None:
    for plan in PLANS:
        files = results["megatron", plan].files
        flags = megatron.parse_args_file(files[megatron.ARGS_FILE])
        for flag, value in flags.items():
            if flag in MEGATRON_SWITCHES:
                assert value is None, (plan, flag, value)
                continue
            assert flag in MEGATRON_VALUE_FLAGS, (plan, flag)
            choices = MEGATRON_VALUE_FLAGS[flag]
            assert value is not None and (choices is None or value in choices), (flag, value)
        # arguments.py _eval_pattern: a --moe-layer-freq list may use only ,digits[]()+*
        freq = flags.get("--moe-layer-freq")
        assert freq is None or re.fullmatch(r"[,\d\[\]()+*]+", freq)
        # validate_args: only one way to give virtual stages
        assert not ({"--num-layers-per-virtual-pipeline-stage",
                     "--num-virtual-stages-per-pipeline-rank"} <= set(flags))


@pytest.mark.parametrize("split", [{"first_stage_layers": 15, "last_stage_layers": 15},
                                   {"embedding_in_split": True, "loss_in_split": True}])
def test_megatron_uneven_pipeline_split(catalog: Catalog, split: dict[str, Any]) -> None:
    """126 layers over 8 stages: Megatron-LM refuses it without a split, so the flags that
    give it travel with the plan and read back."""
    job = _job("llama-3.1-405b", 64, 8, 8192, 512, dp=8, tp=8, pp=8,
               recompute=Recompute.FULL, **split)
    files = megatron.EXPORTER.export(job, catalog.models["llama-3.1-405b"]).files
    flags = megatron.parse_args_file(files[megatron.ARGS_FILE])
    for flag, value in flags.items():
        assert (value is None) if flag in MEGATRON_SWITCHES else flag in MEGATRON_VALUE_FLAGS
    back = megatron.read_back(files).mapping
    assert back is not None and {k: getattr(back, k) for k in split} == split


def test_torchtitan_keys_are_documented(results: dict[tuple[str, str], Any],
                                        catalog: Catalog) -> None:
    for plan, job in PLANS.items():
        cfg = tomllib.loads(results["torchtitan", plan].files[torchtitan.CONFIG_FILE])
        assert set(cfg) <= set(TITAN_KEYS), plan
        for section, table in cfg.items():
            assert set(table) <= TITAN_KEYS[section], (plan, section)
        for (section, key), choices in TITAN_CHOICES.items():
            if key in cfg.get(section, {}):
                assert cfg[section][key] in choices, (plan, section, key)
        parts = cfg["parallelism"].get("module_fqns_per_model_part")
        if parts:  # every layer in exactly one chunk, in order, embeddings first, head last
            layers = [f for part in parts for f in part if f.startswith("layers.")]
            n = catalog.models[job.model].n_layers
            assert layers == [f"layers.{i}" for i in range(n)]
            assert parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"]


def test_torchrun_and_sbatch_flags_are_documented(results: dict[tuple[str, str], Any]) -> None:
    entry = {"megatron": "pretrain_gpt.py", "torchtitan": "-m", "slurm": "train.py"}
    script_file = {"megatron": megatron.LAUNCH_FILE, "torchtitan": torchtitan.LAUNCH_FILE,
                   "slurm": launch.TORCHRUN_FILE}
    for (name, plan), result in results.items():
        if name == "deepspeed":
            continue
        job = PLANS[plan]
        script = result.files[script_file[name]]
        command = " ".join(line.rstrip("\\").strip() for line in script.splitlines()
                           if not line.startswith(("#", ":", "set ", "source ", "export ")))
        flags, rest = _torchrun_flags(command)
        assert set(flags) <= TORCHRUN_VALUE_FLAGS
        assert flags["--nnodes"] == str(job.nodes)
        assert flags["--nproc-per-node"] == str(job.devices_per_node)
        assert flags["--rdzv-backend"] == "c10d" and flags["--rdzv-endpoint"].startswith(
            "${MASTER_ADDR}:")
        assert rest[0] == entry[name]
        if name == "torchtitan":
            assert rest == ["-m", "torchtitan.train", "--job.config_file",
                            torchtitan.CONFIG_FILE]
        if name == "slurm":
            sbatch = result.files[launch.SBATCH_FILE]
            options = dict(re.findall(r"^#SBATCH (--[a-z-]+)=(\S+)$", sbatch, re.MULTILINE))
            assert set(options) <= SBATCH_OPTIONS
            assert options["--nodes"] == str(job.nodes)
            assert options["--gpus-per-node"] == str(job.devices_per_node)
            assert options["--ntasks-per-node"] == "1"


# --- arithmetic and launch lines ----------------------------------------------------------

@pytest.mark.parametrize("plan", sorted(PLANS))
def test_batch_arithmetic(results: dict[tuple[str, str], Any], plan: str) -> None:
    job = PLANS[plan]
    dp, micro = job.mapping.dp, job.mapping.micro_batch
    accum = job.global_batch // (dp * micro)
    ds = json.loads(results["deepspeed", plan].files[deepspeed.CONFIG_FILE])
    assert ds["train_batch_size"] == job.global_batch
    assert ds["train_batch_size"] == (ds["train_micro_batch_size_per_gpu"]
                                      * ds["gradient_accumulation_steps"] * dp)
    assert ds["gradient_accumulation_steps"] == accum
    mg = megatron.parse_args_file(results["megatron", plan].files[megatron.ARGS_FILE])
    assert mg["--global-batch-size"] == str(job.global_batch)
    assert mg["--micro-batch-size"] == str(micro)
    assert mg["--seq-length"] == str(job.seq_len)
    tt = tomllib.loads(results["torchtitan", plan].files[torchtitan.CONFIG_FILE])
    training, par = tt["training"], tt["parallelism"]
    tt_dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
    assert training["global_batch_size"] == job.global_batch
    assert job.global_batch % (training["local_batch_size"] * tt_dp) == 0
    if job.mapping.pp > 1:  # one optimizer step = one pipeline pass of `accum` micro-batches
        assert training["local_batch_size"] == accum * par["pipeline_parallel_microbatch_size"]
    else:  # torchtitan accumulates global / (local * dp) steps
        assert job.global_batch // (training["local_batch_size"] * tt_dp) == accum


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_launch_lines_have_the_cluster(results: dict[tuple[str, str], Any], plan: str) -> None:
    job = PLANS[plan]
    ds = results["deepspeed", plan].launch
    assert f"--num_nodes {job.nodes} " in ds and f"--num_gpus {job.devices_per_node} " in ds
    hostfile = results["deepspeed", plan].files[deepspeed.HOSTFILE]
    hosts = [line for line in hostfile.splitlines() if line and not line.startswith("#")]
    assert hosts == [f"node-{i} slots={job.devices_per_node}" for i in range(job.nodes)]
    for name in ("megatron", "torchtitan"):
        flags, _ = _torchrun_flags(results[name, plan].launch)
        assert flags["--nnodes"] == str(job.nodes)
        assert flags["--nproc-per-node"] == str(job.devices_per_node)
    assert results["slurm", plan].launch == f"sbatch {launch.SBATCH_FILE}"


def test_reference_plan_files(results: dict[tuple[str, str], Any]) -> None:
    """The 70B reference plan, flag by flag where it matters."""
    mg = megatron.parse_args_file(results["megatron", "dense-70b"].files[megatron.ARGS_FILE])
    assert {k: mg[k] for k in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                               "--recompute-granularity", "--recompute-method",
                               "--recompute-num-layers", "--num-query-groups")} == {
        "--tensor-model-parallel-size": "8", "--pipeline-model-parallel-size": "2",
        "--recompute-granularity": "full", "--recompute-method": "uniform",
        "--recompute-num-layers": "1", "--num-query-groups": "8"}
    assert {"--sequence-parallel", "--use-distributed-optimizer", "--swiglu", "--bf16",
            "--untie-embeddings-and-output-weights"} <= set(mg)
    assert "--num-virtual-stages-per-pipeline-rank" not in mg
    launch_sh = results["megatron", "dense-70b"].files[megatron.LAUNCH_FILE]
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in launch_sh
    ds = json.loads(results["deepspeed", "dense-70b"].files[deepspeed.CONFIG_FILE])
    assert ds["zero_optimization"] == {"stage": 1}
    assert ds["activation_checkpointing"]["partition_activations"] is True
    tt = tomllib.loads(results["torchtitan", "dense-70b"].files[torchtitan.CONFIG_FILE])
    assert tt["model"] == {"name": "llama3", "flavor": "70B"}
    assert tt["parallelism"]["pipeline_parallel_schedule"] == "1F1B"


def test_vpp_moe_and_offload_plans(results: dict[tuple[str, str], Any]) -> None:
    mg = megatron.parse_args_file(results["megatron", "vpp-cp"].files[megatron.ARGS_FILE])
    assert mg["--num-virtual-stages-per-pipeline-rank"] == "5"
    assert mg["--context-parallel-size"] == "2" and mg["--recompute-granularity"] == "selective"
    assert "--recompute-method" not in mg  # validate_args: no method with selective
    tt = tomllib.loads(results["torchtitan", "vpp-cp"].files[torchtitan.CONFIG_FILE])
    assert tt["parallelism"]["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert len(tt["parallelism"]["module_fqns_per_model_part"]) == 4 * 5
    dsv3 = megatron.parse_args_file(results["megatron", "moe-dsv3"].files[megatron.ARGS_FILE])
    assert dsv3["--moe-layer-freq"] == "[" + ",".join(["0"] * 3 + ["1"] * 58) + "]"
    assert dsv3["--moe-shared-expert-intermediate-size"] == "2048"
    assert dsv3["--fp8-format"] == "hybrid" and "--multi-latent-attention" in dsv3
    assert "--group-query-attention" not in dsv3
    mix = megatron.parse_args_file(results["megatron", "moe-mixtral"].files[megatron.ARGS_FILE])
    assert mix["--expert-model-parallel-size"] == "8" and mix["--num-experts"] == "8"
    assert mix["--moe-token-dispatcher-type"] == "alltoall"
    tt = tomllib.loads(results["torchtitan", "moe-mixtral"].files[torchtitan.CONFIG_FILE])
    assert tt["parallelism"]["expert_tensor_parallel_degree"] == 2
    ds = json.loads(results["deepspeed", "offload-z3"].files[deepspeed.CONFIG_FILE])
    assert ds["zero_optimization"]["offload_param"]["device"] == "cpu"
    assert ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    mg = megatron.parse_args_file(results["megatron", "offload-z3"].files[megatron.ARGS_FILE])
    assert mg["--data-parallel-sharding-strategy"] == "optim_grads_params"
    assert mg["--ckpt-format"] == "fsdp_dtensor"
    assert {"--optimizer-cpu-offload", "--use-precision-aware-optimizer"} <= set(mg)
    tt = tomllib.loads(results["torchtitan", "offload-z3"].files[torchtitan.CONFIG_FILE])
    assert tt["training"]["enable_cpu_offload"] is True
    assert tt["parallelism"]["fsdp_reshard_after_forward"] == "always"
    ds = json.loads(results["deepspeed", "offload-optimizer-z1"].files[deepspeed.CONFIG_FILE])
    assert ds["zero_optimization"] == {"stage": 1, "offload_optimizer": {"device": "cpu",
                                                                         "pin_memory": True}}
    mg = megatron.parse_args_file(
        results["megatron", "offload-optimizer-z1"].files[megatron.ARGS_FILE])
    assert {"--optimizer-cpu-offload", "--use-precision-aware-optimizer"} <= set(mg)
    tt = tomllib.loads(results["torchtitan", "ddp-z0"].files[torchtitan.CONFIG_FILE])
    assert tt["parallelism"]["data_parallel_replicate_degree"] == 16
    assert tt["parallelism"]["data_parallel_shard_degree"] == 1


def test_indivisible_batch_is_an_input_error(catalog: Catalog) -> None:
    job = _job("llama-3.1-8b", 1, 8, 4096, 100, dp=8)
    for exporter in EXPORTERS.values():
        if exporter.name == "slurm":
            continue
        with pytest.raises(InputError, match="not a multiple"):
            exporter.export(job, catalog.models[job.model])


def test_exporters_pin_a_version() -> None:
    for exporter in EXPORTERS.values():
        assert exporter.kinds == (PlanKind.TRAIN,)
        assert exporter.url.startswith("https://") and exporter.version
        assert re.search(r"[0-9a-f]{12}", exporter.version)


@pytest.mark.parametrize("vpp", [2, 4])
def test_megatron_layout_for_ends_that_do_not_divide_by_vpp(catalog: Catalog, vpp: int) -> None:
    """Llama 3 405B's split (7, 8 x 14, 7 over pp = 16) interleaved: Megatron refuses
    --decoder-first-pipeline-num-layers 7 with vpp > 1, so the plan travels as
    --pipeline-model-parallel-layout (pipeline_parallel_layer_layout.py: pp x vpp entries,
    the embedding first, the loss last, every decoder layer once) and reads back."""
    job = _job("llama-3.1-405b", 128, 8, 8192, 2048, dp=8, tp=8, pp=16,
               first_stage_layers=7, last_stage_layers=7, virtual_stages=vpp)
    files = megatron.EXPORTER.export(job, catalog.models["llama-3.1-405b"]).files
    flags = megatron.parse_args_file(files[megatron.ARGS_FILE])
    layout = str(flags["--pipeline-model-parallel-layout"])
    assert not {"--decoder-first-pipeline-num-layers", "--num-virtual-stages-per-pipeline-rank",
                "--decoder-last-pipeline-num-layers"} & set(flags)
    entries = layout.split("|")
    assert len(entries) == 16 * vpp and entries[0].startswith("E") and entries[-1].endswith("L")
    assert layout.count("t") == 126 and layout.count("E") == layout.count("L") == 1
    sizes = [e.count("t") for e in entries]
    assert sum(sizes[a * 16] for a in range(vpp)) == 7 == sum(sizes[a * 16 + 15]
                                                               for a in range(vpp))
    assert max(sizes) == 8 // vpp  # no end chunk larger than a middle one
    back = megatron.read_back(files).mapping
    assert back is not None and (back.first_stage_layers, back.last_stage_layers,
                                 back.virtual_stages) == (7, 7, vpp)
