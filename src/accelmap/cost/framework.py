"""Framework profiles: what a software stack hides or adds, as named behaviour (DESIGN), never as
per-case constants.

- ``kernel_overhead_s``: host launch plus inter-kernel gap per kernel. Eager PyTorch pays the
  launch each time, about 4-6 us (measured on an RTX 5070 Ti: "about 4-6 us" per submission,
  susun-blog.com/blog/pegainfer-3-cuda-graph); CUDA-graph replay (torch.compile "reduce-overhead",
  TensorRT-LLM, vLLM) leaves the device-side gap between kernels.
- ``step_overhead_s``: host work per forward pass (iteration): scheduling, sampling, launching
  the graph, the host-device sync; paid once per prefill and once per decode step.
- ``request_overhead_s``: host work once per request batch before its first token (runtime
  setup, buffer allocation), paid in TTFT only.
- ``request_latency_s``: latency on a request's own path that the serving loop does not wait
  for: the HTTP front end, tokenization and the hand-off to the scheduler before the request
  can join a batch, and the detokenization and streaming of its tokens back. SGLang runs these
  in separate processes (``TokenizerManager`` and ``DetokenizerManager``, talking to the
  ``Scheduler`` over ZMQ; sgl-project/sglang ``python/sglang/srt/managers/``), so they delay
  what a client sees (TTFT and end-to-end latency) without occupying the device.
- ``server_request_latency_s``: the same latency where the stack's engine runs behind a server
  of its own only when served (``trtllm-serve``: an OpenAI HTTP front end, the LLM API's
  tokenization and its executor worker processes over IPC, postprocess workers detokenizing;
  TensorRT-LLM ``tensorrt_llm/serve/openai_server.py``, ``executor/proxy.py``), and not in its
  offline benchmark (``trtllm-bench`` runs the executor in-process): added to
  ``request_latency_s`` by the serving scenarios that are served (concurrency, server), never
  offline. Fitted apart (``data/server_latency.yaml``, ``fitters/fit_server_latency.py``).
- an orchestrator's front end in place of the engine's (``orchestrated``): NVIDIA Dynamo runs
  its own HTTP front end, tokenizer and router (in Rust) and hands requests to the engine's
  workers, so the engine's own front-end latency (SGLang's tokenizer/detokenizer processes,
  trtllm-serve) gives way to Dynamo's, and in a disaggregated run Dynamo's hand-off between the
  prefill and decode workers (ai-dynamo/dynamo ``docs/architecture``; the engine's KV transfer
  itself is the engine's, serving/disagg.py). Fitted like the served latency
  (``data/server_latency.yaml`` ``dynamo``, ``fitters/fit_server_latency.py``).
- platform blocks: a stack's entry in framework_calibration.yaml may hold a ``rocm`` block that
  overrides its figures on AMD GPUs (``profile(name, vendor)``): the same framework runs other
  kernels (AITER / Triton on ROCm instead of FlashInfer, DeepGEMM, CUTLASS on CUDA) and HIP
  graphs instead of CUDA graphs, so its host and kernel figures are fitted apart.
- ``quantized_weight_efficiency`` (how much of the 16-bit streaming bandwidth a weight-only
  INT8/INT4 kernel reaches; for the 4-bit float formats, how much a block-scaled FP4 GEMM or
  MoE kernel of the stack reaches where it is bandwidth-bound: public B200 measurements put
  them well below 16-bit kernels, e.g. an NVFP4 GEMM at M=1 1.78 of 8 TB/s where fp16 reaches
  5-6 (FlashInfer issue #1732) and an NVFP4 grouped GEMM at m=16 about 3-4 TB/s where MXFP8
  nears 6 (CUTLASS issue #2266)).
- ``kernel_efficiency``: the share of the roofline's achievable speed (the catalog's measured
  best-shape GEMM and bandwidth figures) the stack's own kernels reach on a platform; every
  device op's time is divided by it. 1.0 where the stack runs the kernels those figures come
  from; fitted in a platform block where its kernel library falls short of them, as SGLang's
  on ROCm, whose AITER/Triton MoE and MLA kernels run DeepSeek-R1's decode steps at a time
  that scales with the device's bandwidth (MI300X against MI355X) far above the roofline's
  (``fitters/fit_sglang_profile.py``). Where the kernel library is built per GPU target (AITER:
  gfx942 for CDNA3, gfx950 for CDNA4), the block may hold a share per architecture
  (``architecture_efficiency``, the catalog's architecture name), fitted apart on each one's
  records; the platform's share stays for an architecture not named.
- ``custom_all_reduce``: the stack runs its own one-shot all-reduce kernel for small tensor-parallel
  messages where it beats NCCL (vLLM ``csrc/custom_all_reduce.cuh``, PR #2192; TensorRT-LLM
  ``cpp/tensorrt_llm/kernels/customAllReduceKernels.cu``; SGLang's port of both); its latency is
  ``collectives.custom_all_reduce()``.

The CUDA-graph stacks' figures are fitted jointly on every shared inference row of the stack by
``fitters/fit_framework_profiles.py`` (rule in its docstring; ``data/framework_calibration.yaml``
names the rows, the leave-one-out error and what was not calibrated). vLLM and SGLang have no
shared rows: their figures are borrowed from the fitted CUDA-graph stack and say so.
- ``dispatches``: eager PyTorch on a CPU (``eager-cpu``, ``cost/eager_cpu.py``) pays the host's
  dispatch of every aten op in series with the arithmetic: per graph op, its dispatch count times
  the measured seconds per dispatch, in place of one kernel overhead.
- ``fuses_elementwise``: norms, activations, rotary and residual adds run inside neighbouring
  kernels (TensorRT-LLM and vLLM fused kernels), so they cost no launch of their own, and no
  memory pass where they are folded into a GEMM's or attention kernel's epilogue. Megatron's
  fused kernels are separate launches that make one pass each: they are counted like eager
  elementwise ops.
- ``fused_pass``: the fused elementwise ops still make their memory pass. torch.compile's
  Inductor (default mode) leaves matmuls to cuBLAS as extern kernels and fuses the pointwise
  and reduction ops between them into Triton kernels of their own (Ansel et al., "PyTorch 2",
  ASPLOS 2024, sec. 5: TorchInductor's lowerings and scheduler); a GEMM epilogue takes them
  only under ``max_autotune`` with Triton/CUTLASS GEMM templates
  (``torch._inductor.config.epilogue_fusion``). Each fused kernel reads its inputs and writes
  its output once, which is the graph's count for a vector op (one read and one write per
  element); the launch is the fused kernel's, shared, so none is charged per op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from accelmap.cost.attention import AttentionKernel
from accelmap.cost.eager_cpu import DEFAULT_DISPATCH_S, DISPATCH_SOURCE, Dispatches, for_model
from accelmap.cost.host import DISPATCH_SOURCE as GPU_DISPATCH_SOURCE
from accelmap.cost.host import Launch
from accelmap.errors import InputError
from accelmap.units import DType

if TYPE_CHECKING:
    from accelmap.hardware.schema import Accelerator


def eager_passes_for(spec: Any) -> dict[str, Any]:
    """The written-out ops of the reference eager model for ``spec`` (cost/eager_passes.py):
    RMSNorm only where the spec has it (nn.LayerNorm is one fused kernel), RoPE where rotary,
    the gated activation where gated; residual adds always."""
    from accelmap.cost.eager_passes import PASSES
    from accelmap.models.schema import FFNKind, NormKind, PositionKind

    keep = {"residual"}
    if spec.norm is not NormKind.LAYERNORM:
        keep |= {"norm", "final_norm"}
    if spec.position is PositionKind.ROPE:
        keep.add("attention/rope")
    if spec.ffn_kind is FFNKind.GATED:
        keep.add("mlp/act")
    return {k: v for k, v in PASSES.items() if k in keep}


EAGER_LAUNCH_S = 5e-6  # middle of the 4-6 us per launch measured by the pegainfer post


class Framework(StrEnum):
    EAGER = "eager"
    EAGER_CPU = "eager-cpu"  # eager PyTorch on a CPU: host dispatch in series (cost/eager_cpu.py)
    TORCH_COMPILE = "torch-compile"  # Inductor fusion (+ CUDA graphs in gpt-fast decode)
    TENSORRT_LLM = "tensorrt-llm"
    # TensorRT-LLM 1.x: the PyTorch-backend executor (the default backend from 1.0: Python
    # scheduler with the overlap scheduler, CUDA graphs of the decode batch, FlashInfer/CUTLASS
    # kernels), its own host figures fitted on 2025 rows (fitters/fit_trtllm1_profile.py); the
    # plain name keeps the TensorRT-engine releases' (v0.x) fit
    TENSORRT_LLM_1 = "tensorrt-llm-1"
    VLLM = "vllm"
    SGLANG = "sglang"
    # AMD's ATOM (ROCm/ATOM, "AiTer Optimized Model"): AITER kernels, HIP graphs of the decode
    # batch (prefill eager), an OpenAI server process that tokenizes and detokenizes itself and
    # engine-core processes over ZMQ (atom/entrypoints/openai/api_server.py,
    # atom/model_engine/engine_core_mgr.py); its figures are fitted on InferenceX ATOM sweeps
    # (fitters/fit_atom_profile.py). It runs on AMD GPUs only.
    ATOM = "atom"
    MEGATRON = "megatron"
    FSDP = "fsdp"  # PyTorch FSDP / torchtitan / llm-foundry (Composer) without torch.compile
    # Default stacks of the non-GPU classes (cost/execution.py), each a named behaviour:
    XLA = "xla"  # TPU: JAX/PyTorch-XLA, MaxText, JetStream
    GRAPH = "graph-compiler"  # Gaudi graph mode, AWS Neuron, Tenstorrent TT-Metal traces
    DATAFLOW = "dataflow"  # SRAM machines: compiler-scheduled static dataflow
    FPGA_OVERLAY = "fpga-overlay"  # FPGA LLM overlays (FlightLLM, DFX)
    LLAMA_CPP = "llama.cpp"  # CPUs and edge NPUs: ggml graph, quantized weights
    # vendor stacks of GPU-like ASICs: a compiled graph each, with their own host time per step
    HABANA = "optimum-habana"  # Intel Gaudi: lazy mode + HPU graphs (optimum-habana)
    NEURON = "neuron"  # AWS Inferentia/Trainium: NeuronX (transformers-neuronx, NxD)
    TT_METAL = "tt-metal"  # Tenstorrent: TT-Metal/TT-NN traces


# Documented defaults for how many prompt tokens one prefill pass takes (memory of the
# activations scales with it): TensorRT-LLM ``max_num_tokens`` default 8192 (TensorRT-LLM docs,
# "Best practices for tuning"), vLLM ``max_num_batched_tokens`` 8192 with chunked prefill (vLLM
# docs, "Optimization and tuning").
PREFILL_CHUNK: dict[Framework, int] = {Framework.TENSORRT_LLM: 8192,
                                       Framework.TENSORRT_LLM_1: 8192, Framework.VLLM: 8192,
                                       # SGLang ``chunked_prefill_size`` 8192 (server_args.py
                                       # default on large GPUs)
                                       Framework.SGLANG: 8192,
                                       # ATOM ``max_num_batched_tokens`` 16384 (atom/config.py):
                                       # a prefill batch of whole prompts up to it
                                       Framework.ATOM: 16384}
# Stacks that run a custom one-shot all-reduce for small tensor-parallel messages (see above).
CUSTOM_ALL_REDUCE = (Framework.TENSORRT_LLM, Framework.TENSORRT_LLM_1, Framework.VLLM,
                     Framework.SGLANG)
# Stacks that replay CUDA graphs and fuse elementwise ops: their figures come from the fit.
GRAPH_STACKS = (Framework.TENSORRT_LLM, Framework.TENSORRT_LLM_1, Framework.TORCH_COMPILE,
                Framework.VLLM, Framework.SGLANG, Framework.ATOM)
# Stacks whose fused elementwise kernels are kernels of their own (``fused_pass``)
OWN_KERNEL_FUSION = (Framework.TORCH_COMPILE,)
# TensorRT-LLM releases from this one on run the 1.x profile (the PyTorch backend became the
# default in 1.0: TensorRT-LLM 1.0 release notes)
TRTLLM_PYTORCH_FROM = (1, 0)


def release_stack(fw: Framework, version: str) -> Framework:
    """The profile of ``fw`` at release ``version`` ("1.1.0rc1", "v0.17", as written after the
    stack's name): TensorRT-LLM 1.0 and later is ``tensorrt-llm-1``; any other stack, or no
    version, stays as it is."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", version or "")
    if fw is Framework.TENSORRT_LLM and m and (int(m[1]), int(m[2])) >= TRTLLM_PYTORCH_FROM:
        return Framework.TENSORRT_LLM_1
    return fw


@dataclass(frozen=True)
class FrameworkProfile:
    name: Framework
    kernel_overhead_s: float
    fuses_elementwise: bool
    overhead_source: str
    # Weight-only quantized GEMMs (dequantize in the kernel) stream their weights at this
    # fraction of the bandwidth a 16-bit GEMM reaches; 1.0 where not calibrated.
    quantized_weight_efficiency: dict[DType, float] = field(default_factory=dict)
    # Prompt tokens processed per prefill pass (chunked prefill / max_num_tokens); None = all.
    prefill_chunk_tokens: int | None = None
    # The attention kernel generation the stack runs (cost/attention.py): a named feature of
    # the software, not a fitted factor. FlashAttention-2 unless a stack or version says so.
    attention: AttentionKernel = AttentionKernel.FA2
    # host work per forward pass (prefill or decode step) and per request batch (TTFT only)
    step_overhead_s: float = 0.0
    request_overhead_s: float = 0.0
    # TTFT and end-to-end latency a client sees beyond the serving loop (front end,
    # tokenizer/detokenizer processes); it occupies no device time (see the module doc)
    request_latency_s: float = 0.0
    # the same added when the stack is served, not benchmarked offline (module doc)
    server_request_latency_s: float = 0.0
    custom_all_reduce: bool = False
    # fused elementwise ops keep their one memory pass (Inductor's Triton kernels beside cuBLAS
    # GEMMs: module doc); False: folded into a neighbouring kernel, no pass of their own
    fused_pass: bool = False
    # Decode attention of a grouped-query model with an 8-bit KV cache streams (and dequantizes)
    # the group's K/V once per *query* head: TensorRT-LLM before 0.7, whose masked-MHA kernel
    # runs one thread block per query head (the "MMHA optimization for MQA and GQA" came in
    # TensorRT-LLM PR #524, Dec 2023, after v0.6.1; the XQA kernel in 0.8). A named feature of
    # a release (validate/resolve.py sets it from the row's version), not a fitted factor.
    decode_kv_per_query_head: bool = False
    # figures not fitted to any measurement, each with why (e.g. "borrowed from torch-compile")
    not_calibrated: dict[str, str] = field(default_factory=dict)
    # eager PyTorch on a CPU: aten dispatches per graph op, paid in series (cost/eager_cpu.py);
    # None = one kernel overhead per graph op
    dispatches: Dispatches | None = None
    serving: bool = False  # the dispatch table of a serving pass (KV-cache updates, sampling)
    # an unfused stack keeps an elementwise op's output next to its input (prefill peak memory)
    unfused_transients: bool = False
    # how the host issues kernels (cost/host.py): eager on a GPU overlaps the host's dispatch
    # with the device through the launch queue; eager-cpu pays it in series
    launch: Launch = Launch.GRAPH
    # the written-out elementwise ops of the reference eager model, each kernel a memory pass
    # (cost/eager_passes.py), set by for_model; and the dtype of its residual stream (fp32
    # under autocast with fp32 parameters; None = the ops' own dtype)
    passes: Mapping[str, Any] | None = None
    stream_dtype: DType | None = None
    # the platform block of the calibration the figures came from ("rocm"), None: the stack's
    # own figures; the error bands of a platform are its own (engine/error_band.py)
    platform: str | None = None
    # share of the roofline's achievable speed the stack's kernels reach (module doc); 1.0: all
    kernel_efficiency: float = 1.0
    # the same per GPU architecture where the platform's kernel library differs by target
    # (AITER's gfx942 and gfx950 kernels: module doc), (architecture, share) pairs; an
    # architecture not named keeps kernel_efficiency
    architecture_efficiency: tuple[tuple[str, float], ...] = ()

    def efficiency_on(self, acc: Accelerator) -> float:
        """The share of the roofline's speed this stack's kernels reach on ``acc``: its
        architecture's where fitted apart, else the platform's ``kernel_efficiency``."""
        if acc.sparsity_2_4 is None:  # no architecture in the catalog: the platform's share
            return self.kernel_efficiency
        return dict(self.architecture_efficiency).get(acc.sparsity_2_4.architecture,
                                                      self.kernel_efficiency)

    @property
    def band_stack(self) -> str:
        """The stack's name in engine/data/error_bands.yaml: ``sglang`` or ``sglang rocm``."""
        return self.name.value if self.platform is None else f"{self.name.value} {self.platform}"

    def for_model(self, spec: Any, serving: bool = False) -> FrameworkProfile:
        """This profile with the dispatch table of ``spec``'s implementation (eager stacks with a
        dispatch table: eager-cpu, and eager on a GPU, whose host time is ``cost/host.py``'s)."""
        if self.dispatches is None:
            return self
        return replace(self, dispatches=for_model(spec), serving=serving,
                       passes=eager_passes_for(spec))


@lru_cache(maxsize=1)
def _calibration() -> dict[str, dict[str, object]]:
    path = Path(str(resources.files("accelmap").joinpath("cost/data/framework_calibration.yaml")))
    return dict(yaml.safe_load(path.read_text()) or {})


@lru_cache(maxsize=1)
def _server_latency() -> dict[str, dict[str, Any]]:
    """data/server_latency.yaml: the served-only request latency per stack (module doc)."""
    path = Path(str(resources.files("accelmap").joinpath("cost/data/server_latency.yaml")))
    return dict(yaml.safe_load(path.read_text()) or {})


def server_latency_s(fw: Framework | str) -> float:
    """The stack's (or an orchestrator's: ``dynamo``) served-only request latency (0 where
    none is fitted)."""
    name = fw.value if isinstance(fw, Framework) else fw
    return float((_server_latency().get(name) or {}).get("request_latency_s", 0.0))


def orchestrated(fw: FrameworkProfile, orchestrator: str) -> FrameworkProfile:
    """``fw``'s engine behind ``orchestrator``'s front end (module doc): its request latency in
    place of the engine's own, where one is fitted; else ``fw`` as it is."""
    entry = _server_latency().get(orchestrator)
    if entry is None:
        return fw
    return replace(fw, request_latency_s=float(entry.get("request_latency_s", 0.0)),
                   server_request_latency_s=0.0)


AMD_VENDOR = "AMD"  # the catalog's ``vendor`` of AMD GPUs (hardware/data/accelerators)


def platform_of(vendor: str | None) -> str:
    """The software platform a GPU of ``vendor`` runs: ``rocm`` for AMD, else ``cuda``."""
    return "rocm" if vendor is not None and vendor.strip() == AMD_VENDOR else "cuda"


def _platform_calibration(fw: Framework, vendor: str | None) -> tuple[dict[str, Any], str | None]:
    """The stack's calibration entry with its platform block (``rocm``) laid over it, and the
    platform whose block was used (None: none was)."""
    cal: dict[str, Any] = dict(_calibration().get(fw.value, {}))
    block = cal.pop("rocm", None)
    if platform_of(vendor) == "rocm" and isinstance(block, dict):
        return {**cal, **block,
                "not_calibrated": {**(cal.get("not_calibrated") or {}),
                                   **(block.get("not_calibrated") or {})}}, "rocm"
    return cal, None


def profile(name: Framework | str, vendor: str | None = None) -> FrameworkProfile:
    """The stack's profile; ``vendor`` (the accelerator's catalog vendor) picks a platform
    block of the calibration where the stack has one (module doc)."""
    try:
        fw = Framework(name)
    except ValueError:
        raise InputError(f"unknown framework {name!r}; use one of "
                         f"{', '.join(f.value for f in Framework)}") from None
    if fw is Framework.ATOM and vendor is not None and platform_of(vendor) != "rocm":
        raise InputError(f"framework atom (AMD's ATOM) runs on AMD Instinct GPUs only; a "
                         f"{vendor.strip()} part takes vllm, sglang or tensorrt-llm")
    eager_gaps = {"step_overhead_s": "no shared row of an eager serving loop: 0 s",
                  "request_overhead_s": "no shared row of an eager serving loop: 0 s"}
    if fw is Framework.EAGER:
        # the device side: a launch gap per graph op; the host side: every aten op of the
        # reference eager implementation dispatched, overlapped with the device (cost/host.py)
        return FrameworkProfile(fw, EAGER_LAUNCH_S, False,
                                f"eager launch, 4-6 us (pegainfer); host: {GPU_DISPATCH_SOURCE} "
                                "unless measured, overlapped with the device",
                                dispatches=Dispatches(), launch=Launch.EAGER,
                                unfused_transients=True, not_calibrated=eager_gaps)
    if fw is Framework.EAGER_CPU:
        return FrameworkProfile(
            fw, DEFAULT_DISPATCH_S, False,
            f"host dispatch per aten op in series with compute; {DISPATCH_SOURCE} unless "
            "measured (accelmap measure overhead)",
            dispatches=Dispatches(), unfused_transients=True, not_calibrated=eager_gaps,
            launch=Launch.IN_SERIES)
    if fw is Framework.MEGATRON:
        # Megatron launches eagerly; its fused kernels (bias-GeLU, bias-dropout-add, fused
        # LayerNorm, RoPE) still make one memory pass each, which is what the graph's vector ops
        # already count, so they are not free here.
        return FrameworkProfile(fw, EAGER_LAUNCH_S, False,
                                "eager launch; one memory pass per fused elementwise kernel",
                                not_calibrated=eager_gaps, launch=Launch.EAGER)
    if fw in COMPILED_STACKS:
        return _compiled(fw)
    cal, plat = _platform_calibration(fw, vendor)
    if fw is Framework.FSDP:
        # Eager PyTorch under FSDP: every op a launch of its own, no elementwise fusion (that
        # needs torch.compile, a separate profile); parameter all-gathers are prefetched, which
        # is the engine's OverlapPolicy.zero3_prefetch. The per-kernel overhead may be
        # calibrated in framework_calibration.yaml, else the eager launch cost.
        return FrameworkProfile(
            fw, float(cal.get("kernel_overhead_s", EAGER_LAUNCH_S)), False,
            str(cal.get("source", "eager launch, 4-6 us (pegainfer); not calibrated")),
            not_calibrated=eager_gaps, launch=Launch.EAGER)
    quant = {DType(k): float(v) for k, v in (cal.get("quantized_weight_efficiency") or {}).items()}
    missing = {k: "no entry in framework_calibration.yaml: 0" for k in
               ("kernel_overhead_s", "step_overhead_s", "request_overhead_s") if k not in cal}
    return FrameworkProfile(
        fw,
        float(cal.get("kernel_overhead_s", 0.0)),
        True,
        str(cal.get("source", "no calibration: 0 s per kernel")),
        quantized_weight_efficiency=quant,
        prefill_chunk_tokens=PREFILL_CHUNK.get(fw),
        step_overhead_s=float(cal.get("step_overhead_s", 0.0)),
        request_overhead_s=float(cal.get("request_overhead_s", 0.0)),
        request_latency_s=float(cal.get("request_latency_s", 0.0)),
        server_request_latency_s=server_latency_s(fw),
        platform=plat,
        kernel_efficiency=float(cal.get("kernel_efficiency", 1.0)),
        architecture_efficiency=tuple(sorted(
            (str(k), float(v)) for k, v in (cal.get("architecture_efficiency") or {}).items())),
        custom_all_reduce=fw in CUSTOM_ALL_REDUCE,
        fused_pass=fw in OWN_KERNEL_FUSION,
        not_calibrated={**missing, **{str(k): str(v) for k, v in
                                      (cal.get("not_calibrated") or {}).items()}},
    )


# Compiled stacks of the non-GPU classes: the whole forward pass is one compiled program, so no
# host launch per operator; what each fuses and why (cost/execution.py picks them per class).
COMPILED_STACKS = (Framework.XLA, Framework.GRAPH, Framework.DATAFLOW, Framework.FPGA_OVERLAY,
                   Framework.LLAMA_CPP, Framework.HABANA, Framework.NEURON, Framework.TT_METAL)
VENDOR_STACKS = (Framework.HABANA, Framework.NEURON, Framework.TT_METAL)
_COMPILED: dict[Framework, tuple[bool, str]] = {
    # XLA compiles a jitted step into one executable whose fusion pass merges elementwise ops
    # into their producers and consumers (XLA docs, "Operation semantics" / "XLA architecture":
    # loop and input fusion); the host dispatches the executable once per step, not per op
    # (JAX docs, "Just-in-time compilation").
    Framework.XLA: (True, "XLA: one compiled executable per step (no per-op launch); "
                          "elementwise ops fused by XLA's fusion passes"),
    # Intel Gaudi graph (lazy) mode accumulates ops and runs them as one compiled recipe whose
    # graph compiler fuses TPC elementwise kernels (Intel Gaudi docs, "PyTorch Gaudi
    # integration architecture": lazy mode, graph compiler); AWS Neuron compiles the model
    # ahead of time into one NEFF (AWS Neuron docs, "Neuron Compiler").
    Framework.GRAPH: (True, "compiled graph (Gaudi lazy/graph mode, Neuron NEFF): no per-op "
                            "host launch; elementwise fused by the graph compiler"),
    # Groq's compiler schedules every instruction ahead of time; vector units chain
    # elementwise work on streams between memory and the MXM (Abts et al., ISCA 2020 sec. 2-4);
    # Cerebras and SambaNova compile the graph into a spatial dataflow of kernels (Prabhakar et
    # al. 2024, SN40L, sec. 4: operator fusion into streaming dataflow pipelines).
    Framework.DATAFLOW: (True, "compiled static dataflow schedule: no launches; elementwise "
                               "ops streamed between matrix ops (fused)"),
    # FPGA LLM overlays fuse the non-GEMM operators into the matrix pipeline and keep
    # intermediates on chip (FlightLLM, Zeng et al. FPGA 2024 sec. 4: "always-on-chip decode";
    # DFX, Hong et al. MICRO 2022 sec. 4).
    Framework.FPGA_OVERLAY: (True, "FPGA overlay: instruction-driven layer pipeline, non-GEMM "
                                   "ops fused on chip, no host launch per op"),
    # llama.cpp runs the ggml graph node by node on the CPU threads: each node is a function
    # call with a thread barrier (no device launch), and most elementwise nodes make their own
    # pass over memory (ggml.c ``ggml_graph_compute``).
    Framework.LLAMA_CPP: (False, "llama.cpp/ggml graph: one pass per node, no device launch"),
    Framework.HABANA: (True, "Gaudi lazy mode with HPU graphs (optimum-habana): one recipe per "
                             "step, elementwise fused by the graph compiler"),
    Framework.NEURON: (True, "AWS Neuron: the model compiled ahead of time into one NEFF, "
                             "elementwise fused"),
    Framework.TT_METAL: (True, "Tenstorrent TT-Metal: a captured trace per decode step, "
                               "elementwise fused into the matmul programs"),
}


@lru_cache(maxsize=1)
def _class_calibration() -> dict[str, Any]:
    """cost/data/class_calibration.yaml (fitters/fit_classes.py): dataflow floors and the
    vendor stacks' host time per step."""
    path = Path(str(resources.files("accelmap").joinpath("cost/data/class_calibration.yaml")))
    return dict(yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def class_calibration() -> dict[str, Any]:
    """The fitted per-class parameters (one cached read of class_calibration.yaml)."""
    return _class_calibration()


def _compiled(fw: Framework) -> FrameworkProfile:
    fuses, source = _COMPILED[fw]
    gaps = {"step_overhead_s": "host time per step not published for this stack: 0 s",
            "request_overhead_s": "not published for this stack: 0 s"}
    step = 0.0
    if fw in VENDOR_STACKS:
        row = (_class_calibration().get("stacks") or {}).get(fw.value)
        if row:  # fitted on the stack's first published per-token latency
            step = float(row["step_overhead_s"])
            gaps.pop("step_overhead_s")
            source = f"{source}; host time per step {step * 1e3:.3g} ms ({row['source']})"
    return FrameworkProfile(fw, 0.0, fuses, source, step_overhead_s=step, not_calibrated=gaps)
