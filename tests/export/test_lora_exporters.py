"""LoRA/QLoRA plans through every training exporter: what each writes (read back with json and
yaml), what each refuses or warns about, and that the adapters' names cannot inject anything.
Offline; hand-built plans.

Documented keys are transcribed from the sources each module names:
  PEFT           huggingface/peft src/peft/tuners/lora/config.py
                 @ 00a4d0808579f9bcac82c6b329cb8894bcfbd7fd (LoraConfig and PeftConfig fields)
  transformers   src/transformers/utils/quantization_config.py
                 @ 000e2231167497a632d7661a78f13e27b5d67a5d (BitsAndBytesConfig.__init__)
  NeMo           examples/nlp/language_modeling/tuning/conf/megatron_gpt_finetuning_config.yaml
                 @ 5d5919fe8a4877d260a22cd80690b7ef3acde7a0; peft_config.py
                 @ f7f901f0d9647fa8206b78add7d8eb42dc1cf7c4
  MaxText 0.2.5  maxtext/configs/types.py (class LoRA), configs/post_train/sft.yml
  torchtune 0.6.1  torchtune/models/llama3_1/_model_builders.py, modules/peft/_utils.py,
                 recipes/lora_finetune_distributed.py
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
import yaml

from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.export import nemo, peft
from accelmap.export.base import Job, PlanJob, PlanKind
from accelmap.export.formats import deepspeed, launch, maxtext, megatron, torchtitan, torchtune
from accelmap.export.registry import get_exporter
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget, Recompute

Q, K, V, O = LoraTarget.Q, LoraTarget.K, LoraTarget.V, LoraTarget.O
GATE, UP, DOWN = LoraTarget.GATE, LoraTarget.UP, LoraTarget.DOWN
ALL = tuple(LoraTarget)


def _job(model: str, nodes: int, gpus: int, batch: int, finetune: Finetune, rank: int,
         targets: tuple[LoraTarget, ...], dtype: DType = DType.BF16, **degrees: Any) -> PlanJob:
    m = Mapping(**degrees)
    assert m.world == nodes * gpus
    return PlanJob(kind=PlanKind.TRAIN, model=model, accelerator="h100-sxm5-80gb",
                   devices_per_node=gpus, nodes=nodes, mapping=m, seq_len=4096,
                   global_batch=batch, dtype=dtype, finetune=finetune, lora_rank=rank,
                   lora_targets=targets)


PLANS = {
    # LoRA on q and v (PEFT's classic choice), 8B on one node, data parallel
    "lora-qv": _job("llama-3.1-8b", 1, 8, 64, Finetune.LORA, 16, (Q, V), dp=8,
                    micro_batch=2, recompute=Recompute.FULL),
    # LoRA on every projection, 70B with tensor parallelism over two nodes
    "lora-all-tp": _job("llama-3.1-70b", 2, 8, 64, Finetune.LORA, 64, ALL, dp=4, tp=4,
                        zero=ZeroStage.OPTIMIZER),
    # QLoRA on all linear layers under ZeRO-3 (4-bit storage dtype for DeepSpeed)
    "qlora-z3": _job("llama-3.1-8b", 1, 8, 32, Finetune.QLORA, 8, ALL, dp=8,
                     zero=ZeroStage.PARAMETERS),
    # QLoRA on q, v and gate with tensor parallelism: NeMo's QLoRA cannot
    "qlora-tp": _job("llama-3.1-70b", 1, 8, 32, Finetune.QLORA, 16, (Q, V, GATE), dp=4, tp=2),
}
LORA, QLORA = "lora-qv", "qlora-z3"


def _export(name: str, plan: str, catalog: Catalog) -> Any:
    job = PLANS[plan]
    return get_exporter(name).export(job, catalog.models[job.model])


def _full(job: PlanJob) -> PlanJob:
    """The same plan training every weight."""
    return PlanJob(**{**vars(job.job), "finetune": Finetune.FULL, "lora_rank": 0,
                      "lora_targets": ()}, mapping=job.mapping)


def _named(sentences: list[str]) -> set[str]:
    names: set[str] = set()
    for s in sentences:
        names |= set(re.findall(r"([a-z_]+)=", s.split(": ", 1)[0]))
    return names


def _one_line(err: pytest.ExceptionInfo[InputError]) -> str:
    text = str(err.value)
    assert "\n" not in text and text
    return text


# --- DeepSpeed: HF PEFT + bitsandbytes ----------------------------------------------------

# LoraConfig and its PeftConfig base (fields an adapter_config.json may hold)
PEFT_KEYS = {"peft_type", "task_type", "base_model_name_or_path", "revision", "inference_mode",
             "auto_mapping", "r", "target_modules", "exclude_modules", "lora_alpha",
             "lora_dropout", "fan_in_fan_out", "bias", "use_rslora", "modules_to_save",
             "init_lora_weights", "layers_to_transform", "layers_pattern", "rank_pattern",
             "alpha_pattern", "megatron_config", "megatron_core", "loftq_config", "use_dora",
             "layer_replication"}
# BitsAndBytesConfig.__init__ keywords, and the storage dtypes it accepts as strings
BNB_KEYS = {"load_in_8bit", "load_in_4bit", "llm_int8_threshold", "llm_int8_skip_modules",
            "llm_int8_enable_fp32_cpu_offload", "llm_int8_has_fp16_weight",
            "bnb_4bit_compute_dtype", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant",
            "bnb_4bit_quant_storage"}
BNB_STORAGE = {"float16", "float32", "int8", "uint8", "float64", "bfloat16"}


def test_deepspeed_lora_writes_a_peft_config(catalog: Catalog) -> None:
    r = _export("deepspeed", LORA, catalog)
    cfg = json.loads(r.files[peft.ADAPTER_FILE])
    assert set(cfg) <= PEFT_KEYS
    assert cfg == {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 16,
                   "target_modules": ["q_proj", "v_proj"], "lora_alpha": 8,
                   "lora_dropout": 0.0, "bias": "none"}
    assert peft.BNB_FILE not in r.files and r.unsupported == []
    assert any("lora_alpha = 8" in n and "PEFT" in n for n in r.notes)
    # the DeepSpeed config is the full-training one: adapters change the model, not ZeRO
    full = get_exporter("deepspeed").export(_full(PLANS[LORA]), catalog.models["llama-3.1-8b"])
    assert r.files[deepspeed.CONFIG_FILE] == full.files[deepspeed.CONFIG_FILE]
    assert full.notes == [] and peft.ADAPTER_FILE not in full.files
    back = deepspeed.read_back(r.files)
    assert (back.finetune, back.lora_rank, back.lora_targets) == (Finetune.LORA, 16,
                                                                  frozenset({Q, V}))
    assert back.mapping == PLANS[LORA].mapping


def test_deepspeed_qlora_writes_bitsandbytes_and_the_paged_optimizer(catalog: Catalog) -> None:
    r = _export("deepspeed", QLORA, catalog)
    bnb = json.loads(r.files[peft.BNB_FILE])
    assert set(bnb) <= BNB_KEYS
    assert bnb == {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                   "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16",
                   "bnb_4bit_quant_storage": "bfloat16"}  # ZeRO-3: shardable 4-bit storage
    assert bnb["bnb_4bit_quant_storage"] in BNB_STORAGE
    assert json.loads(r.files[peft.ADAPTER_FILE])["target_modules"] == [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert any('optim="paged_adamw_32bit"' in n for n in r.notes)
    assert any("ZeRO-3" in n for n in r.notes)
    back = deepspeed.read_back(r.files)
    assert (back.finetune, back.lora_rank, back.lora_targets) == (Finetune.QLORA, 8,
                                                                  frozenset(ALL))
    # without ZeRO-3 the 4-bit weights keep bitsandbytes' default storage
    bnb = json.loads(_export("deepspeed", "qlora-tp", catalog).files[peft.BNB_FILE])
    assert "bnb_4bit_quant_storage" not in bnb


# --- Megatron-LM: NeMo PEFT overrides, and the warning ------------------------------------

NEMO_TRAINER = {"devices", "accelerator", "num_nodes", "precision", "max_steps"}
NEMO_MODEL = {"tensor_model_parallel_size", "pipeline_model_parallel_size", "global_batch_size",
              "micro_batch_size", "sequence_parallel", "activations_checkpoint_granularity",
              "activations_checkpoint_method", "activations_checkpoint_num_layers", "data",
              "peft", "restore_from_path"}
NEMO_ADDED = {"dist_ckpt_load_on_device", "use_cpu_initialization"}  # "++" keys (QLoRA guide)
NEMO_LORA = {"variant", "target_modules", "adapter_dim", "alpha", "adapter_dropout",
             "column_init_method", "row_init_method", "layer_selection", "weight_tying",
             "position_embedding_strategy"}
NEMO_TARGETS = {"attention_qkv", "attention_dense", "mlp_fc1", "mlp_fc2", "attention", "mlp",
                "all"}
NEMO_PRECISION = {16, "16", "bf16", "16-mixed", "bf16-mixed", 32}


def _nemo(files: dict[str, str]) -> dict[str, Any]:
    tree = yaml.safe_load(files[nemo.NEMO_FILE])
    assert set(tree) == {"trainer", "model"}
    assert set(tree["trainer"]) <= NEMO_TRAINER
    assert tree["trainer"]["precision"] in NEMO_PRECISION
    assert set(tree["model"]) <= NEMO_MODEL | NEMO_ADDED
    lora = tree["model"]["peft"]["lora_tuning"]
    assert set(lora) <= NEMO_LORA and set(lora["target_modules"]) <= NEMO_TARGETS
    return tree


def test_megatron_lora_warns_and_writes_nemo_overrides(catalog: Catalog) -> None:
    r = _export("megatron", LORA, catalog)
    # the args file trains every weight: said in the result and in the file itself
    assert {"finetune", "lora_rank", "lora_targets"} <= _named(r.unsupported)
    assert "train every weight" in r.unsupported[0] and nemo.NEMO_FILE in r.unsupported[0]
    assert "train EVERY weight" in r.files[megatron.ARGS_FILE]
    assert megatron.parse_args_file(r.files[megatron.ARGS_FILE])  # still a valid args file
    tree = _nemo(r.files)
    assert tree["trainer"] == {"num_nodes": 1, "devices": 8, "precision": "bf16-mixed"}
    model = tree["model"]
    assert (model["tensor_model_parallel_size"], model["pipeline_model_parallel_size"],
            model["global_batch_size"], model["micro_batch_size"]) == (1, 1, 64, 2)
    assert model["activations_checkpoint_granularity"] == "full"
    assert model["data"]["train_ds"]["max_seq_length"] == 4096
    assert model["peft"]["peft_scheme"] == "lora"
    assert model["peft"]["lora_tuning"] == {"variant": "canonical",
                                            "target_modules": ["attention_qkv"],
                                            "adapter_dim": 16, "alpha": 8,
                                            "adapter_dropout": 0.0}
    # q and v sit on the fused QKV projection: NeMo adapts k as well, and says so
    assert any(s.startswith("lora_targets=q,v: NeMo's adapters sit on whole fused")
               for s in r.unsupported)
    back = megatron.read_back(r.files)
    assert (back.finetune, back.lora_rank, back.lora_targets) == (Finetune.LORA, 16,
                                                                  frozenset({Q, K, V}))
    assert back.mapping == PLANS[LORA].mapping
    # the header's command line carries every key, one shell word each
    command = " ".join(line[1:].strip().rstrip("\\") for line in
                       r.files[nemo.NEMO_FILE].splitlines() if line.startswith("#     "))
    words = shlex.split(command)
    assert "model.peft.lora_tuning.target_modules=[attention_qkv]" in words
    assert "trainer.devices=8" in words and "model.peft.peft_scheme=lora" in words


def test_megatron_all_linear_lora_maps_every_nemo_target(catalog: Catalog) -> None:
    r = _export("megatron", "lora-all-tp", catalog)
    tree = _nemo(r.files)
    assert tree["model"]["peft"]["lora_tuning"]["target_modules"] == [
        "attention_qkv", "attention_dense", "mlp_fc1", "mlp_fc2"]
    assert tree["model"]["tensor_model_parallel_size"] == 4
    assert tree["model"]["sequence_parallel"] is True
    assert "lora_targets" not in _named(r.unsupported[1:])  # nothing widened
    assert any("zero=1" in n and "by hand" in n for n in r.notes)  # left to the user


def test_megatron_qlora(catalog: Catalog) -> None:
    r = _export("megatron", QLORA, catalog)
    tree = _nemo(r.files)
    assert tree["model"]["peft"]["peft_scheme"] == "qlora"
    assert tree["model"]["dist_ckpt_load_on_device"] is False
    assert tree["model"]["use_cpu_initialization"] is True
    assert "++model.use_cpu_initialization=true" in r.files[nemo.NEMO_FILE]
    assert megatron.read_back(r.files).finetune is Finetune.QLORA
    with pytest.raises(InputError) as err:  # NeMo's NF4 layers have no tensor parallelism
        _export("megatron", "qlora-tp", catalog)
    text = _one_line(err)
    assert "finetune=qlora" in text and "tensor parallelism" in text and "tp=2" in text


def test_nemo_quantizes_only_adapted_layers(catalog: Catalog) -> None:
    job = _job("llama-3.1-8b", 1, 8, 32, Finetune.QLORA, 8, (Q, K, V), dp=8)
    r = get_exporter("megatron").export(job, catalog.models[job.model])
    assert any("stay in 16 bits" in s for s in r.unsupported)
    assert not any("whole fused" in s for s in r.unsupported)  # q, k, v = attention_qkv


# --- torchtitan: refused --------------------------------------------------------------------

@pytest.mark.parametrize("plan", [LORA, QLORA])
def test_torchtitan_refuses_adapters(catalog: Catalog, plan: str) -> None:
    with pytest.raises(InputError) as err:
        _export("torchtitan", plan, catalog)
    text = _one_line(err)
    assert "torchtitan" in text and "every weight" in text and "torchtune" in text
    assert torchtitan.TITAN_COMMIT[:12] in text


# --- MaxText: the SFT trainer's lora block --------------------------------------------------

MAXTEXT_LORA = {"enable_lora", "lora_rank", "lora_alpha", "lora_module_path",
                "lora_weight_qtype", "lora_tile_size", "lora_restore_path"}


def _maxtext(r: Any) -> dict[str, Any]:
    cfg = yaml.safe_load(r.files[maxtext.OVERRIDES_FILE])
    assert isinstance(cfg, dict) and set(cfg["lora"]) <= MAXTEXT_LORA
    return cfg


def test_maxtext_lora_uses_the_sft_trainer(catalog: Catalog) -> None:
    r = _export("maxtext", LORA, catalog)
    cfg = _maxtext(r)
    assert cfg["base_config"] == "post_train/sft.yml"
    lora = cfg["lora"]
    assert (lora["enable_lora"], lora["lora_rank"], lora["lora_alpha"]) == (True, 16, 8.0)
    assert "lora_weight_qtype" not in lora
    path = re.compile(lora["lora_module_path"])
    for module, hit in (("decoder/layers/self_attention/query", True),
                        ("decoder/layers_3/self_attention/value", True),
                        ("decoder/layers/5/self_attention/value", True),
                        ("decoder/layers/self_attention/key", False),
                        ("decoder/layers/mlp/wi_0", False)):
        assert bool(path.search(module)) is hit, module
    # the same keys as the full-training export, plus the lora block (and the SFT base)
    full = yaml.safe_load(get_exporter("maxtext").export(
        _full(PLANS[LORA]), catalog.models["llama-3.1-8b"]).files[maxtext.OVERRIDES_FILE])
    assert {k: v for k, v in cfg.items() if k not in ("lora", "base_config")} == {
        k: v for k, v in full.items() if k != "base_config"}
    words = shlex.split(r.launch)
    assert words[:4] == ["python3", "-m", "maxtext.trainers.post_train.sft.train_sft",
                         "src/maxtext/configs/post_train/sft.yml"]
    launched = dict(w.split("=", 1) for w in words[4:])
    assert launched["lora.lora_rank"] == "16" and launched["lora.enable_lora"] == "true"
    assert launched["lora.lora_module_path"] == lora["lora_module_path"]
    back = maxtext.read_back(r.files)
    assert (back.finetune, back.lora_rank, back.lora_targets) == (Finetune.LORA, 16,
                                                                  frozenset({Q, V}))
    assert any("lora_alpha = 8" in n for n in r.notes)


def test_maxtext_qlora_and_what_it_cannot(catalog: Catalog) -> None:
    cfg = _maxtext(_export("maxtext", QLORA, catalog))
    lora = cfg["lora"]
    # every projection: MaxText's verified per-model path ("" = default)
    assert (lora["lora_weight_qtype"], lora["lora_tile_size"], lora["lora_module_path"]) == (
        "nf4", 64, "")
    r = _export("maxtext", "qlora-tp", catalog)
    assert re.compile(_maxtext(r)["lora"]["lora_module_path"]).search("decoder/layers/mlp/wi_0")
    assert maxtext.read_back(r.files).lora_targets == frozenset({Q, V, GATE})
    # the SFT trainer has no optimizer host offload
    job = _job("llama-3.1-8b", 1, 8, 64, Finetune.LORA, 16, (Q, V), dp=8,
               zero=ZeroStage.OPTIMIZER, offload_optimizer=Offload.CPU)
    r = get_exporter("maxtext").export(job, catalog.models[job.model])
    assert "offload" in _named(r.unsupported)
    assert _maxtext(r)["optimizer_memory_host_offload"] is False
    # a model whose MaxText module names differ: its default path, and said
    job = _job("gemma-2-9b", 1, 8, 64, Finetune.LORA, 16, (Q, V), dp=8)
    r = get_exporter("maxtext").export(job, catalog.models[job.model])
    assert _maxtext(r)["lora"]["lora_module_path"] == "" and "lora_targets" in _named(
        r.unsupported)


# --- torchtune: the LoRA/QLoRA recipes ------------------------------------------------------

TUNE_MODEL = {"_component_", "lora_attn_modules", "apply_lora_to_mlp", "apply_lora_to_output",
              "lora_rank", "lora_alpha", "lora_dropout", "use_dora", "quantize_base"}
TUNE_KEYS = {"model", "batch_size", "gradient_accumulation_steps", "dtype",
             "enable_activation_checkpointing", "enable_activation_offloading",
             "fsdp_cpu_offload", "fsdp_reshard_after_forward", "clip_grad_norm"}
TUNE_ATTN = {"q_proj", "k_proj", "v_proj", "output_proj"}  # LORA_ATTN_MODULES


def _tune(r: Any) -> dict[str, Any]:
    keys = yaml.safe_load(r.files[torchtune.CONFIG_FILE])
    assert set(keys) <= TUNE_KEYS and set(keys["model"]) <= TUNE_MODEL
    assert set(keys["model"]["lora_attn_modules"]) <= TUNE_ATTN
    return keys


def test_torchtune_lora(catalog: Catalog) -> None:
    r = _export("torchtune", LORA, catalog)
    keys = _tune(r)
    assert keys["model"] == {"_component_": "torchtune.models.llama3_1.lora_llama3_1_8b",
                             "lora_attn_modules": ["q_proj", "v_proj"],
                             "apply_lora_to_mlp": False, "apply_lora_to_output": False,
                             "lora_rank": 16, "lora_alpha": 8.0, "lora_dropout": 0.0}
    assert (keys["batch_size"], keys["gradient_accumulation_steps"]) == (2, 4)  # 2 x 8 x 4
    assert keys["enable_activation_checkpointing"] is True and keys["dtype"] == "bf16"
    words = shlex.split(r.launch.replace("${", "").replace("}", ""))
    assert words[:2] == ["tune", "run"]
    recipe = words.index("lora_finetune_distributed")
    assert words[recipe + 1:recipe + 3] == ["--config", "llama3_1/8B_lora"]
    assert words[words.index("--nproc-per-node") + 1] == "8"
    assert "model.lora_attn_modules=[q_proj,v_proj]" in words
    back = torchtune.read_back(r.files)
    assert (back.nodes, back.devices_per_node) == (1, 8)
    assert (back.finetune, back.lora_rank, back.lora_targets) == (Finetune.LORA, 16,
                                                                  frozenset({Q, V}))
    assert back.mapping is not None and back.mapping.dp == 8


def test_torchtune_qlora_and_what_it_cannot(catalog: Catalog) -> None:
    r = _export("torchtune", QLORA, catalog)
    keys = _tune(r)
    assert keys["model"]["_component_"] == "torchtune.models.llama3_1.qlora_llama3_1_8b"
    assert keys["model"]["apply_lora_to_mlp"] is True
    assert keys["fsdp_reshard_after_forward"] is True  # ZeRO-3
    assert torchtune.read_back(r.files).finetune is Finetune.QLORA
    assert any("paged" in n for n in r.notes)
    r = _export("torchtune", "qlora-tp", catalog)  # tp and a partial MLP
    assert {"tp", "lora_targets"} <= _named(r.unsupported)
    assert _tune(r)["gradient_accumulation_steps"] == 4  # 32 over 8 GPUs x micro-batch 1
    one = _job("llama-3.1-8b", 1, 1, 8, Finetune.QLORA, 8, ALL)
    r = get_exporter("torchtune").export(one, catalog.models[one.model])
    assert "lora_finetune_single_device" in r.launch and "fsdp_cpu_offload" not in _tune(r)
    with pytest.raises(InputError) as err:  # no builder for the model
        get_exporter("torchtune").export(
            _job("gemma-2-9b", 1, 8, 64, Finetune.LORA, 16, (Q, V), dp=8),
            catalog.models["gemma-2-9b"])
    assert "gemma-2-9b" in _one_line(err)
    with pytest.raises(InputError) as err:  # a full fine-tune is torchtitan's
        get_exporter("torchtune").export(_full(PLANS[LORA]), catalog.models["llama-3.1-8b"])
    assert "torchtitan" in _one_line(err)


# --- Slurm, serving exporters ------------------------------------------------------------------

def test_slurm_says_the_adapters_belong_to_the_framework(catalog: Catalog) -> None:
    r = _export("slurm", QLORA, catalog)
    assert len(r.unsupported) == 2 and "finetune" in _named(r.unsupported[1:])
    assert launch.read_back(r.files).nodes == 1


def test_training_only_plans_and_every_train_exporter_listed() -> None:
    for name in ("vllm", "sglang"):  # a fine-tune plan is a train plan: not theirs
        assert PlanKind.TRAIN not in get_exporter(name).kinds
    assert get_exporter("torchtune").kinds == (PlanKind.TRAIN,)


# --- the plan file's adapters are enums ----------------------------------------------------------

BASE = {"kind": "train", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
        "devices_per_node": 8, "nodes": 1, "finetune": "lora", "lora_rank": 16,
        "lora_targets": ["q", "v"]}


@pytest.mark.parametrize("change", [
    {"lora_targets": ["q", "v;rm -rf /"]}, {"lora_targets": ["q\n#"]},
    {"lora_targets": ["$(touch x)"]}, {"lora_targets": ["q_proj"]},
    {"lora_targets": ["q", None]}, {"lora_targets": "q,v"}, {"lora_targets": {"q": 1}},
    {"finetune": "lora'; touch x"}, {"finetune": "LORA"}, {"lora_rank": "16"},
    {"lora_rank": 0}, {"lora_rank": True}, {"lora_targets": []},
], ids=lambda c: repr(c)[:40])
def test_odd_adapter_values_are_refused(change: dict[str, Any]) -> None:
    with pytest.raises(InputError) as err:
        Job.from_dict({**BASE, **change})
    _one_line(err)


def test_adapter_values_read_as_enums() -> None:
    job = Job.from_dict(BASE)
    assert job.finetune is Finetune.LORA and job.lora_targets == (Q, V)
    assert Job.from_dict(job.to_dict()) == job
    with pytest.raises(InputError):  # typed jobs are checked too
        Job(**{**vars(job), "lora_targets": ("q; touch x",)})  # type: ignore[arg-type]
