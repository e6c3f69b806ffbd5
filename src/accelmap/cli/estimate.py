"""`accelmap estimate` and `accelmap roofline`: one model on one accelerator."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from accelmap import api
from accelmap.cli import report as rep
from accelmap.cli.common import (
    MAX_COUNT,
    MAX_DEVICES,
    MAX_LAYERS,
    MAX_REQUESTS,
    MAX_SEED,
    MAX_TOKENS,
    CatalogOpt,
    DbOpt,
    FinetuneOpt,
    ForceTpOpt,
    JsonOpt,
    LoraRankOpt,
    LoraTargetsOpt,
    ProfileOpt,
    console,
    emit_json,
    fmt,
    get_catalog,
)
from accelmap.cli.costs import print_cost, print_energy
from accelmap.errors import InputError

if TYPE_CHECKING:
    from accelmap.api import (
        CalibrationProfile,
        Inference,
        Load,
        Mapping,
        ModelSpec,
        Speculation,
        System,
        Training,
    )
    from accelmap.api.estimates import Estimate
    from accelmap.api.serving import DisaggRun, ServingRun, SplitSearch

HwOpt = Annotated[str, typer.Option("--hw", help="Accelerator id or name (`accelmap hw list`).")]
BatchOpt = Annotated[int, typer.Option(min=1, max=MAX_COUNT,
                                       help="Sequences per step (training) or batch size "
                                       "(serving).")]
SeqOpt = Annotated[int, typer.Option("--seq", min=1, max=MAX_TOKENS,
                                     help="Training sequence length.")]
PromptOpt = Annotated[int, typer.Option(min=1, max=MAX_TOKENS,
                                        help="Prompt tokens per request (serving).")]
OutputOpt = Annotated[int, typer.Option(min=0, max=MAX_TOKENS,
                                        help="Generated tokens per request (serving).")]
DtypeOpt = Annotated[str, typer.Option(help="Training compute dtype: bf16, fp16, fp8, fp32, or "
                                       "a block-scaled recipe on Blackwell/CDNA4: nvfp4, mxfp8, "
                                       "mxfp4 (fp4 = the part's own).")]
WeightsOpt = Annotated[str, typer.Option(help="Serving weights: bf16, fp16, fp8, int8, int4, "
                                         "nvfp4, mxfp4, mxfp8, mxfp6, fp4 (the part's own "
                                         "4-bit format; weight-only where it has none).")]
KvOpt = Annotated[str | None, typer.Option("--kv", help="KV-cache dtype: bf16, fp16, fp8, nvfp4 "
                                           "on Blackwell (default: activation dtype; fp8 with "
                                           "fp8 weights).")]
MoeWeightsOpt = Annotated[str | None, typer.Option(
    "--moe-weights", help="Routed experts' weights when they differ from --weights (e.g. "
    "--weights fp8 --moe-weights nvfp4, as NVIDIA's DeepSeek-R1-FP4 checkpoints).")]
GroupOpt = Annotated[int, typer.Option(min=1, max=MAX_COUNT,
                                       help="Weights per scale for int8/int4.")]
FrameworkOpt = Annotated[str | None, typer.Option(
    help="eager, torch-compile, tensorrt-llm (v0.x engines), tensorrt-llm-1 (1.x, PyTorch "
         "backend), vllm, megatron, fsdp (default: megatron for training, vllm for serving).")]
OptimizerOpt = Annotated[str, typer.Option(help="adamw, sgd, lion, adafactor.")]
RecomputeOpt = Annotated[str, typer.Option(
    help="none, selective, full, per-op (torchtitan's), norm-up (DeepSeek-V3's: norms, MLA "
         "up-projections and the MoE SwiGLU re-run).")]
FlashOpt = Annotated[bool, typer.Option("--flash/--no-flash", help="Flash attention.")]
ImbalanceOpt = Annotated[float, typer.Option(
    "--moe-imbalance", min=1.0, help="MoE: busiest expert's load / mean load (1 = balanced).")]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", help="Cluster: preset (dgx-h100, tpu-v5p-1024), 64xH100, 8x8xh100-sxm5-80gb, "
    "or a system YAML. With it, --batch is the global batch (training) or per-replica batch.")]
ScaleOutOpt = Annotated[str | None, typer.Option(
    "--scale-out", help="The inter-node network in place of the cluster preset's: a line rate "
    "and its scope, e.g. '400 Gb/s per GPU', '4 x 100 Gb/s' (links per node), '1600 Gb/s per "
    "node'.")]
IntOpt = Annotated[int, typer.Option(min=1, max=MAX_COUNT)]
ZeroOpt = Annotated[int | None, typer.Option("--zero", min=0, max=3, help="ZeRO stage 0-3 "
                                             "(3 = FSDP; default 1 on a cluster).")]
ScheduleOpt = Annotated[str | None, typer.Option(
    help="gpipe, 1f1b, interleaved-1f1b, zb-h1, dualpipe (DeepSeek-V3's; default: "
         "interleaved-1f1b with --vpp > 1, else 1f1b).")]
TokensOpt = Annotated[str | None, typer.Option(help="Tokens to train, for time and cost "
                                               "(e.g. 1e12 or 1T).")]
SparsityOpt = Annotated[str, typer.Option(
    "--sparsity", help="Weight sparsity: none, or 2:4 (the layers' GEMM weights 2:4-sparse; "
    "training: forward and dgrad sparse, wgrad dense). Parts with a 2:4 mode only.")]

Fp8ScalingOpt = Annotated[str, typer.Option(
    "--fp8-scaling", help="FP8 training recipe's scaling (with --train --dtype fp8): "
    "tensorwise (one scale per tensor: Transformer Engine, torchao's default) or rowwise "
    "(torchao's row-wise recipe: gradient GEMMs write fp32 and are rescaled).")]

GradAccumulationOpt = Annotated[str, typer.Option(
    "--grad-accumulation", help="How the stack adds micro-batch gradients up (with --train): "
    "fused (the wgrad GEMM accumulates: Megatron, FSDP), autograd (a 16-bit add per "
    "micro-batch: DeepSpeed's fp16 pipeline) or fp32-copy (DeepSpeed's BF16_Optimizer: a "
    "cast and fp32 add per micro-batch, Megatron-DeepSpeed bf16 runs such as BLOOM).")]

PipeSendsOpt = Annotated[str, typer.Option(
    "--pp-sends", help="How pipeline stages send to each other (with --train --pp N): batched "
    "(Megatron: a send and the opposite receive in one exchange), blocking (DeepSpeed's "
    "pipeline engine: each send and receive a blocking call, four transfers a micro-batch in "
    "series) or blocking-whole-grad (DeepSpeed before 0.5.4: each tp rank sends the whole "
    "input gradient back, as MT-NLG's 2021 run did).")]


# said where no band exists (a class or stack with fewer than 8 similar published runs):
# a figure is never printed as if its error were known
NO_BAND = " (no error band: too few published runs of its class, phase and scale)"


def _assumption_line(text: str) -> str:
    """Warnings stand out; everything else is labelled as the assumption it is."""
    return f"[yellow]{text}[/]" if text.startswith("warning:") else f"assumption: {text}"


def _inputs(model: str, hw: str | None, cluster: str | None, train: bool, batch: int,
            seq: int, prompt: int, output: int, dtype: str, weights: str, kv: str | None,
            group: int, optimizer: str, recompute: str, flash: bool, tokens: str | None,
            catalog: Any, profile: CalibrationProfile | None = None, tp: int | None = None,
            pp: int | None = None, dp: int | None = None, cp: int = 1, ep: int | None = None,
            zero: int | None = None, micro_batch: int | None = None, vpp: int = 1,
            schedule: str | None = None, sp: bool = True, tp_overlap: bool = False,
            force_tp: bool = False, replicas: int | None = None, devices: int | None = None,
            sparsity: str = "none"
            ) -> tuple[ModelSpec, System, Training | Inference, Mapping | None]:
    """The shared options of advise, design, sweep and roofline as the API's values, through
    the one typed request every face builds (``api.estimate_inputs``)."""
    cat = catalog if isinstance(catalog, api.Catalog) else get_catalog(catalog)
    req = api.EstimateRequest(
        model=model, hw=hw, cluster=cluster, devices=devices, train=train, batch=batch,
        seq=seq, prompt=prompt, output=output, dtype=dtype, weights=weights, kv=kv,
        group=group, optimizer=optimizer, recompute=recompute, flash=flash, tokens=tokens,
        sparsity=sparsity, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, zero=zero,
        micro_batch=micro_batch, vpp=vpp, schedule=schedule, sequence_parallel=sp,
        tp_overlap=tp_overlap, force_tp=force_tp, replicas=replicas)
    return api.estimate_inputs(req, cat, profile)


ModelOpt = Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")]
EstimateHwOpt = Annotated[str | None, typer.Option(
    "--hw", help="Accelerator id or name (one device, or --devices of them; or use --cluster).")]
DevicesOpt = Annotated[int | None, typer.Option(
    "--devices", min=1, max=MAX_DEVICES,
    help="With --hw: this many devices, as --cluster NxHW builds them "
    "(the accelerator's system preset, partial nodes included, else its own catalog "
    "links).")]
TrainOpt = Annotated[bool, typer.Option("--train/--serve", help="Training step or serving.")
                     ]
TpOpt = Annotated[int | None, typer.Option(
    "--tp", min=1, max=MAX_DEVICES,
    help="Tensor parallel size (default 1; serving on several devices with no --tp, --pp, "
    "--ep or --replicas: the smallest tp whose replica holds the model, said in the output).")]
PpOpt = Annotated[int | None, typer.Option("--pp", min=1, max=MAX_DEVICES,
                                           help="Pipeline parallel size (default 1).")]
DpOpt = Annotated[int | None, typer.Option("--dp", min=1, max=MAX_DEVICES,
                                           help="Data parallel size (default: "
                                           "what the cluster leaves).")]
CpOpt = Annotated[int, typer.Option("--cp", min=1, max=MAX_DEVICES,
                                    help="Context parallel size.")]
EpOpt = Annotated[int | None, typer.Option("--ep", min=1, max=MAX_DEVICES,
                                           help="Expert parallel size (default 1).")]
MicroBatchOpt = Annotated[int | None, typer.Option(
    "--micro-batch", min=1, max=MAX_COUNT,
    help="Sequences per micro-batch (default: 1 on a cluster, the "
    "whole batch on one device).")]
VppOpt = Annotated[int, typer.Option("--vpp", min=1, max=MAX_DEVICES,
                                     help="Virtual pipeline stages.")]
FirstStageLayersOpt = Annotated[int | None, typer.Option(
    "--first-stage-layers", min=1, max=MAX_LAYERS,
    help="Layers on the first pipeline stage (Megatron "
    "--decoder-first-pipeline-num-layers).")]
LastStageLayersOpt = Annotated[int | None, typer.Option(
    "--last-stage-layers", min=1, max=MAX_LAYERS,
    help="Layers on the last pipeline stage (Megatron "
    "--decoder-last-pipeline-num-layers).")]
EmbeddingInSplitOpt = Annotated[bool, typer.Option(
    "--embedding-in-split", help="Count the embedding as a layer in the pipeline split "
    "(Megatron --account-for-embedding-in-pipeline-split).")]
LossInSplitOpt = Annotated[bool, typer.Option(
    "--loss-in-split", help="Count the loss as a layer in the pipeline split (Megatron "
    "--account-for-loss-in-pipeline-split).")]
CpCommOpt = Annotated[str, typer.Option(
    "--cp-comm", help="Context-parallel K/V exchange: p2p (ring attention, hidden behind "
    "attention) or all-gather (Llama 3's, exposed; Megatron --cp-comm-type).")]
OffloadActivationsOpt = Annotated[int, typer.Option(
    "--offload-activations", min=0, help="Layers per pipeline stage whose saved activations go "
    "to host memory in the forward and come back for the backward (Megatron-Core "
    "--cpu-offloading-num-layers; Grace parts over NVLink-C2C).")]
NoSpOpt = Annotated[bool, typer.Option("--no-sp", help="Disable sequence parallelism.")]
TpOverlapOpt = Annotated[bool, typer.Option("--tp-overlap", help="Overlap TP communication "
                                            "with GEMMs.")]
ReplicasOpt = Annotated[int | None, typer.Option(min=1, max=MAX_DEVICES,
                                                 help="Serving replicas (default 1).")]
DpAttentionOpt = Annotated[bool, typer.Option(
    "--dp-attention", help="Serving a MoE model: attention data-parallel over the --tp group "
    "(SGLang --enable-dp-attention, TensorRT-LLM enable_attention_dp): each device holds the "
    "whole attention weights and only its own requests' KV cache; with --ep, experts split "
    "over the group.")]
ScenarioOpt = Annotated[str | None, typer.Option(
    "--scenario", help="Serving scenario: batch (one fixed batch, --batch), offline (every "
    "request queued, the scheduler picks the batch), server (Poisson arrivals at --rate, "
    "or --trace), concurrency (closed loop of --concurrency N clients). Default: server "
    "with --rate/--trace, concurrency with --concurrency, else batch.")]
RateOpt = Annotated[float | None, typer.Option(
    "--rate", help="Server: requests per second over all replicas (Poisson).")]
ConcurrencyOpt = Annotated[int | None, typer.Option(
    "--concurrency", help="Concurrency scenario: N closed-loop clients over all replicas, "
    "each sending its next request when the previous one finishes (vllm bench serve "
    "--max-concurrency N); requests default to 10 per client.")]
RequestsOpt = Annotated[int | None, typer.Option(
    "--requests", min=1, max=MAX_REQUESTS, help="Requests to simulate (default 2000).")]
TraceOpt = Annotated[str | None, typer.Option(
    "--trace", help="Server: CSV or JSON-lines file with arrival_s, prompt_len, "
    "output_len per request.")]
LengthsOpt = Annotated[str, typer.Option(
    "--lengths", help="Length distribution around --prompt/--output: fixed, uniform, "
    "lognormal.")]
SpreadOpt = Annotated[float, typer.Option(
    "--spread", min=0.0, help="uniform: +-fraction of the mean; lognormal: coefficient of "
    "variation.")]
PrefixHitOpt = Annotated[float, typer.Option(
    "--prefix-hit", min=0.0, max=0.99, help="Fraction of each prompt found in the prefix "
    "cache.")]
SloTtftOpt = Annotated[str | None, typer.Option(
    "--slo-ttft", help="TTFT objective for goodput, e.g. 2s.")]
SloTpotOpt = Annotated[str | None, typer.Option(
    "--slo-tpot", help="TPOT objective for goodput, e.g. 50ms.")]
MaxSeqsOpt = Annotated[int | None, typer.Option(
    "--max-seqs", min=1, max=MAX_COUNT,
    help="Scheduler cap on running requests (vLLM max_num_seqs, TensorRT-LLM max_batch_size; "
    "with --dp-attention each rank's for vLLM and TensorRT-LLM, the group's for SGLang; "
    "default: the framework's).")]
MaxTokensOpt = Annotated[int | None, typer.Option(
    "--max-tokens", min=1, max=MAX_COUNT, help="Scheduler cap on tokens per iteration "
    "(max_num_batched_tokens / max_num_tokens; a rank's as --max-seqs; default: the "
    "framework's).")]
RecvIntervalOpt = Annotated[int | None, typer.Option(
    "--recv-interval", min=1, max=MAX_COUNT,
    help="SGLang --scheduler-recv-interval: new requests are taken once every N decode steps "
    "(at once after a prefill or when idle; default 1). --framework sglang only.")]
AdpBalanceOpt = Annotated[int | None, typer.Option(
    "--adp-balance", min=1, max=MAX_COUNT,
    help="TensorRT-LLM attention-DP balance (attention_dp_config enable_balance, timeout_iters "
    "N): under --dp-attention a new prompt waits until every rank has one, or N iterations. "
    "--framework tensorrt-llm-1 only.")]
AdpBatchingWaitOpt = Annotated[int | None, typer.Option(
    "--adp-batching-wait", min=0, max=MAX_COUNT,
    help="With --adp-balance: its batching_wait_iters W (default 0): once every rank has a "
    "prompt and a sequence decoding, W more iterations pass before the prompts go, so they "
    "batch.")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED,
                                      help="Random seed of arrivals and "
                                      "lengths.")]
DraftOpt = Annotated[str | None, typer.Option(
    "--draft", help="Speculative decoding with this draft model (preset, config.json or "
    "spec YAML) on the same devices and tensor-parallel group; needs --accept.")]
MtpOpt = Annotated[int | None, typer.Option(
    "--mtp", help="Speculative decoding with MTP/EAGLE-style heads: N extra transformer "
    "layers of the target's width sharing its embedding and LM head, run k times per "
    "step; needs --accept.")]
AcceptOpt = Annotated[str | None, typer.Option(
    "--accept", help="Speculative decoding: acceptance rate alpha of each draft token, in "
    "[0, 1); expected tokens per step (1 - alpha^(k+1)) / (1 - alpha).")]
DraftLenOpt = Annotated[str, typer.Option(
    "--draft-len", help="Speculative decoding: draft tokens k per step, or auto (the k in "
    "1..8 with the lowest TPOT at the running batch: --batch in the batch scenario, the "
    "mean running batch of a plain-decoding run of the same load otherwise). In the batch "
    "scenario TPOT = (k draft passes + one verify pass of k+1 tokens per sequence) / E and "
    "TTFT adds the drafter's prefill; the JSON's 'speculative' holds k, alpha, E, draft and "
    "verify seconds per step, the per-k table and plain decoding's figures.")]
DisaggregateOpt = Annotated[str | None, typer.Option(
    "--disaggregate", help="Disaggregated prefill/decode: P:D = P prefill instances of "
    "--prefill-tp devices and D decode instances of --decode-tp devices (devices = "
    "instances x tp); auto = search the split with the most goodput per device and "
    "compare it with colocated layouts (needs --rate and an SLO). With --mtp/--draft on a "
    "P:D split, the drafter runs on both pools at --draft-len K.")]
PrefillTpOpt = Annotated[int | None, typer.Option(
    "--prefill-tp", min=1, max=MAX_DEVICES,
    help="Devices per prefill instance (default: --tp).")]
DecodeTpOpt = Annotated[int | None, typer.Option(
    "--decode-tp", min=1, max=MAX_DEVICES,
    help="Devices per decode instance (default: --tp).")]
PrefillEpOpt = Annotated[int | None, typer.Option(
    "--prefill-ep", min=1, max=MAX_DEVICES,
    help="Expert parallelism inside each prefill instance, dividing --prefill-tp and the "
    "experts (default: --ep).")]
DecodeEpOpt = Annotated[int | None, typer.Option(
    "--decode-ep", min=1, max=MAX_DEVICES,
    help="Expert parallelism inside each decode instance, dividing --decode-tp and the "
    "experts (default: --ep).")]
PrefillDpaOpt = Annotated[bool, typer.Option(
    "--prefill-dp-attention", help="Attention data-parallel over each prefill instance's "
    "--prefill-tp group (MoE models; default: --dp-attention).")]
DecodeDpaOpt = Annotated[bool, typer.Option(
    "--decode-dp-attention", help="Attention data-parallel over each decode instance's "
    "--decode-tp group (MoE models; default: --dp-attention).")]
PueOpt = Annotated[float, typer.Option(
    "--pue", help="Facility PUE for kWh and CO2 (default 1.1, as the LLaMA paper).")]
GridOpt = Annotated[float, typer.Option(
    "--grid", help="Grid carbon intensity, kg CO2e per kWh (default 0.385, the US average "
    "the LLaMA paper uses).")]
LoadTpsOpt = Annotated[float | None, typer.Option(
    "--load", help="Serving demand in output tokens/s: $/M tokens when the devices are "
    "paid for but only this busy.")]


@dataclass(frozen=True)
class EstimateArgs:
    """``accelmap estimate``'s options as typer parsed them, one field per option in the
    command's order (the command builds it from its parameters and hands it on)."""

    model: str
    hw: str | None
    devices: int | None
    train: bool
    batch: int
    seq: int
    prompt: int
    output: int
    dtype: str
    weights: str
    moe_weights: str | None
    kv: str | None
    group: int
    framework: str | None
    optimizer: str
    recompute: str
    flash: bool
    tokens: str | None
    finetune: str
    lora_rank: int | None
    lora_targets: str | None
    sparsity: str
    fp8_scaling: str
    grad_accumulation: str
    pp_sends: str
    imbalance: float
    cluster: str | None
    scale_out: str | None
    tp: int | None
    pp: int | None
    dp: int | None
    cp: int
    ep: int | None
    zero: int | None
    micro_batch: int | None
    vpp: int
    schedule: str | None
    first_stage_layers: int | None
    last_stage_layers: int | None
    embedding_in_split: bool
    loss_in_split: bool
    no_sp: bool
    tp_overlap: bool
    cp_comm: str
    offload_activations: int
    force_tp: bool
    replicas: int | None
    dp_attention: bool
    scenario: str | None
    rate: float | None
    concurrency: int | None
    requests: int | None
    trace: str | None
    lengths: str
    spread: float
    prefix_hit: float
    slo_ttft: str | None
    slo_tpot: str | None
    max_seqs: int | None
    max_tokens: int | None
    recv_interval: int | None
    adp_balance: int | None
    adp_batching_wait: int | None
    seed: int
    draft: str | None
    mtp: int | None
    accept: str | None
    draft_len: str
    disaggregate: str | None
    prefill_tp: int | None
    decode_tp: int | None
    prefill_ep: int | None
    decode_ep: int | None
    prefill_dp_attention: bool
    decode_dp_attention: bool
    pue: float
    grid: float
    load_tps: float | None
    profile: str | None
    db: Path | None
    catalog: list[Path] | None
    json_out: bool
    report: Path | None


def estimate_cmd(
    model: ModelOpt, hw: EstimateHwOpt = None, devices: DevicesOpt = None, train: TrainOpt = False,
    batch: BatchOpt = 1, seq: SeqOpt = 2048, prompt: PromptOpt = 512, output: OutputOpt = 128,
    dtype: DtypeOpt = "bf16", weights: WeightsOpt = "bf16", moe_weights: MoeWeightsOpt = None,
    kv: KvOpt = None, group: GroupOpt = 128, framework: FrameworkOpt = None,
    optimizer: OptimizerOpt = "adamw", recompute: RecomputeOpt = "none", flash: FlashOpt = True,
    tokens: TokensOpt = None, finetune: FinetuneOpt = "full", lora_rank: LoraRankOpt = None,
    lora_targets: LoraTargetsOpt = None, sparsity: SparsityOpt = "none",
    fp8_scaling: Fp8ScalingOpt = "tensorwise",
    grad_accumulation: GradAccumulationOpt = "fused", pp_sends: PipeSendsOpt = "batched",
    imbalance: ImbalanceOpt = 1.0,
    cluster: ClusterOpt = None, scale_out: ScaleOutOpt = None, tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None, cp: CpOpt = 1, ep: EpOpt = None, zero: ZeroOpt = None,
    micro_batch: MicroBatchOpt = None, vpp: VppOpt = 1, schedule: ScheduleOpt = None,
    first_stage_layers: FirstStageLayersOpt = None, last_stage_layers: LastStageLayersOpt = None,
    embedding_in_split: EmbeddingInSplitOpt = False, loss_in_split: LossInSplitOpt = False,
    no_sp: NoSpOpt = False, tp_overlap: TpOverlapOpt = False, cp_comm: CpCommOpt = "p2p",
    offload_activations: OffloadActivationsOpt = 0,
    force_tp: ForceTpOpt = False, replicas: ReplicasOpt = None,
    dp_attention: DpAttentionOpt = False,
    scenario: ScenarioOpt = None, rate: RateOpt = None,
    concurrency: ConcurrencyOpt = None, requests: RequestsOpt = None, trace: TraceOpt = None,
    lengths: LengthsOpt = "fixed", spread: SpreadOpt = 0.0, prefix_hit: PrefixHitOpt = 0.0,
    slo_ttft: SloTtftOpt = None, slo_tpot: SloTpotOpt = None, max_seqs: MaxSeqsOpt = None,
    max_tokens: MaxTokensOpt = None, recv_interval: RecvIntervalOpt = None,
    adp_balance: AdpBalanceOpt = None, adp_batching_wait: AdpBatchingWaitOpt = None,
    seed: SeedOpt = 0,
    draft: DraftOpt = None, mtp: MtpOpt = None,
    accept: AcceptOpt = None, draft_len: DraftLenOpt = "auto", disaggregate: DisaggregateOpt = None,
    prefill_tp: PrefillTpOpt = None, decode_tp: DecodeTpOpt = None,
    prefill_ep: PrefillEpOpt = None, decode_ep: DecodeEpOpt = None,
    prefill_dp_attention: PrefillDpaOpt = False, decode_dp_attention: DecodeDpaOpt = False,
    pue: PueOpt = 1.1,
    grid: GridOpt = 0.385, load_tps: LoadTpsOpt = None, profile: ProfileOpt = None,
    db: DbOpt = None, catalog: CatalogOpt = None, json_out: JsonOpt = False,
    report: rep.ReportOpt = None,
) -> None:
    """Estimate time, throughput, memory, energy and cost of one model on one accelerator.

    Examples:
      accelmap estimate llama-3.1-8b --hw h100-sxm5-80gb --serve --batch 16 --prompt 2048
      accelmap estimate llama-2-7b --hw a100-sxm4-80gb --serve --weights int4 --group 32
      accelmap estimate gpt3-1.3b --hw a100-sxm4-80gb --train --batch 8 --seq 2048 --tokens 300B
      accelmap estimate llama-3.1-8b --hw a10g --train --finetune qlora --lora-rank 64 \
          --batch 4 --seq 2048 --recompute full
      accelmap estimate llama-2-70b --cluster dgx-h100 --train --finetune lora \
          --lora-targets q,v --tp 2 --pp 4 --batch 32 --seq 4096
      accelmap estimate llama-3.1-70b --cluster 64xH100 --train --tp 8 --pp 2 --zero 1 \
          --batch 512 --seq 8192 --recompute full
      accelmap estimate llama-3.1-70b --cluster dgx-h100 --serve --tp 8 --batch 32
      accelmap estimate llama-3.1-8b --hw tpu-v5e --devices 4 --serve --tp 4 --batch 8
      accelmap estimate gpt3-125m --hw local --train --batch 4 --seq 256 --dtype fp32
          (this machine as measured: the newest 'accelmap calibrate' profile of it)
      accelmap estimate llama-3.1-70b --cluster 2xH100 --serve --tp 2 --weights fp8
      accelmap estimate llama-3.1-8b --hw h100-sxm5-80gb --serve --profile my-h100
      accelmap estimate llama-3.1-8b --hw h100-sxm5-80gb --serve --batch 64 --sparsity 2:4
      accelmap estimate llama-3.1-70b --cluster 32xH100 --train --dtype fp8 --fp8-scaling \
          rowwise --tp 8 --zero 3 --batch 512 --seq 8192 --recompute full
      accelmap estimate megatron-529.6b --cluster 280xdgx-a100 --train --tp 8 --pp 35 \
          --zero 1 --batch 1920 --recompute full --grad-accumulation autograd \
          --pp-sends blocking-whole-grad   (MT-NLG on DeepSpeed's 2021 pipeline engine)
      accelmap estimate llama-3.1-70b --cluster 1x2xh100-sxm5-80gb --serve --tp 2 \
          --scenario offline --prompt 1000 --output 1000 --weights fp8 --framework tensorrt-llm
      accelmap estimate llama-3.1-70b --cluster dgx-h100 --serve --tp 8 --rate 5 \
          --prompt 2000 --output 300 --slo-ttft 2s --slo-tpot 50ms
      accelmap estimate llama-3.1-70b --cluster dgx-h100 --serve --tp 8 --rate 5 \
          --prompt 2000 --output 300 --draft llama-3.1-8b --accept 0.8
      accelmap estimate llama-3.1-70b --cluster 2xdgx-h100 --serve --rate 8 --prompt 2000 \
          --output 300 --slo-ttft 2s --slo-tpot 50ms --disaggregate 2:1 --prefill-tp 4 \
          --decode-tp 8
      accelmap estimate llama-3.1-70b --cluster 2xdgx-h100 --serve --rate 8 --prompt 2000 \
          --output 300 --slo-ttft 2s --slo-tpot 50ms --disaggregate auto
      accelmap estimate deepseek-r1 --cluster 1x8xh200 --serve --weights fp8 --tp 8 --ep 8 \
          --dp-attention --batch 256 --prompt 2000 --output 500
      accelmap estimate deepseek-r1 --cluster 4x8xh200 --serve --weights fp8 --concurrency 512 \
          --prompt 1024 --output 1024 --disaggregate 1:3 --tp 8 --ep 8 --dp-attention
    """
    _estimate(EstimateArgs(**locals()))  # the first statement: locals() is the parameters


def _estimate(o: EstimateArgs) -> None:
    """Run what the options ask for: a disaggregated run or split search, a simulated request
    stream, or one batch estimate (with its sensitivity, energy and cost)."""
    rep.check(o.report)
    framework = api.parse.framework(o.framework, o.train)
    measured = api.measured_device(o.hw, o.profile, o.db, get_catalog(o.catalog))  # --hw local
    load = _serving_load(o)
    # the one typed request the web builds too (api/requests.py); a disaggregated run has no
    # colocated layout: --tp and --ep are its pools' defaults, checked per pool
    req = api.EstimateRequest.of(o)
    if o.disaggregate is not None:
        req = replace(req, tp=None, ep=None, dp_attention=False)
    spec, system, wl, m = api.estimate_inputs(req, measured.catalog, measured.profile)
    sp = _speculation(o)
    pools = (o.prefill_tp, o.decode_tp, o.prefill_ep, o.decode_ep)
    if o.disaggregate is None and (any(v is not None for v in pools)
                                   or o.prefill_dp_attention or o.decode_dp_attention):
        raise InputError("--prefill-tp, --decode-tp, --prefill-ep, --decode-ep and "
                         "--prefill/--decode-dp-attention apply to --disaggregate P:D")
    if o.disaggregate is not None:
        _check_disaggregate(o, sp, load)
        assert load is not None and not isinstance(wl, api.Training)
        _disaggregated(spec, system, wl, framework, load, o.disaggregate,
                       (o.prefill_tp or o.tp or 1, o.decode_tp or o.tp or 1,
                        o.prefill_ep or o.ep or 1, o.decode_ep or o.ep or 1),
                       (o.prefill_dp_attention or o.dp_attention,
                        o.decode_dp_attention or o.dp_attention), o.json_out, sp)
    elif load is not None:
        assert not isinstance(wl, api.Training)
        _serving_run(o, spec, system, wl, _layout(spec, system, wl, m, framework, load),
                     framework, load, sp)
    else:
        _batch_estimate(o, spec, system, wl, m, framework, sp)


def _layout(spec: ModelSpec, system: System, wl: Inference, m: Mapping | None,
            framework: str | None = None, load: Load | None = None) -> Mapping:
    """The mapping given, else the layout that holds the model, said on stderr (a simulated
    run or a speculative batch takes a mapping; a batch estimate says it itself): for a
    simulated ``load``, one whose KV pool under the stack's memory rule holds its clients."""
    if m is not None:
        return m
    chosen, note = (api.scenario_layout(spec, system, wl, load, framework) if load is not None
                    else api.default_serving_layout(spec, system, wl))
    if note:
        sys.stderr.write(f"note: {note}\n")
    return chosen


def _serving_load(o: EstimateArgs) -> Load | None:
    """The request stream of a serving scenario other than batch (None: the batch scenario or
    training); load options outside serving are refused."""
    sc = o.scenario.strip().lower() if o.scenario is not None else (
        "server" if o.rate is not None or o.trace is not None else
        "concurrency" if o.concurrency is not None else "batch")
    if not o.train and sc != "batch":
        return api.serving_load(sc, requests=o.requests, rate=o.rate, trace=o.trace,
                                lengths=o.lengths, spread=o.spread, prefix_hit=o.prefix_hit,
                                slo_ttft=o.slo_ttft, slo_tpot=o.slo_tpot, seed=o.seed,
                                max_seqs=o.max_seqs, max_tokens=o.max_tokens,
                                concurrency=o.concurrency, recv_interval=o.recv_interval,
                                adp_balance=o.adp_balance,
                                adp_batching_wait=o.adp_batching_wait)
    if sc != "batch" or o.rate is not None or o.trace is not None or o.concurrency is not None:
        raise InputError("--scenario, --rate, --trace and --concurrency are for serving "
                         "(--serve)" if o.train else
                         f"--scenario {sc} takes no --rate, --trace or --concurrency")
    if o.recv_interval is not None:
        raise InputError("--recv-interval is SGLang's scheduler setting of a simulated run: add "
                         "--serve --framework sglang --scenario concurrency (or server, "
                         "offline)")
    if o.adp_balance is not None or o.adp_batching_wait is not None:
        raise InputError("--adp-balance and --adp-batching-wait are TensorRT-LLM's scheduler "
                         "settings of a simulated run: "
                         "add --serve --framework tensorrt-llm-1 --dp-attention --scenario "
                         "concurrency (or server, offline)")
    return None


def _speculation(o: EstimateArgs) -> Speculation | None:
    """Speculative decoding (--draft or --mtp with --accept), serving only; None without it."""
    if o.draft is None and o.mtp is None and o.accept is None:
        return None
    if o.train:
        raise InputError("--draft, --mtp and --accept are for serving (--serve)")
    return api.speculation(o.accept, draft=o.draft, mtp=o.mtp, draft_len=o.draft_len,
                           catalog=get_catalog(o.catalog))


def _check_disaggregate(o: EstimateArgs, sp: Speculation | None, load: Load | None) -> None:
    """--disaggregate runs a request stream, without --report; speculation with a given
    draft length on a P:D split (not in the split search)."""
    if sp is not None and o.disaggregate is not None and \
            (o.disaggregate.strip().lower() == "auto" or sp.draft_len is None):
        raise InputError("speculative decoding (--draft/--mtp) with --disaggregate takes a "
                         "P:D split and --draft-len K (not auto)")
    dpa = o.dp_attention or o.prefill_dp_attention or o.decode_dp_attention
    if dpa and (o.disaggregate or "").strip().lower() == "auto":
        raise InputError("the split search (--disaggregate auto) runs tensor-parallel pools: "
                         "give a P:D split with --dp-attention, or drop --dp-attention")
    if load is None:
        raise InputError("--disaggregate needs a request stream: --serve --scenario server "
                         "--rate R (not the batch scenario, nor --train)")
    if o.report:
        raise InputError("--report draws batch estimates and serving simulations, not "
                         "--disaggregate")


def _serving_run(o: EstimateArgs, spec: ModelSpec, system: System, wl: Inference, m: Mapping,
                 framework: str | None, load: Load, sp: Speculation | None) -> None:
    """A simulated request stream: saved, then printed as JSON or a table."""
    sim = api.serve(spec, system, wl, m, framework=framework, load=load,
                    imbalance=o.imbalance, speculation=sp)
    rep.save(o.report, lambda: api.reports.report_of("serving", sim.to_dict(), inputs=rep.inputs(),
                                             command=rep.command()))
    if o.json_out:
        emit_json(sim.to_dict())
        return
    print_serving_run(sim)


def _batch_estimate(o: EstimateArgs, spec: ModelSpec, system: System, wl: Training | Inference,
                    m: Mapping | None, framework: str | None, sp: Speculation | None) -> None:
    """One training step or serving batch with its extras (sensitivity, energy, cost): saved,
    then printed as JSON or tables."""
    est: Estimate
    if sp is not None:
        assert not isinstance(wl, api.Training)
        est = api.serve_batch(spec, system, wl, _layout(spec, system, wl, m),
                              framework=framework, imbalance=o.imbalance, speculation=sp)
    else:
        est = api.estimate(spec, system, wl, m, framework=framework, imbalance=o.imbalance)
    m = est.mapping  # the layout the engine ran (its own choice where none was given)
    # which resource binds (d ln time / d ln resource), cost and energy: api.reports.estimate_extras
    extras = api.reports.estimate_extras(spec, system, wl, m, est, framework=framework,
                                 imbalance=o.imbalance, catalog=get_catalog(o.catalog),
                                 load_tokens_per_s=o.load_tps, pue=o.pue,
                                 grid_kg_per_kwh=o.grid, speculative=sp is not None)
    missing = api.hardware.unpublished(system.accelerator)
    rep.save(o.report, lambda: api.report_estimate(est, system, m, tokens=o.tokens,
                                                   inputs=rep.inputs(), command=rep.command(),
                                                   extras=extras))
    if o.json_out:
        emit_json(api.reports.estimate_json(est, system, o.tokens, extras))
        return
    print_estimate(est, missing, system.cluster.origin if system.devices > 1 else None)
    if extras["sensitivity"] is not None:
        print_sensitivity(extras["sensitivity"])
    if est.feasible:
        print_energy(extras["energy"])
        print_cost(extras["cost"])


SHOWN = 20  # candidates listed in the terminal (the JSON has all of them)


def _disaggregated(spec: ModelSpec, system: System, wl: Inference, framework: str | None,
                   load: Any, text: str, pools: tuple[int, int, int, int],
                   dpa: tuple[bool, bool], json_out: bool, sp: Speculation | None = None) -> None:
    """--disaggregate P:D (``pools``: prefill tp, decode tp, prefill ep, decode ep; ``dpa``:
    DP attention in the prefill and in the decode pool) or auto."""
    if text.strip().lower() == "auto":
        search = api.plan_disaggregation(spec, system, wl, framework=framework, load=load)
        if json_out:
            emit_json(search.to_dict())
        else:
            print_split_search(search)
        return
    p_tp, d_tp, p_ep, d_ep = pools
    split = api.disaggregation(text, prefill_tp=p_tp, decode_tp=d_tp, prefill_ep=p_ep,
                               decode_ep=d_ep, prefill_dp_attention=dpa[0],
                               decode_dp_attention=dpa[1])
    run = api.serve_disaggregated(spec, system, wl, split, framework=framework, load=load,
                                  speculation=sp)
    if json_out:
        emit_json(run.to_dict())
    else:
        print_disagg_run(run)


def _run_header(con: Any, run: ServingRun | DisaggRun, what: str) -> bool:
    """The first line of a simulated run: what ran where, and its requests or why it cannot
    run; whether there is more to print."""
    head = (f"[bold]{run.model}[/bold] on [bold]{run.system}[/bold], {what}"
            f"{run.scenario.value} scenario, {run.framework}")
    if not run.feasible:
        con.print(f"{head}: [red]cannot run[/red]: {run.reason}")
        return False
    con.print(f"{head}: {run.metrics['requests']:,} requests")
    return True


def print_disagg_run(run: DisaggRun) -> None:
    from rich.table import Table

    con = console()
    if not _run_header(con, run, f"disaggregated {run.disaggregation.describe()}, "):
        return
    m = run.metrics
    t = Table(title="Disaggregated serving (simulated)")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("output tokens/s", f"{m['output_tokens_per_s']:,.0f}")
    t.add_row("output tokens/s per device (both pools)",
              f"{m['output_tokens_per_s_per_device']:,.0f}")
    for key, label in (("ttft_s", "TTFT (prefill + transfer)"), ("tpot_s", "TPOT"),
                       ("e2e_s", "end-to-end"), ("kv_transfer_s", "KV transfer (exposed)")):
        d = m.get(key) or {}
        if d:
            t.add_row(f"{label} p50 / p90 / p99",
                      " / ".join(fmt(d[q], "time") for q in ("p50", "p90", "p99")))
    if any(v is not None for v in (m.get("slo") or {}).values()):
        t.add_row("goodput (requests/s meeting the SLOs)",
                  f"{m['goodput_requests_per_s']:,.2f} ({m['slo_attainment']:.0%})")
    for pool in ("prefill_pool", "decode_pool"):
        p = m[pool]
        t.add_row(f"{pool.replace('_', ' ')}: busy / iterations / preemptions",
                  f"{p['busy_fraction']:.0%} / {p['iterations']:,} / {p['preemptions']:,}")
    if m.get("speculative"):
        s = m["speculative"]
        t.add_row("speculative: draft tokens k / tokens per decode step E",
                  f"{s['draft_len']} / {s['expected_tokens_per_step']:.2f}")
    con.print(t)
    for a in run.assumptions:
        con.print(_assumption_line(a), highlight=False)


def print_split_search(search: SplitSearch) -> None:
    from rich.table import Table

    con = console()
    t = Table(title=f"Prefill/decode split at {search.rate:.3g} requests/s "
                    f"({search.requests:,} requests per candidate, searched in "
                    f"{search.searched_s:.1f} s)")
    for col in ("layout", "devices", "goodput/s per device", "SLO met", "p90 TTFT", "p90 TPOT"):
        t.add_column(col, justify="left" if col == "layout" else "right")
    rows = sorted(search.candidates, key=lambda c: c.key(), reverse=True)
    shown = [c for c in rows if c.feasible][:SHOWN]
    for c in shown:
        m = c.metrics
        t.add_row(c.label, str(c.devices), f"{c.goodput_per_device:.3f}", f"{c.attainment:.0%}",
                  fmt(m["ttft_s"]["p90"], "time"), fmt(m["tpot_s"]["p90"], "time"))
    con.print(t)
    more = sum(c.feasible for c in rows) - len(shown)
    if more > 0:
        con.print(f"... {more} more candidates (all of them with --json)")
    for c in rows:
        if not c.feasible:
            con.print(f"{c.label}: [red]cannot run[/red]: {c.reason}", highlight=False)
    con.print(search.why, highlight=False)


def print_serving_run(run: ServingRun) -> None:
    from rich.table import Table

    con = console()
    if not _run_header(con, run, ""):
        return
    m = run.metrics
    band = f" {run.error_band.text}" if run.error_band else NO_BAND
    lat = f" ±{run.latency_error_band.pct:.0f} %" if run.latency_error_band else NO_BAND
    t = Table(title="Serving benchmark (simulated)")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("output tokens/s", f"{m['output_tokens_per_s']:,.0f}{band}")
    t.add_row("output tokens/s per device", f"{m['output_tokens_per_s_per_device']:,.0f}")
    t.add_row("total tokens/s", f"{m['total_tokens_per_s']:,.0f}")
    t.add_row("total / input tokens/s per device",
              f"{m['total_tokens_per_s_per_device']:,.0f} / "
              f"{m['input_tokens_per_s_per_device']:,.0f}")
    if m.get("tokens_per_s_per_user") is not None:
        t.add_row("tokens/s per user (1 / median TPOT; mean over requests)",
                  f"{m['tokens_per_s_per_user']:,.1f}; {m['tokens_per_s_per_user_mean']:,.1f}")
    t.add_row("requests/s", f"{m['requests_per_s']:,.2f}")
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"),
                       ("e2e_s", "end-to-end")):
        d = m.get(key) or {}
        if d:
            t.add_row(f"{label} p50 / p90 / p99",
                      " / ".join(fmt(d[q], "time") for q in ("p50", "p90", "p99")) + lat)
    slo = m.get("slo") or {}
    if any(v is not None for v in slo.values()):
        t.add_row("goodput (requests/s meeting the SLOs)",
                  f"{m['goodput_requests_per_s']:,.2f} ({m['slo_attainment']:.0%})")
    t.add_row("mean / peak running requests per replica",
              f"{m['mean_running']:,.0f} / {m['peak_running']:,}")
    t.add_row("KV capacity per replica", f"{m['kv_capacity_tokens']:,.0f} tokens")
    t.add_row("preemptions", f"{m['preemptions']:,}")
    t.add_row("iterations simulated", f"{m['iterations']:,} in {run.simulated_s:.2f} s")
    if sp := m.get("speculative"):
        pr = sp["plain_run"]
        t.add_row("speculative: k / alpha / E tokens per step",
                  f"{sp['draft_len']} / {sp['accept_rate']:g} / "
                  f"{sp['expected_tokens_per_step']:.2f}")
        t.add_row("speculative: draft + verify per step (at the running batch)",
                  f"{fmt(sp['draft_s_per_step'], 'time')} + {fmt(sp['verify_s_per_step'], 'time')}")
        t.add_row("plain decoding: output tokens/s", f"{pr['output_tokens_per_s']:,.0f}")
        for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT")):
            d = pr.get(key) or {}
            if d:
                t.add_row(f"plain decoding: {label} p50 / p90 / p99",
                          " / ".join(fmt(d[q], "time") for q in ("p50", "p90", "p99")))
    con.print(t)
    for a in run.assumptions:
        con.print(_assumption_line(a), highlight=False)


def print_estimate(est: Estimate, missing: dict[str, str] | None = None,
                   layout: str | None = None) -> None:
    """The estimate as tables; ``missing``: the price/TDP the catalog lacks
    (``api.hardware.unpublished``), shown as 'not published'; ``layout``: how the cluster was
    built."""
    from rich.table import Table

    con = console()
    m = est.metrics
    tight = ("[yellow]tight[/yellow]: over capacity with the caching allocator's reserve; fits "
             "if the allocator gives it back (PyTorch frees cached blocks and retries a failed "
             "allocation; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True fragments less)"
             if est.memory.reclaims else "[yellow]tight[/yellow]: within the memory model's "
             f"{est.memory.band:.1%} error band of capacity")
    verdict = (("fits" if est.memory_fit.value == "fits" else tight)
               if est.feasible else f"[red]does not fit[/red]: {est.reason}"
               if not est.violated_rule else f"[red]cannot run[/red]: {est.reason}")
    where = est.accelerator if est.system in (None, est.accelerator) else est.system
    con.print(f"[bold]{est.model}[/bold] on [bold]{where}[/bold], {est.phase.value}: "
              f"{verdict}")
    if layout:
        con.print(f"cluster: {layout}")
    if not est.feasible and est.phase.value != "train" and est.memory.items:
        # a serving batch that cannot be held: its reason and memory, not figures
        _print_memory(est)
        mb, mc = m.get("max_batch"), m.get("max_context")
        if mb is not None:
            con.print(f"largest batch that fits at this length: {mb:,}; longest context at this "
                      f"batch: {mc:,}" if mb else "no batch fits at this length: shard the "
                      "model (--tp, --pp), quantize the weights or the KV cache, or use a part "
                      "with more memory", highlight=False)
        return
    if est.violated_rule:  # a mapping rule is broken: there is nothing more to show
        return
    t = Table(title="Estimate")
    t.add_column("metric")
    t.add_column("value", justify="right")
    band = f" {est.error_band.text}" if est.error_band else NO_BAND
    rows = (_train_rows(m, band, missing) if est.phase.value == "train"
            else _serve_rows(est, m, band))
    rows += _energy_rows(m, missing)
    for k, v in rows:
        t.add_row(k, v)
    con.print(t)
    _print_memory(est)
    _print_time_breakdown(m)
    for a in est.assumptions:
        con.print(_assumption_line(a), highlight=False)


def _train_rows(m: dict[str, Any], band: str,
                missing: dict[str, str] | None) -> list[tuple[str, str]]:
    """A training step's rows: step time (with its band), throughput, utilization, and the
    time and cost to train the tokens asked for."""
    rows = [("step time", fmt(m["step_time_s"], "time") + band),
            ("tokens/s", f"{m['tokens_per_s']:,.0f}"),
            ("MFU (model FLOPs)", f"{m['mfu']:.1%}"), ("HFU", f"{m['hfu']:.1%}"),
            ("TFLOP/s per device (model)", f"{m['tflops_per_device']:.1f}")]
    if "time_to_train_s" in m:
        rows.append(("time to train", f"{m['time_to_train_s'] / 86400:,.1f} days"))
    if "cost_to_train_usd" in m:
        rows.append(("cost to train", f"${m['cost_to_train_usd']:,.0f}"))
    elif "time_to_train_s" in m and missing and "price_usd_per_hour" in missing:
        rows.append(("cost to train", f"{api.hardware.NOT_PUBLISHED} (no price in the catalog)"))
    return rows


def _serve_rows(est: Estimate, m: dict[str, Any], band: str) -> list[tuple[str, str]]:
    """A serving batch's rows: latencies (with their band), throughput, bandwidth use, the
    largest batch and context, and speculative decoding's figures when it ran."""
    lat = getattr(est, "latency_error_band", None)
    lband = f" ±{lat.pct:.0f} %" if lat else NO_BAND
    rows = [("TTFT", fmt(m["ttft_s"], "time") + lband),
            ("TPOT", fmt(m["tpot_s"], "time") + lband),
            ("output tokens/s", f"{m['tokens_per_s']:,.1f}" + band),
            ("decode memory-bandwidth utilization",
             "-" if (u := m.get("decode_bandwidth_utilization")) is None else f"{u:.0%}"),
            ("largest batch that fits", str(m.get("max_batch", "-"))),
            ("longest context at this batch",
             "-" if m.get("max_context") is None else f"{m['max_context']:,}")]
    if sp := m.get("speculative"):
        rows += [("speculative: k / alpha / E tokens per step",
                  f"{sp['draft_len']} / {sp['accept_rate']:g} / "
                  f"{sp['expected_tokens_per_step']:.2f}"),
                 ("speculative: draft + verify per step",
                  f"{fmt(sp['draft_s_per_step'], 'time')} + "
                  f"{fmt(sp['verify_s_per_step'], 'time')}"),
                 ("plain decoding: TPOT / output tokens/s",
                  f"{fmt(sp['plain']['tpot_s'], 'time')} / "
                  f"{sp['plain_tokens_per_s']:,.1f}")]
    return rows


def _energy_rows(m: dict[str, Any], missing: dict[str, str] | None) -> list[tuple[str, str]]:
    """Energy per token: the TDP upper bound (or why it is missing) and the ops+bytes lower
    bound."""
    rows: list[tuple[str, str]] = []
    if m.get("energy_j_per_token_tdp") is not None:
        rows.append(("energy/token at TDP (upper bound)", f"{m['energy_j_per_token_tdp']:.3g} J"))
    elif missing and "tdp_w" in missing:
        rows.append(("energy/token at TDP (upper bound)",
                     f"{api.hardware.NOT_PUBLISHED} (no TDP in the catalog)"))
    if m.get("energy_j_per_token_ops") is not None:
        rows.append(("energy/token from ops+bytes (lower bound)",
                     f"{m['energy_j_per_token_ops']:.3g} J"))
    return rows


def _print_time_breakdown(m: dict[str, Any]) -> None:
    """The eight operators that take the most time, summed over layers."""
    from rich.table import Table

    top = sorted(m.get("time_breakdown_s", {}).items(), key=lambda kv: -kv[1])[:8]
    tt = Table(title="Where the time goes (top operators, summed over layers)")
    tt.add_column("operator")
    tt.add_column("time", justify="right")
    for k, v in top:
        tt.add_row(k, fmt(v, "time"))
    console().print(tt)


def _print_memory(est: Estimate) -> None:
    from rich.table import Table

    mem = Table(title=f"Memory per device: {fmt(float(est.memory.total), 'bytes')} of "
                      f"{fmt(est.memory.capacity, 'bytes')} (margin "
                      f"{fmt(float(est.memory.margin), 'bytes')}; the memory band allows "
                      f"{fmt(float(est.memory.allowance), 'bytes')} over)")
    mem.add_column("item")
    mem.add_column("bytes", justify="right")
    for k, v in est.memory.items.items():
        mem.add_row(k, fmt(float(v), "bytes"))
    console().print(mem)


_FIGURE_LABEL = {"step_time_s": "step time", "ttft_s": "TTFT", "tpot_s": "TPOT"}
_RESOURCE_LABEL = {"compute": "compute", "memory_bandwidth": "memory bw",
                   "scale_up_bandwidth": "scale-up bw", "scale_out_bandwidth": "scale-out bw"}


def print_sensitivity(sens: Any) -> None:
    """Which resource binds: d ln time / d ln resource per timed figure."""
    from rich.table import Table

    d = (sens if isinstance(sens, dict) else sens.to_dict())["figures"]
    resources = [r for r in _RESOURCE_LABEL if any(r in f["elasticity"] for f in d.values())]
    t = Table(title="Which resource binds: d ln time / d ln resource (-1: time falls as the "
                    "resource grows; 0: it does not matter)")
    t.add_column("time")
    for r in resources:
        t.add_column(_RESOURCE_LABEL[r], justify="right")
    t.add_column("fixed latency/overhead", justify="right")
    t.add_column("binds")
    for fig, f in d.items():
        e = f["elasticity"]
        t.add_row(_FIGURE_LABEL.get(fig, fig),
                  *(f"{e[r]:+.2f}" if r in e else "-" for r in resources),
                  f"{max(0.0, f['fixed_latency_share']):.0%}",
                  _RESOURCE_LABEL.get(f["binding"] or "", "-"))
    console().print(t)


def roofline_cmd(
    model: Annotated[str, typer.Argument(help="Model preset, config.json or spec YAML.")],
    hw: HwOpt,
    phase: Annotated[str, typer.Option(help="prefill, decode or train.")] = "prefill",
    batch: BatchOpt = 1,
    seq: SeqOpt = 2048,
    prompt: PromptOpt = 512,
    output: OutputOpt = 128,
    dtype: DtypeOpt = "bf16",
    weights: WeightsOpt = "bf16",
    kv: KvOpt = None,
    group: GroupOpt = 128,
    framework: FrameworkOpt = None,
    recompute: RecomputeOpt = "none",
    flash: FlashOpt = True,
    sparsity: SparsityOpt = "none",
    profile: ProfileOpt = None,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Per-operator roofline: FLOPs, bytes, intensity vs the ridge point, time and bound.

    Examples:
      accelmap roofline llama-3.1-8b --hw h100-sxm5-80gb --phase decode --batch 8
      accelmap roofline mixtral-8x7b --hw mi300x --phase prefill --prompt 4096 --json
      accelmap roofline llama-3.1-8b --hw h100-sxm5-80gb --phase decode --profile my-h100
    """
    ph = api.parse.phase(phase)
    framework = api.parse.framework(framework, ph is api.Phase.TRAIN)
    measured = api.measured_device(hw, profile, db, get_catalog(catalog))  # --hw local
    spec, system, wl, m = _inputs(model, hw, None, ph is api.Phase.TRAIN, batch, seq, prompt,
                                  output, dtype, weights, kv, group, "adamw", recompute, flash,
                                  None, measured.catalog, profile=measured.profile,
                                  sparsity=sparsity)
    roof = api.roofline(spec, system, wl, ph, m, framework=framework)
    if json_out:
        emit_json(roof.to_dict())
        return
    from rich.table import Table

    total = roof.total_s
    t = Table(title=f"Roofline: {roof.model} on {roof.accelerator}, {roof.phase.value} "
                    f"(ridge {roof.ridge_flop_per_byte:.0f} FLOP/B at achievable bandwidth; "
                    f"total {fmt(total, 'time')})")
    for c in ("operator", "stage", "x", "FLOPs", "bytes", "FLOP/B", "time", "bound", "share"):
        t.add_column(c, justify="left" if c in ("operator", "stage", "bound") else "right")
    for r in roof.ops:
        t.add_row(r["name"], r["stage"], str(r["count"]), fmt(r["flops"], "flop"),
                  fmt(sum(r["bytes"].values()), "bytes"), f"{r['intensity_flop_per_byte']:.1f}",
                  fmt(r["total_s"], "time"), r["bound"],
                  f"{r['total_s'] / total:.1%}" if total else "-")
    console().print(t)
    for a in roof.assumptions:
        console().print(_assumption_line(a), highlight=False)
