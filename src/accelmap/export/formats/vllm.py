"""vLLM: a serving plan as ``vllm serve`` command lines (serve.sh).

Pinned to vLLM 0.33.0. Every flag below was read in that release (the PyPI wheel
``vllm-0.33.0``, whose ``vllm/_version.py`` says 0.33.0): ``vllm/engine/arg_utils.py``
(``EngineArgs.add_cli_args``), the choices in ``vllm/config/model.py`` (``ModelDType``),
``vllm/config/cache.py`` (``CacheDType``), ``vllm/model_executor/layers/quantization/__init__.py``
(``QuantizationMethods``), and ``vllm/entrypoints/common/cli_args.py`` (``FrontendArgs``:
``--host``, ``--port``); ``vllm serve [model_tag]`` is ``vllm/entrypoints/cli/serve.py``.

Mapping (plan field -> vLLM):

- replicas: one independent ``vllm serve`` per replica, on its own GPUs (CUDA_VISIBLE_DEVICES)
  and port. arg_utils.py: "For external load balancing, launch independent vLLM instances without
  --data-parallel-* arguments". ``--data-parallel-size`` is not used: with
  ``--enable-expert-parallel`` it would widen the expert group to tp x dp (ParallelConfig
  ``data_parallel_size``: "MoE layers will be sharded according to the product of the tensor,
  prefill-context, and data parallel sizes"), which is not the plan's ep.
- tp, pp: ``--tensor-parallel-size``, ``--pipeline-parallel-size``. A replica wider than a node
  runs on several nodes with ``--nnodes``, ``--node-rank``, ``--master-addr`` (the mp backend;
  ranks above 0 run headless, serve.py ``node_rank_within_dp > 0``).
- ep: ``--enable-expert-parallel`` ("Use expert parallelism instead of tensor parallelism for MoE
  layers", ParallelConfig) makes the expert group the whole tensor-parallel group, so only
  ep == tp (or ep == 1) is expressible.
- batch: ``--max-num-seqs`` (per replica, as the plan's batch is; for a plan of the
  offline/server scenarios, the scheduler cap it was simulated under).
- max_batched_tokens (offline/server scenario plans): ``--max-num-batched-tokens``, the
  scheduler's token budget per iteration the plan was simulated with (written explicitly: the
  ``vllm serve`` default, 8192 on large GPUs, differs from the offline ``LLM`` class's 16384).
- weight_dtype: bf16/fp16 -> ``--dtype bfloat16|float16``; fp8 -> ``--quantization fp8`` (online
  FP8 of a 16-bit checkpoint); int8 and int4 need a pre-quantized checkpoint (GPTQ/AWQ ...), whose
  method vLLM reads from its config: named in ``unsupported``, never invented here.
- kv_dtype: ``--kv-cache-dtype fp8`` or ``auto`` (= the model dtype).
- context: ``--max-model-len`` = prompt + output rounded up (see :func:`context_length`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from accelmap.export.base import (
    FRAMEWORK_REASON,
    SERVE_LEN_REASON,
    Exporter,
    ExportResult,
    PlanJob,
    PlanKind,
    ReadBack,
    ServingChoice,
    register,
)
from accelmap.mapping.plan import Mapping
from accelmap.units import DType

VERSION = "0.33.0"
URL = "https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/engine/arg_utils.py"

# Catalog model id -> Hugging Face repo id (the base checkpoints the catalog entries describe,
# as their model cards on huggingface.co name them). Others: the catalog id, with a note.
HF_REPOS: dict[str, str] = {
    "llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "llama-2-13b": "meta-llama/Llama-2-13b-hf",
    "llama-2-70b": "meta-llama/Llama-2-70b-hf",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B",
    "mistral-7b": "mistralai/Mistral-7B-v0.1",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
    "qwen2-57b-a14b": "Qwen/Qwen2-57B-A14B",
    "qwen2.5-7b": "Qwen/Qwen2.5-7B",
    "qwen2.5-72b": "Qwen/Qwen2.5-72B",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "gemma-2-9b": "google/gemma-2-9b",
    "gemma-2-27b": "google/gemma-2-27b",
    "phi-3-mini": "microsoft/Phi-3-mini-4k-instruct",
    "falcon-180b": "tiiuae/falcon-180B",
    "mpt-7b": "mosaicml/mpt-7b",
    "mpt-30b": "mosaicml/mpt-30b",
    "bloom-176b": "bigscience/bloom",
    "gpt-j-6b": "EleutherAI/gpt-j-6b",
}

# Maximum model length is rounded up to a multiple of this many tokens: a tidy bound above
# prompt + output (no framework rule asks for it), capped at the model's own window.
LENGTH_STEP = 256

# The 16-bit compute dtype names of ModelDType (vllm/config/model.py), both ways.
HALF_NAMES = {DType.BF16: "bfloat16", DType.FP16: "float16"}
HALF_FROM_NAME = {"bfloat16": DType.BF16, "float16": DType.FP16, "half": DType.FP16}


def model_path(job: PlanJob, unsupported: list[str]) -> str:
    """The Hugging Face repo id of the catalog model, else the catalog id and a note."""
    repo = HF_REPOS.get(job.model)
    if repo is None:
        unsupported.append(f"model: no Hugging Face repo id known for {job.model!r}; set the "
                           "model path in the launch command")
        return job.model
    return repo


def context_length(job: PlanJob, spec: Any, unsupported: list[str]) -> int:
    """prompt + output (or the job's sequence) rounded up to LENGTH_STEP, not past the model's
    window unless the plan itself needs more (then a note: engines refuse that by default)."""
    need = job.prompt_len + job.output_len or job.seq_len
    rounded = -(-need // LENGTH_STEP) * LENGTH_STEP
    window = int(getattr(spec, "max_seq_len", rounded))
    if need > window:
        unsupported.append(f"context: prompt + output = {need} tokens exceeds {job.model}'s "
                           f"{window}-token window; the engine refuses it unless overridden")
        return need
    return min(rounded, window)


def serving(job: PlanJob) -> ServingChoice:
    """The serving choices of a serve plan (PlanJob guarantees them)."""
    assert job.serving is not None, "a serve plan carries its ServingChoice"
    return job.serving


def half_dtype(job: PlanJob) -> DType:
    """The 16-bit format of the plan: fp16 where it says so (weights, KV or job), else bf16."""
    s = serving(job)
    halves = {s.weight_dtype, s.kv_dtype, job.dtype}
    return DType.FP16 if DType.FP16 in halves else DType.BF16


def weight_note(engine: str, weight: DType, unsupported: list[str]) -> None:
    """int8 / int4 weight-only plans need a checkpoint quantized offline."""
    if weight in (DType.INT8, DType.INT4):
        bits = "8" if weight is DType.INT8 else "4"
        unsupported.append(
            f"weight_dtype={weight}: {engine} has no online {bits}-bit weight-only quantization "
            f"of dense layers; point the model path at a pre-quantized {bits}-bit checkpoint "
            "(GPTQ/AWQ), whose method the engine reads from its config; exported with 16-bit "
            "weights")


@dataclass(frozen=True)
class Slot:
    """Where one replica (or its share on one node) runs."""

    replica: int
    node: int  # node index in the cluster
    node_rank: int  # this node's rank inside the replica (0 = head)
    nnodes: int  # nodes the replica spans
    gpus: tuple[int, ...]  # local device indices on that node


def place_replicas(job: PlanJob, unsupported: list[str]) -> list[Slot]:
    """Replicas packed onto nodes in order: several per node when tp x pp fits in one node,
    else each on ceil(tp x pp / devices_per_node) whole nodes."""
    m = job.mapping
    width, replicas = m.devices_per_replica, m.replicas
    per_node = job.devices_per_node
    slots: list[Slot] = []
    if width <= per_node:
        fit = per_node // width
        for r in range(replicas):
            first = (r % fit) * width
            slots.append(Slot(r, r // fit, 0, 1, tuple(range(first, first + width))))
    else:
        span = -(-width // per_node)
        if width % span or width // span > per_node:
            unsupported.append(f"tp x pp = {width} devices do not split evenly over {span} "
                               f"nodes of {per_node}")
        for r in range(replicas):
            slots.extend(Slot(r, r * span + i, i, span, tuple(range(width // span)))
                         for i in range(span))
    if slots and slots[-1].node >= job.nodes:
        unsupported.append(f"replicas: {replicas} x tp x pp = {m.world} devices exceed "
                           f"the cluster's {job.devices}")
    return slots


def shell_script(title: list[str], by_node: dict[int, list[str]]) -> str:
    """A bash script that runs each node's commands in the background and waits."""
    lines = ["#!/usr/bin/env bash", *(f"# {t}" for t in title), "set -euo pipefail",
             'case "${NODE_RANK:-0}" in']
    for node, cmds in sorted(by_node.items()):
        lines.append(f"  {node})")
        lines.extend(f"    {c}" for c in cmds)
        lines.append("    ;;")
    lines += ["esac", "wait", ""]
    return "\n".join(lines)


def commands(text: str, program: tuple[str, ...]) -> list[dict[str, str]]:
    """Each line of a script that runs ``program`` as {flag: value} ('' for a bare switch);
    the first positional argument after the program is stored under '_'."""
    out: list[dict[str, str]] = []
    n = len(program)
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        toks = shlex.split(line, comments=True)
        starts = [i for i in range(len(toks)) if tuple(toks[i:i + n]) == program]
        if not starts:
            continue
        args = [t for t in toks[starts[0] + n:] if t != "&"]
        flags: dict[str, str] = {}
        i = 0
        while i < len(args):
            a = args[i]
            if a.startswith("--"):
                if i + 1 < len(args) and not args[i + 1].startswith("--"):
                    flags[a] = args[i + 1]
                    i += 2
                    continue
                flags[a] = ""
            elif "_" not in flags:
                flags["_"] = a
            i += 1
        out.append(flags)
    return out


def launch_line(nodes: int) -> str:
    """How to start serve.sh: once, or on every node with its NODE_RANK."""
    if nodes == 1:
        return "bash serve.sh"
    return f"NODE_RANK=<0..{nodes - 1}> bash serve.sh  # on each of the {nodes} nodes"


def serving_choice(flags: dict[str, str], batch_flag: str,
                   tokens_flag: str | None = None) -> ServingChoice:
    """The batch (from ``batch_flag``), token budget (from ``tokens_flag``, when given and
    present), weight and KV dtypes of one command line, from the --dtype, --quantization and
    --kv-cache-dtype flags that vLLM and SGLang share."""
    half = HALF_FROM_NAME.get(flags.get("--dtype", "bfloat16"), DType.BF16)
    tokens = flags.get(tokens_flag) if tokens_flag else None
    return ServingChoice(
        batch=int(flags.get(batch_flag, "0")),
        weight_dtype=DType.FP8 if flags.get("--quantization") == "fp8" else half,
        kv_dtype=DType.FP8 if flags.get("--kv-cache-dtype", "auto").startswith("fp8") else half,
        max_tokens=None if tokens is None else int(tokens))


def export(job: PlanJob, spec: Any) -> ExportResult:
    m, choice = job.mapping, serving(job)
    unsupported: list[str] = []
    tp, pp, ep = m.tp, m.pp, m.ep
    weight, kv = choice.weight_dtype, choice.kv_dtype
    half = half_dtype(job)
    flags = [f"--tensor-parallel-size {tp}", f"--pipeline-parallel-size {pp}"]
    if ep > 1 and ep == tp:
        flags.append("--enable-expert-parallel")  # expert group = the tp group (ep == tp)
    elif ep > 1:
        unsupported.append(f"ep={ep}: vLLM's --enable-expert-parallel spreads experts over the "
                           f"whole tensor-parallel group (ep = tp = {tp}); an expert group "
                           "smaller than tp is not expressible; exported without it")
    if m.dp_attention:
        unsupported.append(f"dp_attention=True: vLLM runs attention data-parallel with "
                           f"--data-parallel-size {tp} --tensor-parallel-size 1 "
                           "--enable-expert-parallel, one engine per data-parallel rank, which "
                           "this exporter does not write; exported with attention split by tp")
    flags.append(f"--max-num-seqs {choice.batch}")
    if choice.max_tokens is not None:
        flags.append(f"--max-num-batched-tokens {choice.max_tokens}")
    flags.append(f"--max-model-len {context_length(job, spec, unsupported)}")
    flags.append(f"--dtype {HALF_NAMES[half]}")
    if weight is DType.FP8:
        flags.append("--quantization fp8")  # online FP8 (QuantizationMethods "fp8")
    weight_note("vLLM", weight, unsupported)
    flags.append(f"--kv-cache-dtype {'fp8' if kv is DType.FP8 else 'auto'}")
    model = shlex.quote(model_path(job, unsupported))
    by_node: dict[int, list[str]] = {}
    port: dict[int, int] = {}
    for s in place_replicas(job, unsupported):
        port.setdefault(s.node, 0)
        head = s.node - s.node_rank
        multi = (f" --nnodes {s.nnodes} --node-rank {s.node_rank} --master-addr "
                 f'"${{REPLICA{s.replica}_ADDR:?address of node {head}}}"'
                 if s.nnodes > 1 else "")
        cmd = (f"CUDA_VISIBLE_DEVICES={','.join(map(str, s.gpus))} vllm serve {model} "
               f"--host 0.0.0.0 --port {8000 + port[s.node]} {' '.join(flags)}{multi} &")
        port[s.node] += 1
        by_node.setdefault(s.node, []).append(f"# replica {s.replica}" + (
            f" (node {s.node_rank + 1} of {s.nnodes})" if s.nnodes > 1 else ""))
        by_node[s.node].append(cmd)
    nodes = max(by_node, default=0) + 1
    title = [f"vLLM {VERSION}: {job.model}, {m.replicas} replica(s) of tp={tp} "
             f"pp={pp} on {job.nodes} node(s) x {job.devices_per_node} {job.accelerator}",
             f"written by accelmap; flags from vllm {VERSION} ({URL})",
             "each replica is an independent `vllm serve`; balance requests over their ports",
             "run on every node with NODE_RANK set to its index"]
    return ExportResult({"serve.sh": shell_script(title, by_node)}, launch_line(nodes), unsupported)


def read_back(files: dict[str, str]) -> ReadBack:
    cmds = commands(files["serve.sh"], ("vllm", "serve"))
    if not cmds:
        return ReadBack()
    c = cmds[0]
    tp = int(c.get("--tensor-parallel-size", "1"))
    mapping = Mapping.serving(
        tp=tp, pp=int(c.get("--pipeline-parallel-size", "1")),
        ep=tp if "--enable-expert-parallel" in c else 1,
        replicas=sum(1 for x in cmds if x.get("--node-rank", "0") == "0"))  # one head each
    return ReadBack(mapping, serving_choice(c, "--max-num-seqs", "--max-num-batched-tokens"))


EXPORTER = register(Exporter(
    name="vllm", framework="vLLM", version=VERSION, url=URL, kinds=(PlanKind.SERVE,),
    not_exported={"framework": FRAMEWORK_REASON, "seq_len": SERVE_LEN_REASON},
    export=export, read_back=read_back))
