"""A plan request, independent of the cluster, and its run: the planner it goes to (training:
``search.planner``; serving, batch scenario: ``search.serve``; offline/server/concurrency:
``search.serve_scenario``) and the job a plan file records. ``api.plan_request`` builds the
request from text; ``api.planning`` re-exports what is here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from accelmap.cost.calibration import CalibrationProfile
from accelmap.cost.framework import Framework
from accelmap.engine import class_framework
from accelmap.engine.shapes import check_serving_context, context_notes
from accelmap.export.base import Job, PlanKind
from accelmap.hardware.cluster import Cluster
from accelmap.models.schema import ModelSpec
from accelmap.search.result import Objective, PlanResult
from accelmap.serving.scenario import Load, Scenario
from accelmap.units import DType
from accelmap.workload import Adapters, LoraTarget, Training

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PlanRequest:
    """What to plan, independent of the cluster: training (sequence length, global batch in
    sequences, tokens to train, an optional deadline for them in seconds) or serving (prompt,
    output, TTFT/TPOT targets in seconds), the objective, the software stack and the search
    switches."""

    train: bool = True
    seq: int = 4096
    global_batch: int = 1024
    tokens: float = 0.0
    prompt: int = 2048
    output: int = 256
    ttft_s: float | None = None
    tpot_s: float | None = None
    objective: Objective = Objective.THROUGHPUT
    framework: str | None = None
    top: int = 10
    offload: bool = False
    force_tp: bool = False
    include_tight: bool = False
    deadline_s: float | None = None
    profile: CalibrationProfile | None = field(default=None, compare=False)
    # serving: the scenario's load (offline/server, simulated); None = the batch scenario
    load: Load | None = None
    # training: LoRA/QLoRA adapters of a fine-tune (api.adapters); None = every weight trains
    finetune: Adapters | None = None
    # serving: search fp8/int8/int4 weights and an fp8 KV cache too (--allow-quantization)
    quantize: bool = False

    @property
    def scenario(self) -> Scenario | None:
        """The serving scenario (None for training)."""
        if self.train:
            return None
        return Scenario.BATCH if self.load is None else self.load.scenario

    def with_profile(self, profile: CalibrationProfile | None) -> PlanRequest:
        """The same request with a measured calibration profile (``load_profile``)."""
        return replace(self, profile=profile)

    def framework_for(self, cluster: Cluster) -> str:
        """The stack: the one given, else the device class's (cost/execution.py: Megatron-LM
        and vLLM on GPUs, XLA on TPUs, ...), the rule ``estimate`` uses, so a plan and an
        estimate on the same part run the same stack."""
        return self.framework or class_framework(cluster, training=self.train).value


def run_plan(spec: ModelSpec, cluster: Cluster, request: PlanRequest,
             progress: Progress | None = None) -> PlanResult:
    """Search every mapping of ``spec`` on ``cluster`` and rank the feasible ones (training:
    ``search.planner.plan_training``; serving, batch scenario: ``search.serve.plan_serving``;
    offline/server: ``search.serve_scenario.plan_serving_scenario``, whose ``progress``
    counts simulated configurations)."""
    r = request
    if r.train:
        # a sequence past the model's context is context extension: said first
        beyond = [f"{n} (a context extension; --set context={r.seq} says so and silences this)"
                  for n in context_notes(spec, r.seq)]
        res = _plan_training(spec, cluster, r, progress)
        res.notes[:0] = beyond
        return res
    check_serving_context(spec, r.prompt, r.output)  # serving past the context: refused
    return _plan_serving(spec, cluster, r, progress)


def _plan_training(spec: ModelSpec, cluster: Cluster, r: PlanRequest,
                   progress: Progress | None) -> PlanResult:
    from accelmap.search.planner import plan_training
    from accelmap.search.space import TrainingSpace

    space = TrainingSpace.default(spec, cluster, r.seq, offload=r.offload,
                                  force_tp=r.force_tp)
    wl = Training.fine_tune(r.global_batch, r.seq, r.finetune) if r.finetune else None
    res = plan_training(spec, cluster, r.seq, r.global_batch, objective=r.objective,
                        framework=r.framework_for(cluster), top=r.top, tokens_to_train=r.tokens,
                        space=space, progress=progress, profile=r.profile,
                        include_tight=r.include_tight, workload=wl)
    if r.finetune is not None:
        ad = r.finetune
        res.notes.insert(0, f"{ad.method.value} fine-tune: rank-{ad.rank} adapters on "
                         + ",".join(t.value for t in LoraTarget if t in ad.targets)
                         + ", base frozen" + (" in NF4" if ad.quantized_base else ""))
    return res


def _plan_serving(spec: ModelSpec, cluster: Cluster, r: PlanRequest,
                  progress: Progress | None) -> PlanResult:
    if r.load is not None:
        from accelmap.search.serve_scenario import plan_serving_scenario

        res = plan_serving_scenario(spec, cluster, r.prompt, r.output, r.load,
                                    objective=r.objective, framework=r.framework_for(cluster),
                                    top=r.top, progress=progress, profile=r.profile,
                                    quantize=r.quantize)
        if r.include_tight:
            res.notes.append("--include-tight applies to --scenario batch: in offline/server "
                             "the framework's memory rule sizes the KV pool")
        return res
    from accelmap.search.serve import plan_serving

    return plan_serving(spec, cluster, r.prompt, r.output, ttft_s=r.ttft_s, tpot_s=r.tpot_s,
                        objective=r.objective, framework=r.framework_for(cluster), top=r.top,
                        progress=progress, profile=r.profile, include_tight=r.include_tight,
                        quantize=r.quantize)


def plan_job(spec: ModelSpec, cluster: Cluster, request: PlanRequest) -> Job:
    """The job a plan file records (and the exporters read): model, cluster and workload."""
    r = request
    return Job(kind=PlanKind.TRAIN if r.train else PlanKind.SERVE, model=spec.id,
               accelerator=cluster.accelerator.id, devices_per_node=cluster.devices_per_node,
               nodes=cluster.nodes, seq_len=r.seq if r.train else r.prompt + r.output,
               global_batch=r.global_batch, dtype=DType.BF16, prompt_len=r.prompt,
               output_len=r.output, framework=Framework(r.framework_for(cluster)),
               **finetune_fields(r.finetune))


def finetune_fields(ad: Adapters | None) -> dict[str, Any]:
    """The Job fields of a fine-tune (none for full training)."""
    if ad is None:
        return {}
    return {"finetune": ad.method, "lora_rank": ad.rank,
            "lora_targets": tuple(t for t in LoraTarget if t in ad.targets)}
