"""Slurm + torchrun: start one process per GPU on every node of the plan's cluster.

Exporter ``slurm`` writes two files:

* ``launch_torchrun.sh`` runs ``torchrun`` on one node; ``torchrun`` starts ``devices_per_node``
  workers there and joins the other nodes through a c10d rendezvous at ``$MASTER_ADDR``.
* ``train.sbatch`` asks Slurm for the nodes and GPUs and runs that script once per node
  (``--ntasks-per-node=1``: torchrun, not Slurm, forks the per-GPU workers).

Only the cluster shape lives here; the parallel degrees, batch and precision belong to the
framework config (deepspeed, megatron, torchtitan ...), so every mapping field is reported as not
expressible, once. The helpers here (``torchrun_command``, shell quoting, ``batch_split``) are
shared by the framework exporters, which all start with torchrun and split the same batch.

Sources (flags only; no value is invented):
  torchrun  pytorch/pytorch torch/distributed/run.py @ 010929fd3f401c3868310396e6a91ed95aa0305b:
            --nnodes, --nproc-per-node, --rdzv-backend, --rdzv-endpoint, --rdzv-id,
            --master-port default 29500.
  sbatch    https://slurm.schedmd.com/sbatch.html: --job-name, --nodes, --ntasks-per-node,
            --gpus-per-node; scontrol ``show hostnames`` (https://slurm.schedmd.com/scontrol.html).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from accelmap.engine.plan import TRAIN_MAPPING_KEYS
from accelmap.errors import InputError
from accelmap.export.base import (
    ACT_OFFLOAD_REASON,
    CP_COMM_REASON,
    FRAMEWORK_REASON,
    MODEL_REASON,
    Exporter,
    ExportResult,
    PlanJob,
    PlanKind,
    ReadBack,
    register,
)
from accelmap.export.lora import adapter_fields, has_adapters

TORCH_COMMIT = "010929fd3f401c3868310396e6a91ed95aa0305b"
TORCHRUN_URL = f"https://github.com/pytorch/pytorch/blob/{TORCH_COMMIT}/torch/distributed/run.py"
SBATCH_URL = "https://slurm.schedmd.com/sbatch.html"

# torchrun's own default --master-port (run.py @ TORCH_COMMIT); we use it for the c10d endpoint.
RDZV_PORT = 29500

# The mapping keys of a training plan file (Mapping.to_dict: what search/planner.py writes);
# unsupported sentences name fields by these keys.
MAPPING_FIELDS = TRAIN_MAPPING_KEYS

LAUNCH_REASON = ("a launch script sets only nodes and GPUs per node; the parallel degrees, "
                 "batch, ZeRO, recompute and offload belong to the training framework's config "
                 "(export megatron, deepspeed or torchtitan for those)")

TORCHRUN_FILE = "launch_torchrun.sh"
SBATCH_FILE = "train.sbatch"


def batch_split(job: PlanJob) -> tuple[int, int, int]:
    """(dp, micro_batch, gradient accumulation steps); global_batch = dp * micro * steps."""
    m = job.mapping
    steps = m.micro_batches(job.global_batch)
    if not float(steps).is_integer():
        raise InputError(f"global batch {job.global_batch} is not a multiple of dp {m.dp} x "
                         f"micro-batch {m.micro_batch}: fix the plan's batch or micro-batch")
    return m.dp, m.micro_batch, int(steps)


def torchrun_command(job: PlanJob, target: Sequence[str]) -> list[str]:
    """argv of ``torchrun`` for one node of the job; run it on every node (c10d rendezvous).

    ``target`` is the script (or ``-m module``) and its arguments. ``$MASTER_ADDR`` must name
    node 0; ``$MASTER_PORT`` and ``$RDZV_ID`` are optional.
    """
    return [
        "torchrun",
        "--nnodes", str(job.nodes),  # run.py: --nnodes
        "--nproc-per-node", str(job.devices_per_node),  # run.py: --nproc-per-node
        "--rdzv-backend", "c10d",  # run.py: --rdzv-backend
        "--rdzv-endpoint", f"${{MASTER_ADDR}}:${{MASTER_PORT:-{RDZV_PORT}}}",  # run.py
        "--rdzv-id", "${RDZV_ID:-accelmap}",  # run.py: --rdzv-id (one id per job)
        *target,
    ]


def shell_word(word: str) -> str:
    """Quote for bash, leaving ``${...}`` expansions live (double quotes) and plain words bare."""
    if re.fullmatch(r"[\w@%+=:,./-]+", word):
        return word
    if "${" in word or "$@" in word:
        return '"' + word.replace('"', '\\"') + '"'
    return shlex.quote(word)


def shell_line(argv: Sequence[str]) -> str:
    return " ".join(shell_word(w) for w in argv)


def shell_block(argv: Sequence[str], indent: str = "  ") -> str:
    """One command over several lines: the program, then each ``--flag [value]`` on its own."""
    lines: list[list[str]] = [[argv[0]]]
    for word in argv[1:]:
        last = lines[-1]
        if len(lines) > 1 and len(last) == 1 and last[0].startswith("-") \
                and not word.startswith("-"):
            last.append(word)  # the value of the flag on this line
        else:
            lines.append([word])
    rendered = [" ".join(shell_word(w) for w in line) for line in lines]
    return f" \\\n{indent}".join(rendered)


def parse_torchrun(text: str) -> dict[str, int]:
    """``--nnodes`` and ``--nproc-per-node`` of the torchrun call in a script."""
    found: dict[str, int] = {}
    for key, flag in (("nodes", "nnodes"), ("gpus_per_node", "nproc-per-node")):
        m = re.search(rf"--{flag}[ =]+(\d+)", text)
        if m:
            found[key] = int(m.group(1))
    return found


def not_expressible(job: PlanJob, where: str) -> str:
    """One sentence naming every mapping field with its value (``field=value, ...: why``)."""
    fields = ", ".join(f"{k}={v}" for k, v in job.mapping.to_dict().items())
    return f"{fields}: {where}"


def _torchrun_script(job: PlanJob) -> str:
    return (
        "#!/bin/bash\n"
        f"# torchrun on one node of {job.nodes} ({job.devices_per_node} x {job.accelerator} "
        "each); run it once on every node.\n"
        "# accelmap export slurm; flags: pytorch torch/distributed/run.py @ "
        f"{TORCH_COMMIT[:12]}\n"
        "set -euo pipefail\n"
        ': "${MASTER_ADDR:?set MASTER_ADDR to the address of node 0}"\n'
        f"{shell_block(torchrun_command(job, ['train.py', '$@']))}\n"
    )


def _sbatch_script(job: PlanJob) -> str:
    return (
        "#!/bin/bash\n"
        f"#SBATCH --job-name=accelmap-{job.model}\n"
        f"#SBATCH --nodes={job.nodes}\n"
        "#SBATCH --ntasks-per-node=1\n"
        f"#SBATCH --gpus-per-node={job.devices_per_node}\n"
        "# One task per node: torchrun (launch_torchrun.sh) forks the per-GPU workers itself.\n"
        "set -euo pipefail\n"
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        "export MASTER_ADDR\n"
        f"export MASTER_PORT={RDZV_PORT}\n"
        'export RDZV_ID="$SLURM_JOB_ID"\n'
        f'srun bash {TORCHRUN_FILE} "$@"\n'
    )


def export(job: PlanJob, spec: Any) -> ExportResult:
    files = {TORCHRUN_FILE: _torchrun_script(job), SBATCH_FILE: _sbatch_script(job)}
    unsupported = [not_expressible(job, LAUNCH_REASON)]
    if has_adapters(job):
        unsupported.append(f"{adapter_fields(job)}: the launch scripts start train.py; the "
                           "adapters belong to its framework's config (export deepspeed, "
                           "torchtune, maxtext or megatron for those)")
    return ExportResult(files=files, launch=f"sbatch {SBATCH_FILE}", unsupported=unsupported)


def read_back(files: dict[str, str]) -> ReadBack:
    """Nodes and GPUs per node, from the sbatch header; checked against the torchrun call. The
    scripts hold no mapping."""
    sbatch = files[SBATCH_FILE]
    got: dict[str, int] = {}
    for key, flag in (("nodes", "nodes"), ("gpus_per_node", "gpus-per-node")):
        m = re.search(rf"^#SBATCH --{flag}=(\d+)$", sbatch, re.MULTILINE)
        if m:
            got[key] = int(m.group(1))
    if parse_torchrun(files[TORCHRUN_FILE]) != got:
        raise ValueError(f"{TORCHRUN_FILE} and {SBATCH_FILE} disagree on the cluster shape")
    return ReadBack(nodes=got.get("nodes"), devices_per_node=got.get("gpus_per_node"))


EXPORTER = register(Exporter(
    name="slurm",
    framework="Slurm + torchrun",
    version=f"torchrun (PyTorch @ {TORCH_COMMIT[:12]}), sbatch (Slurm >= 19.05: --gpus-per-node)",
    url=TORCHRUN_URL,
    kinds=(PlanKind.TRAIN,),
    not_exported={**dict.fromkeys(
        ("seq_len", "global_batch", "dtype", "dp", "tp", "pp", "cp", "ep", "zero",
         "micro_batch", "vpp", "recompute", "offload", "schedule", "first_stage_layers",
         "last_stage_layers", "embedding_in_split", "loss_in_split", "shard_group",
         "tp_comm_overlap"), LAUNCH_REASON),
        **dict.fromkeys(("finetune", "lora_rank", "lora_targets"), LAUNCH_REASON),
        "model": MODEL_REASON, "cp_comm": CP_COMM_REASON,
        "offload_activations": ACT_OFFLOAD_REASON, "framework": FRAMEWORK_REASON},
    export=export,
    read_back=read_back,
))
