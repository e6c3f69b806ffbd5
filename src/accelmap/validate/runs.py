"""One published training run as typed values: the record every run file is read into.

The canonical run format (``docs/validate-format.md``; read by ``validate/canonical.py``) maps
one to one onto :class:`TrainingRun`; the shared transcription CSV is read by its own reader
(``validate/cases.py``) and mapped onto the same record by ``validate/transcribe.py``, so both
go through one prediction path (``validate/training.py``). ``None`` always means "not stated":
the run's software stack supplies its documented default and the prediction's notes say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from accelmap.cost.framework import Framework
from accelmap.mapping.plan import CpComm, ZeroStage
from accelmap.units import DType
from accelmap.validate.cases import Arch
from accelmap.validate.stacks import Stack
from accelmap.workload import Fp8Scaling, Recompute


class Metric(StrEnum):
    """What a run reports, per device unless the name says otherwise."""

    MFU = "mfu"
    TOKENS_PER_S_PER_DEVICE = "tokens_per_s_per_device"
    STEP_TIME_S = "step_time_s"
    TFLOPS_MODEL = "tflops_per_device_model"
    TFLOPS_HARDWARE = "tflops_per_device_hardware"


@dataclass(frozen=True)
class MetricSpec:
    engine_key: str  # key in Estimate.metrics
    unit: str
    scale: float  # engine value -> the run's unit
    higher_is_better: bool
    definition: str


METRICS: dict[Metric, MetricSpec] = {
    Metric.MFU: MetricSpec(
        "mfu", "%", 100.0, True,
        "model FLOPs per step (no recompute) / (step time x devices x the catalog's dense "
        "peak of the training precision), in percent"),
    Metric.TOKENS_PER_S_PER_DEVICE: MetricSpec(
        "tokens_per_s_per_device", "tokens/s", 1.0, True,
        "global batch x seq_len / step time / devices"),
    Metric.STEP_TIME_S: MetricSpec(
        "step_time_s", "s", 1.0, False, "seconds per optimizer step of the global batch"),
    Metric.TFLOPS_MODEL: MetricSpec(
        "tflops_per_device", "TFLOP/s", 1.0, True,
        "model FLOPs per step / step time / devices (MFU x peak; NeMo, llm-foundry)"),
    Metric.TFLOPS_HARDWARE: MetricSpec(
        "hardware_tflops_per_device", "TFLOP/s", 1.0, True,
        "as tflops_per_device_model with the recompute forward counted (Megatron papers "
        "Eq. 3, HFU)"),
}


class Family(StrEnum):
    """Architecture style of a model built from explicit dimensions."""

    GPT = "gpt"  # GPT-2/Megatron GPT: LayerNorm, biases, 4h GELU MLP, learned positions
    MPT = "mpt"  # MosaicML MPT: ALiBi, no biases, tied embeddings
    LLAMA = "llama"  # Llama: gated SiLU MLP, RoPE, RMSNorm, no biases, untied


@dataclass(frozen=True)
class Problem:
    """A field of a run that could not be read, with the sentence that says what to write."""

    field: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class TrainingRun:
    """One run; every setting ``None`` when the run does not state it."""

    id: str
    file: str = ""  # file the run came from (name only)
    line: int = 0  # line (CSV) or record number (YAML) in that file
    source: str = ""  # citation or source key
    accelerator: str = ""  # a catalog id or anything the catalog lookup resolves
    accelerator_memory_gb: float | None = None  # picks a same-part memory variant
    model: str = ""  # a catalog preset or anything the lookup resolves; "" with dimensions
    arch: Arch = field(default_factory=Arch)
    family: Family | None = None  # style of a model built from ``arch``
    devices: int | None = None
    nodes: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    vpp: int | None = None  # virtual pipeline stages; 1 = not interleaved
    interleaved: bool = False  # interleaved schedule stated, its virtual stages not
    # the pipeline schedule as published (canonical.SCHEDULES: a cost.schedules.Schedule
    # value); None = 1F1B, interleaved with vpp > 1
    schedule: str | None = None
    # the pipeline split (Megatron-LM's --decoder-first/last-pipeline-num-layers and
    # --account-for-embedding/loss-in-pipeline-split; mapping.plan.Mapping.stage_layers)
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    embedding_in_split: bool | None = None
    loss_in_split: bool | None = None
    zero: ZeroStage | None = None
    shard_group: int | None = None  # HSDP: ZeRO/FSDP shards over this many dp ranks
    shard_in_node: bool = False  # HSDP over the devices of one node (HYBRID_SHARD default)
    recompute: Recompute | None = None
    sequence_parallel: bool | None = None
    tp_comm_overlap: bool | None = None
    cp_comm: CpComm | None = None  # the context-parallel exchange (None: the stack's, p2p)
    offload_activations: int = 0  # layers per stage whose activations go to host memory
    flash_attention: bool | None = None
    compile: bool | None = None  # torch.compile
    precision: DType | None = None
    grad_reduce: DType | None = None  # gradient reduction precision
    fp8_scaling: Fp8Scaling | None = None  # FP8 recipe's scaling (None: tensorwise)
    scale_out: str = ""  # the inter-node network as stated (hardware/scale_out.py); "": preset's
    framework: Stack | None = None
    version: str = ""  # the framework's release, in its own numbering ("0.9", "24.07")
    year: int | None = None  # the run's year: picks the release when the version is absent
    seq_len: int | None = None
    global_batch: int | None = None  # sequences per optimizer step
    micro_batch: int | None = None
    grad_accum: int | None = None
    metric: Metric | None = None
    value: float | None = None
    notes: str = ""
    # what reading the row assumed (notes) and could not read (reasons it is not predicted)
    reading_notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def device_count(self) -> int | None:
        """``devices``, else the product of the degrees when TP, PP and DP are all stated (EP
        is carved out of the data-parallel ranks, so it is no factor)."""
        if self.devices is not None:
            return self.devices
        if None in (self.tp, self.pp, self.dp):
            return None
        return (self.tp or 1) * (self.pp or 1) * (self.dp or 1) * (self.cp or 1)


@dataclass(frozen=True)
class UnreadableRun:
    """A record of a run file that could not be read: one line per problem, each naming the
    field and what to write."""

    id: str
    file: str
    line: int
    source: str
    problems: tuple[Problem, ...]

    def lines(self) -> list[str]:
        """One line per problem: ``row ID: field 'zero': ...; write zero: 0``."""
        return [f"row {self.id}: {p}" for p in self.problems]


# -- serving runs -------------------------------------------------------------------------------
class ServingScenario(StrEnum):
    """How the requests reach the server (MLPerf Inference scenarios; trtllm-bench, vLLM's
    benchmark scripts): one fixed batch, every request queued at once, a Poisson stream, or N
    closed-loop clients (``vllm bench serve --max-concurrency N``, genai-perf)."""

    BATCH = "batch"
    OFFLINE = "offline"
    SERVER = "server"
    CONCURRENCY = "concurrency"


class ServingMetric(StrEnum):
    """What a serving run reports: throughput over all devices (or per device) of the whole run,
    and per-request latency percentiles."""

    OUTPUT_TOKENS_PER_S = "output_tokens_per_s"
    OUTPUT_TOKENS_PER_S_PER_DEVICE = "output_tokens_per_s_per_device"
    TOTAL_TOKENS_PER_S = "total_tokens_per_s"
    TOTAL_TOKENS_PER_S_PER_DEVICE = "total_tokens_per_s_per_device"
    REQUESTS_PER_S = "requests_per_s"
    INPUT_TOKENS_PER_S_PER_DEVICE = "input_tokens_per_s_per_device"
    # interactivity as the public throughput-vs-interactivity dashboards define it:
    # 1000 / median TPOT in ms (serving/metrics.py)
    TOKENS_PER_S_PER_USER = "tokens_per_s_per_user"
    TTFT_MEAN_MS = "ttft_mean_ms"
    TTFT_P50_MS = "ttft_p50_ms"
    TTFT_P90_MS = "ttft_p90_ms"
    TTFT_P99_MS = "ttft_p99_ms"
    TPOT_MEAN_MS = "tpot_mean_ms"
    TPOT_P50_MS = "tpot_p50_ms"
    TPOT_P90_MS = "tpot_p90_ms"
    TPOT_P99_MS = "tpot_p99_ms"
    ITL_MEAN_MS = "itl_mean_ms"
    ITL_P50_MS = "itl_p50_ms"
    ITL_P90_MS = "itl_p90_ms"
    ITL_P99_MS = "itl_p99_ms"
    E2E_MEAN_MS = "e2e_mean_ms"
    E2E_P50_MS = "e2e_p50_ms"
    E2E_P90_MS = "e2e_p90_ms"
    E2E_P99_MS = "e2e_p99_ms"

    @property
    def is_latency(self) -> bool:
        return self.value.endswith("_ms")

    def read(self, metrics: dict[str, object]) -> float | None:
        """This metric from a simulation's ``ServingRun.metrics`` (ms for latencies)."""
        if self.is_latency:
            what, q, _ = self.value.split("_")
            dist = metrics.get(f"{what}_s")
            v = dist.get(q) if isinstance(dist, dict) else None
            return None if v is None else float(v) * 1e3
        v = metrics.get(self.value)
        return None if v is None else float(v)  # type: ignore[arg-type]

    @property
    def definition(self) -> str:
        if self.is_latency:
            what, q, _ = self.value.split("_")
            per = {"ttft": "time to first token",
                   "tpot": "time per output token after the first",
                   "itl": "inter-token latency (per token)",
                   "e2e": "end-to-end latency"}[what]
            return f"{q} of the per-request {per}, in ms"
        if self is ServingMetric.TOKENS_PER_S_PER_USER:
            return "tokens/s one user sees: 1 / median TPOT (1000 / median TPOT in ms)"
        per = " per device" if self.value.endswith("per_device") else " over all devices"
        what = {"output": "output tokens", "total": "prompt + output tokens",
                "input": "prompt tokens",
                "requests": "completed requests"}[self.value.split("_")[0]]
        return f"{what} / run time (first arrival to last finish){per}"


@dataclass(frozen=True)
class ServingRun:
    """One published serving run; ``None`` always means "not stated" (the framework's
    documented default is taken and noted). ``dp`` is the number of independent replicas
    (engine instances), each ``tp x pp`` devices; requests are split evenly between them."""

    id: str
    file: str = ""
    line: int = 0
    source: str = ""
    accelerator: str = ""
    accelerator_memory_gb: float | None = None
    model: str = ""
    arch: Arch = field(default_factory=Arch)
    family: Family | None = None
    devices: int | None = None
    nodes: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None  # replicas
    ep: int | None = None
    framework: Framework | None = None  # serving framework (cost profile, scheduler defaults)
    version: str = ""
    year: int | None = None
    precision: DType | None = None  # weights and GEMM inputs
    kv_precision: DType | None = None  # KV cache (None: as precision; 16 bits for 4-bit/int)
    moe_precision: DType | None = None  # routed experts (None: as precision)
    scenario: ServingScenario | None = None
    batch: int | None = None  # the fixed batch of a batch-scenario run
    input_len: int | None = None  # prompt tokens (mean when lengths are distributed)
    output_len: int | None = None  # output tokens (mean)
    length_dist: str | None = None  # fixed | uniform | lognormal (serving.requests.LengthDist)
    length_spread: float | None = None  # of the length distribution (uniform: +-fraction,
    # lognormal: coefficient of variation)
    requests: int | None = None  # requests in the run (all replicas)
    rate: float | None = None  # requests/s (server), over all replicas
    concurrency: int | None = None  # closed-loop clients (concurrency), over all replicas
    slo_ttft_ms: float | None = None  # latency constraints a server run's rate had to meet
    slo_tpot_ms: float | None = None
    slo_percentile: float | None = None  # of those constraints (MLPerf: p99)
    max_batch: int | None = None  # scheduler cap on running requests (max_batch_size)
    max_tokens: int | None = None  # scheduler cap on tokens per iteration (max_num_tokens)
    kv_fraction: float | None = None  # KV-cache memory fraction (free_gpu_memory_fraction)
    # SGLang --scheduler-recv-interval: decode steps between polls for new requests
    scheduler_recv_interval: int | None = None
    # TensorRT-LLM attention_dp_config (enable_balance: true): its timeout_iters, and its
    # batching_wait_iters (None: 0)
    attention_dp_balance: int | None = None
    attention_dp_batching_wait: int | None = None
    # issue 22 part 8: what 2025-2026 deployments state, read so that such runs can be written
    # down; validate/serving.py predicts what it models and skips the rest with its reason
    stack: str = ""  # dynamo (orchestrating `engine`) or atom (no profile yet); "" otherwise
    engine: Framework | None = None  # the engine under Dynamo
    dp_attention: bool | None = None  # attention data-parallel over the expert group
    disaggregated: bool | None = None  # separate prefill and decode pools
    prefill_devices: int | None = None
    decode_devices: int | None = None
    prefill_tp: int | None = None
    decode_tp: int | None = None
    prefill_ep: int | None = None
    decode_ep: int | None = None
    # DP attention in one pool of a disaggregated run (default: dp_attention)
    prefill_dp_attention: bool | None = None
    decode_dp_attention: bool | None = None
    mtp: int | None = None  # draft tokens per step (multi-token prediction heads)
    acceptance: float | None = None  # accepted draft tokens per drafted
    metric: ServingMetric | None = None
    value: float | None = None
    notes: str = ""
    reading_notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def device_count(self) -> int | None:
        if self.devices is not None:
            return self.devices
        if None in (self.tp, self.pp, self.dp):
            return None
        return (self.tp or 1) * (self.pp or 1) * (self.dp or 1)
