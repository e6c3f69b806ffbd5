"""Export and read back is the identity (hypothesis, 500 examples each):

- a plan file's job (``accelmap plan --json``'s ``job`` block with a plan's ``mapping``) read as
  a typed PlanJob and written again is the same JSON, key order included, and the typed value
  written and read is the same value; through a file and ``load_plan_file`` too;
- every registered exporter's files parse as what they are (JSON, TOML, YAML, shell lines), and
  its ``read_back`` gives the plan's cluster shape and every mapping field it does not name as
  unsupported (the convention of tests/export/test_training_exporters.py).

Only the exporters' public interface is used (export, read_back, unsupported); an exporter may
refuse a plan it cannot express with one InputError line.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from accelmap.catalog import load_catalog
from accelmap.cost.framework import Framework
from accelmap.cost.schedules import Schedule
from accelmap.errors import InputError
from accelmap.export.base import (
    SAFE_NAME,
    Job,
    PlanJob,
    PlanKind,
    ServingChoice,
    load_plan_file,
)
from accelmap.export.registry import exporters
from accelmap.mapping.plan import Mapping, Offload, ZeroStage
from accelmap.units import DType
from accelmap.workload import Finetune, LoraTarget, Recompute

CAT = load_catalog()
EXAMPLES = 500
counts = st.integers(1, 64)
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# catalog ids, and any name SAFE_NAME takes (a Hub repo id such as org/Model-1.5B+x)
names = st.one_of(st.sampled_from(sorted(CAT.models)),
                  st.builds(str.__add__, st.sampled_from(_ALNUM),
                            st.text(alphabet=_ALNUM + "._/+-", max_size=60)))


@st.composite
def training_mappings(draw: st.DrawFn, dp: int | None = None) -> Mapping:
    """A training mapping as a plan file can say it: one offload key for both, the schedule
    written only where it is not the default, the split fields only when set."""
    vpp = draw(st.integers(1, 4))
    default = Schedule.INTERLEAVED if vpp > 1 else Schedule.ONE_F_ONE_B
    dp = draw(counts) if dp is None else dp
    off = draw(st.sampled_from([Offload.NONE, Offload.CPU]))
    return Mapping(
        dp=dp, tp=draw(counts), pp=draw(counts), cp=draw(st.integers(1, 8)),
        ep=draw(st.integers(1, 8)), zero=ZeroStage(draw(st.integers(0, 3))),
        micro_batch=draw(counts), virtual_stages=vpp,
        schedule=draw(st.sampled_from([default, *Schedule])),
        recompute=draw(st.sampled_from(list(Recompute))), offload_optimizer=off,
        offload_params=off,
        shard_group=draw(st.one_of(st.none(), counts.filter(lambda g: g != dp))),
        tp_comm_overlap=draw(st.booleans()),
        first_stage_layers=draw(st.one_of(st.none(), counts)),
        last_stage_layers=draw(st.one_of(st.none(), counts)),
        embedding_in_split=draw(st.booleans()), loss_in_split=draw(st.booleans()))


@st.composite
def plan_jobs(draw: st.DrawFn) -> PlanJob:
    kind = draw(st.sampled_from(list(PlanKind)))
    finetune = draw(st.sampled_from(list(Finetune))) if kind is PlanKind.TRAIN \
        else Finetune.FULL
    lora = finetune is not Finetune.FULL
    if kind is PlanKind.TRAIN:
        mapping, serving = draw(training_mappings()), None
    else:
        mapping = Mapping.serving(draw(counts), draw(counts), draw(counts), draw(counts))
        serving = ServingChoice(draw(st.integers(1, 4096)), draw(st.sampled_from(list(DType))),
                                draw(st.sampled_from(list(DType))),
                                draw(st.one_of(st.none(), st.integers(1, 1 << 20))))
    return PlanJob(
        kind=kind, model=draw(names), accelerator=draw(st.sampled_from(sorted(CAT.accelerators))),
        devices_per_node=draw(counts), nodes=draw(st.integers(1, 4096)),
        seq_len=draw(st.integers(1, 1 << 20)), global_batch=draw(st.integers(1, 1 << 16)),
        dtype=draw(st.sampled_from(list(DType))), prompt_len=draw(st.integers(0, 1 << 20)),
        output_len=draw(st.integers(0, 1 << 20)),
        framework=draw(st.one_of(st.none(), st.sampled_from(list(Framework)))),
        finetune=finetune, lora_rank=draw(st.integers(1, 512)) if lora else 0,
        lora_targets=tuple(draw(st.lists(st.sampled_from(list(LoraTarget)), min_size=1,
                                         unique=True))) if lora else (),
        mapping=mapping, serving=serving)


@settings(max_examples=EXAMPLES)
@given(plan_jobs())
def test_plan_job_json_round_trip(job: PlanJob) -> None:
    data = job.to_dict()
    text = json.dumps(data)
    back = PlanJob.from_dict(json.loads(text))
    assert back == job
    assert SAFE_NAME.fullmatch(job.model)
    assert json.dumps(back.to_dict()) == text  # same keys, order and values
    block = {k: v for k, v in data.items() if k != "mapping"}
    assert Job.from_dict(json.loads(json.dumps(block))) == job.job
    assert json.dumps(job.job.to_dict()) == json.dumps(block)


@settings(max_examples=50)
@given(plan_jobs(), st.integers(0, 2))
def test_plan_file_round_trip(tmp_path_factory: pytest.TempPathFactory, job: PlanJob,
                              index: int) -> None:
    """As `accelmap export --from plan.json --index N` reads a file `accelmap plan --json`
    wrote: the job block and the N-th plan's mapping (50 examples: each writes a file)."""
    data = job.to_dict()
    mapping = data.pop("mapping")
    plans = [{"mapping": mapping if i == index else {}, "rank": i} for i in range(3)]
    path = Path(tmp_path_factory.mktemp("plan")) / "plan.json"
    path.write_text(json.dumps({"job": data, "plans": plans}), encoding="utf-8")
    assert load_plan_file(path, index) == job


# -- exporters -------------------------------------------------------------------------------

MODELS = sorted(CAT.models)


def parse_files(files: dict[str, str]) -> None:
    """Each written file parses as what its name says."""
    for name, text in files.items():
        if name.endswith(".json"):
            json.loads(text)
        elif name.endswith(".toml"):
            tomllib.loads(text)
        elif name.endswith((".yml", ".yaml")):
            yaml.safe_load(text)
        else:  # shell scripts, sbatch files, hostfiles: they split into words (quotes close)
            shlex.split(text, comments=True)


def named(unsupported: list[str]) -> set[str]:
    """Fields an unsupported sentence names: its ``field=value[, field=value]:`` prefix."""
    out: set[str] = set()
    for sentence in unsupported:
        out |= set(re.findall(r"([a-z_]+)=", sentence.split(": ", 1)[0]))
    return out


def plan_values(mapping: Mapping, serving: ServingChoice | None) -> dict[str, Any]:
    """The typed values behind each plan-file key."""
    m = mapping
    if serving is not None:
        return {"tp": m.tp, "pp": m.pp, "ep": m.ep, "replicas": m.replicas,
                "batch": serving.batch, "weight_dtype": serving.weight_dtype,
                "kv_dtype": serving.kv_dtype, "max_batched_tokens": serving.max_tokens}
    return {"dp": m.dp, "tp": m.tp, "pp": m.pp, "cp": m.cp, "ep": m.ep, "zero": m.zero,
            "micro_batch": m.micro_batch, "vpp": m.virtual_stages, "recompute": m.recompute,
            "offload": (m.offload_optimizer, m.offload_params)}


@st.composite
def exportable_jobs(draw: st.DrawFn) -> PlanJob:
    """A full (not LoRA) plan on a GPU cluster whose mapping fills it, whose batch divides
    into micro-batches and whose stages into chunks (exporters refuse what their framework
    cannot run)."""
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = draw(st.sampled_from([1, 2, 4, 8]))
    world = per_node * nodes
    if draw(st.booleans()):
        spec = CAT.models[draw(st.sampled_from(MODELS))]
        tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if world % t == 0]))
        pp = draw(st.sampled_from([p for p in (1, 2, 4) if world % (tp * p) == 0]))
        eps = [e for e in (1, 2, 4, 8) if tp % e == 0 or e % tp == 0] if spec.moe else [1]
        mapping = Mapping.serving(tp, pp, draw(st.sampled_from(eps)), world // (tp * pp))
        weights = draw(st.sampled_from([DType.BF16, DType.FP16, DType.FP8]))
        # a 16-bit KV cache in the 16-bit weights' dtype: fp16 weights with a bf16 cache is
        # test_kv_cache_in_the_other_16_bit_dtype below
        kv = draw(st.sampled_from([weights if weights.bytes == 2 else DType.BF16, DType.FP8]))
        serving = ServingChoice(draw(st.integers(1, 1024)), weights, kv,
                                draw(st.one_of(st.none(), st.sampled_from([2048, 8192]))))
        return PlanJob(kind=PlanKind.SERVE, model=spec.id, accelerator="h100-sxm5-80gb",
                       devices_per_node=per_node, nodes=nodes, mapping=mapping,
                       serving=serving, seq_len=4096, prompt_len=2048, output_len=256)
    spec = CAT.models[draw(st.sampled_from(MODELS))]
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8)
                               if world % t == 0 and spec.n_heads % t == 0]))
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if world % (tp * p) == 0
                               and spec.n_layers % p == 0]))
    cp = draw(st.sampled_from([c for c in (1, 2) if world % (tp * pp * c) == 0]))
    dp = world // (tp * pp * cp)
    experts = spec.moe.num_experts if spec.moe else 1
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (dp * cp) % e == 0
                               and experts % e == 0]))
    vpp = draw(st.sampled_from([1, 2])) if pp > 1 and spec.n_layers % (2 * pp) == 0 else 1
    m = draw(training_mappings(dp=dp))
    m = m.with_(tp=tp, pp=pp, cp=cp, ep=ep, shard_group=None, tp_comm_overlap=False,
                first_stage_layers=None, last_stage_layers=None, embedding_in_split=False,
                loss_in_split=False, micro_batch=draw(st.sampled_from([1, 2, 4])),
                virtual_stages=vpp,
                schedule=Schedule.INTERLEAVED if vpp > 1 else Schedule.ONE_F_ONE_B)
    batch = dp * m.micro_batch * draw(st.integers(1, 16)) * (pp if vpp > 1 else 1)
    return PlanJob(kind=PlanKind.TRAIN, model=spec.id, accelerator="h100-sxm5-80gb",
                   devices_per_node=per_node, nodes=nodes, mapping=m,
                   seq_len=draw(st.sampled_from([2048, 4096, 8192])), global_batch=batch,
                   dtype=draw(st.sampled_from([DType.BF16, DType.FP16, DType.FP8])))


@settings(max_examples=EXAMPLES)
@given(exportable_jobs())
def test_every_exporter_reads_back_what_it_wrote(job: PlanJob) -> None:
    spec = CAT.models[job.model]
    ran = 0
    for exporter in exporters().values():
        if job.kind not in exporter.kinds:
            continue
        try:
            result = exporter.export(job, spec)
        except InputError as e:  # a refusal: one line naming what the framework cannot do
            assert "\n" not in str(e)
            continue
        ran += 1
        parse_files(result.files)
        back = exporter.read_back(result.files)
        if back.nodes is not None:
            assert (back.nodes, back.devices_per_node) == (job.nodes, job.devices_per_node)
        said = named(result.unsupported)
        if back.mapping is None:  # a launcher that carries the cluster only (slurm)
            continue
        want = plan_values(job.mapping, job.serving)
        got = plan_values(back.mapping, back.serving if job.serving else None)
        for key, value in want.items():
            if key not in said:
                assert got[key] == value, (exporter.name, key, got[key], value)
    assume(ran > 0)


@pytest.mark.parametrize("name", ["vllm", "sglang"])
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "fp16 weights with a bf16 KV cache: the serving exporters write --kv-cache-dtype auto "
    "(the model's fp16) and do not name kv_dtype as unsupported"))
def test_kv_cache_in_the_other_16_bit_dtype(name: str) -> None:
    """Found by test_every_exporter_reads_back_what_it_wrote: the plan's bf16 KV cache reads
    back as fp16 (the same bytes, so no estimate changes; the file does not say the plan)."""
    job = PlanJob(kind=PlanKind.SERVE, model="llama-3.1-8b", accelerator="h100-sxm5-80gb",
                  devices_per_node=1, nodes=1, mapping=Mapping.serving(1, 1, 1, 1),
                  serving=ServingChoice(8, DType.FP16, DType.BF16), seq_len=4096,
                  prompt_len=1024, output_len=256)
    exporter = exporters()[name]
    result = exporter.export(job, CAT.models[job.model])
    back = exporter.read_back(result.files)
    assert back.serving is not None
    assert back.serving.kv_dtype is DType.BF16 or "kv_dtype" in named(result.unsupported)
