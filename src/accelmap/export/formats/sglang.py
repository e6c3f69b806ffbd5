"""SGLang: a serving plan as ``python -m sglang.launch_server`` command lines (serve.sh).

Pinned to SGLang 0.5.23. Every flag below was read in that release (the PyPI wheel
``sglang-0.5.23``): in 0.5.23 the server arguments are msgspec fields whose flag is the field
name with dashes (``_field_to_cli_name`` in ``python/sglang/srt/arg_groups/arg_utils.py``):
``arg_groups/fields/model.py`` (``model_path``, ``context_length``, ``dtype`` and its choices,
``quantization``, ``kv_cache_dtype`` and its choices), ``fields/parallel.py`` (``tp_size``,
``pp_size``, ``dp_size``: "The number of data-parallel replicas of the model", ``ep_size``,
``nnodes``, ``node_rank``, ``dist_init_addr``), ``fields/schedule.py``
(``max_running_requests``), ``fields/serving.py`` (``host``, ``port``), and
``arg_groups/choices.py`` (``QUANTIZATION_CHOICES``, where "fp8" is "MOE + linear online
quantization"). ``python/sglang/launch_server.py`` is the entry point.

Mapping (plan field -> SGLang):

- replicas: ``--dp-size`` = the replicas on one node. The data-parallel controller launches
  its replicas on local GPUs only (``launch_dp_schedulers`` in
  ``srt/managers/data_parallel_controller.py`` steps ``base_gpu_id`` by tp x pp), so each node
  gets its own server; put a router in front of the nodes.
- tp, pp: ``--tp-size``, ``--pp-size``; a replica wider than a node spans nodes with
  ``--nnodes``, ``--node-rank``, ``--dist-init-addr``.
- ep: ``--ep-size``; the expert group lives inside the tp group (``moe_tp_size = tp_size //
  moe_ep_size // moe_dp_size``, ``model_runner_components/moe_ep_setup.py``), as in the plan.
- batch: ``--max-running-requests`` (each replica's scheduler gets it; the code divides it only by
  ``attn_dp_size``, 1 here unless DP attention).
- dp_attention: ``--enable-dp-attention`` with ``--dp-size`` = tp ("Enabling data parallelism
  for attention and tensor parallelism for FFN. The dp size should be equal to the tp size":
  ``enable_dp_attention`` in ``fields/parallel.py``, read in the repository at commit 00ac7105,
  not re-read in the 0.5.23 wheel). ``--dp-size`` then counts attention ranks, not replicas,
  so one server holds one replica: several replicas on a node are refused (``unsupported``).
- max_batched_tokens (offline/server scenario plans): ``--chunked-prefill-size``
  (``fields/schedule.py``: "The maximum number of tokens in a chunk for the chunked prefill";
  read in the repository's fields/schedule.py, not re-read in the 0.5.23 wheel).
- weight_dtype: bf16/fp16 -> ``--dtype bfloat16|float16``; fp8 -> ``--quantization fp8``;
  int8/int4 need a pre-quantized checkpoint (``unsupported``).
- kv_dtype: ``--kv-cache-dtype fp8_e4m3`` or ``auto`` (0.5.23 has no plain "fp8" choice).
- context: ``--context-length`` = prompt + output rounded up (shared with the vLLM exporter).
"""

from __future__ import annotations

import shlex
from typing import Any

from accelmap.export.base import (
    FRAMEWORK_REASON,
    SERVE_LEN_REASON,
    Exporter,
    ExportResult,
    PlanJob,
    PlanKind,
    ReadBack,
    register,
)
from accelmap.export.formats.vllm import (
    HALF_NAMES,
    commands,
    context_length,
    half_dtype,
    launch_line,
    model_path,
    place_replicas,
    serving,
    serving_choice,
    shell_script,
    weight_note,
)
from accelmap.mapping.plan import Mapping
from accelmap.units import DType

VERSION = "0.5.23"
URL = ("https://github.com/sgl-project/sglang/tree/v0.5.23/python/sglang/srt/arg_groups/"
       "fields")
PORT = 30000  # fields/serving.py: port default
DIST_PORT = 50000  # port of --dist-init-addr for a replica that spans nodes (any free port)


def export(job: PlanJob, spec: Any) -> ExportResult:
    m, choice = job.mapping, serving(job)
    unsupported: list[str] = []
    tp, pp, ep = m.tp, m.pp, m.ep
    weight, kv = choice.weight_dtype, choice.kv_dtype
    flags = [f"--tp-size {tp}", f"--pp-size {pp}"]
    if ep > 1:
        flags.append(f"--ep-size {ep}")
    dpa = bool(m.dp_attention)
    if dpa:  # --dp-size is then the attention-DP size, = tp (module doc)
        flags += [f"--dp-size {tp}", "--enable-dp-attention"]
    flags.append(f"--max-running-requests {choice.batch}")
    if choice.max_tokens is not None:
        flags.append(f"--chunked-prefill-size {choice.max_tokens}")
    flags.append(f"--context-length {context_length(job, spec, unsupported)}")
    flags.append(f"--dtype {HALF_NAMES[half_dtype(job)]}")
    if weight is DType.FP8:
        flags.append("--quantization fp8")
    weight_note("SGLang", weight, unsupported)
    flags.append(f"--kv-cache-dtype {'fp8_e4m3' if kv is DType.FP8 else 'auto'}")
    model = shlex.quote(model_path(job, unsupported))
    base = f"python -m sglang.launch_server --model-path {model} --host 0.0.0.0 --port {PORT}"
    slots = place_replicas(job, unsupported)
    by_node: dict[int, list[str]] = {}
    local = [s for s in slots if s.nnodes == 1]
    for node in sorted({s.node for s in local}):
        here = [s for s in local if s.node == node]
        dp = f" --dp-size {len(here)}" if len(here) > 1 and not dpa else ""
        if dpa and len(here) > 1:
            unsupported.append(f"replicas={m.replicas}: with --enable-dp-attention --dp-size "
                               f"counts attention ranks, so one server runs one replica; "
                               f"{len(here)} on node {node} need a server each (own port and "
                               "GPUs); exported as one")
            here = here[:1]
        by_node[node] = [f"# replicas {here[0].replica}-{here[-1].replica}",
                         f"{base} {' '.join(flags)}{dp} &"]
    for s in (s for s in slots if s.nnodes > 1):
        head = s.node - s.node_rank
        addr = f'"${{REPLICA{s.replica}_ADDR:?address of node {head}}}:{DIST_PORT}"'
        by_node.setdefault(s.node, []).append(
            f"# replica {s.replica} (node {s.node_rank + 1} of {s.nnodes})")
        by_node[s.node].append(f"{base} {' '.join(flags)} --nnodes {s.nnodes} "
                               f"--node-rank {s.node_rank} --dist-init-addr {addr} &")
    nodes = max(by_node, default=0) + 1
    title = [f"SGLang {VERSION}: {job.model}, {m.replicas} replica(s) of tp={tp} "
             f"pp={pp} on {job.nodes} node(s) x {job.devices_per_node} {job.accelerator}",
             f"written by accelmap; flags from sglang {VERSION} ({URL})",
             "one server per node (--dp-size = replicas on it); route requests over the nodes",
             "run on every node with NODE_RANK set to its index"]
    return ExportResult({"serve.sh": shell_script(title, by_node)}, launch_line(nodes),
                        unsupported)


def read_back(files: dict[str, str]) -> ReadBack:
    cmds = commands(files["serve.sh"], ("python", "-m", "sglang.launch_server"))
    if not cmds:
        return ReadBack()
    c = cmds[0]
    dpa = "--enable-dp-attention" in c
    heads = [x for x in cmds if x.get("--node-rank", "0") == "0"]
    mapping = Mapping.serving(
        tp=int(c.get("--tp-size", "1")), pp=int(c.get("--pp-size", "1")),
        ep=int(c.get("--ep-size", "1")),
        # --dp-size replicas per head server (node rank 0); under DP attention one each
        replicas=len(heads) if dpa else sum(int(x.get("--dp-size", "1")) for x in heads),
        dp_attention=dpa)
    return ReadBack(mapping, serving_choice(c, "--max-running-requests",
                                          "--chunked-prefill-size"))


EXPORTER = register(Exporter(
    name="sglang", framework="SGLang", version=VERSION, url=URL, kinds=(PlanKind.SERVE,),
    not_exported={"framework": FRAMEWORK_REASON, "seq_len": SERVE_LEN_REASON},
    export=export, read_back=read_back))
