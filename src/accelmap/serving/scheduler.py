"""Iteration-level scheduling policies and each serving framework's documented defaults.

Every framework here batches at the granularity of one model iteration (Orca, Yu et al. OSDI
2022, "iteration-level scheduling"): after each forward pass finished requests leave and waiting
ones join. What differs is how a request is admitted and what happens when the KV cache fills:

- ``KvPolicy.ON_DEMAND`` (vLLM, SGLang): KV blocks are allocated as tokens are produced (Kwon et
  al. SOSP 2023, PagedAttention sec. 4.2-4.5); when a running request needs a block and none is
  free, the most recently admitted running request is preempted and later recomputed
  (vLLM's default preemption mode since v0.4, "recompute"; PagedAttention sec. 4.5).
- ``KvPolicy.RESERVE`` (TensorRT-LLM ``GUARANTEED_NO_EVICT``, its default capacity scheduler
  policy, TensorRT-LLM docs "Useful runtime options"): a request is admitted only when the blocks
  for its prompt and its whole output can be reserved, so nothing is ever paused.
- ``KvPolicy.STATIC``: one batch at a time (gpt-fast, eager PyTorch, TensorRT-LLM's legacy
  STATIC_BATCH): the next batch starts when the whole batch has finished.

Chunked prefill (Agrawal et al. 2024, Sarathi-Serve, sec. 4; vLLM's default scheduler since
V1): decode tokens of running requests are scheduled first, and the rest of the per-iteration
token budget (``max_batched_tokens``) goes to prompt chunks, first come first served.
Without chunking a prompt is prefilled whole, and only when it fits in the budget.

KV pool: vLLM and SGLang take a fraction of the *total* device memory for everything and give
the KV cache what is left (vLLM ``gpu_memory_utilization`` 0.9; SGLang ``mem_fraction_static``);
TensorRT-LLM gives the KV cache a fraction of the memory *free* after weights and activations
(``KvCacheConfig.free_gpu_memory_fraction`` 0.9, TensorRT-LLM docs "How to change KV cache
behavior").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from accelmap.cost.framework import Framework
from accelmap.errors import InputError


class KvPolicy(StrEnum):
    ON_DEMAND = "on-demand"  # allocate per token, preempt (recompute) when full
    RESERVE = "reserve"  # reserve prompt + max output at admission, never preempt
    STATIC = "static"  # one fixed batch at a time


class KvBudget(StrEnum):
    OF_TOTAL = "of-total"  # fraction of all device memory, minus everything else (vLLM, SGLang)
    OF_FREE = "of-free"  # fraction of the memory left after weights + activations (TRT-LLM)


@dataclass(frozen=True)
class SchedulerConfig:
    """The caps one serving instance (one replica) schedules under."""

    policy: KvPolicy
    max_seqs: int  # running requests at once (vLLM max_num_seqs, TRT-LLM max_batch_size)
    max_batched_tokens: int  # tokens per iteration (vLLM max_num_batched_tokens, max_num_tokens)
    chunked_prefill: bool
    block_tokens: int  # tokens per paged-KV block
    kv_budget: KvBudget
    memory_fraction: float  # of total (OF_TOTAL) or of free memory (OF_FREE)
    prefix_caching: bool = True
    source: str = ""
    # DP-attention ranks scheduled as one group (serving.scenario.scheduler_for): each runs its
    # own requests, so one request's prompt chunk takes at most a rank's share of the tokens
    ranks: int = 1
    # SGLang ``--scheduler-recv-interval`` (default 1): the scheduler takes new requests off its
    # socket only once every this many decode steps (serving/simulator.py, RECV_* below)
    recv_interval: int = 1
    # TensorRT-LLM's attention-DP balance (``attention_dp_config: enable_balance: true,
    # timeout_iters: N, batching_wait_iters: 0``): new prompts wait until every rank has one, or
    # N iterations (serving/simulator.py); 0: off, the stack's default
    adp_balance_iters: int = 0
    # its ``batching_wait_iters`` W: with every rank holding a prompt and a generation request,
    # W such iterations pass before the prompts go (serving/simulator.py); 0: at once
    adp_batching_wait_iters: int = 0

    def __post_init__(self) -> None:
        for name in ("max_seqs", "max_batched_tokens", "block_tokens", "recv_interval"):
            if getattr(self, name) < 1:
                raise InputError(f"scheduler {name} must be at least 1, got {getattr(self, name)}")
        for name in ("adp_balance_iters", "adp_batching_wait_iters"):
            if getattr(self, name) < 0:
                raise InputError(f"scheduler {name} must be at least 0, got "
                                 f"{getattr(self, name)}")
        if not 0 < self.memory_fraction <= 1:
            raise InputError(f"scheduler memory fraction must be in (0, 1], got "
                             f"{self.memory_fraction}")

    def with_caps(self, max_seqs: int | None = None, max_batched_tokens: int | None = None,
                  chunked_prefill: bool | None = None,
                  memory_fraction: float | None = None) -> SchedulerConfig:
        """The same scheduler with the user's caps (``--max-seqs``, ``--max-tokens``) and KV
        memory fraction (vLLM ``gpu_memory_utilization``, TensorRT-LLM
        ``free_gpu_memory_fraction``)."""
        return replace(self,
                       memory_fraction=(self.memory_fraction if memory_fraction is None
                                        else memory_fraction),
                       max_seqs=self.max_seqs if max_seqs is None else max_seqs,
                       max_batched_tokens=(self.max_batched_tokens if max_batched_tokens is None
                                           else max_batched_tokens),
                       chunked_prefill=(self.chunked_prefill if chunked_prefill is None
                                        else chunked_prefill))


# vLLM V1 engine defaults for devices with >= 70 GiB (vllm/engine/arg_utils.py,
# ``_set_default_args``: H100/MI300-class GPUs get max_num_batched_tokens 16384 for the offline
# ``LLM`` class and 8192 for the OpenAI server, max_num_seqs 1024 for both; smaller devices 8192 /
# 2048 tokens and 256 sequences); block_size 16, gpu_memory_utilization 0.9 (EngineArgs).
_VLLM_LARGE = (1024, 16384, 8192)  # seqs, tokens offline, tokens server
_VLLM_SMALL = (256, 8192, 2048)
LARGE_DEVICE_BYTES = 70 * 2**30


def defaults(fw: Framework, *, offline: bool, device_bytes: float) -> SchedulerConfig:
    """The framework's documented scheduler defaults (offline runs use the offline entry point's
    defaults where they differ, e.g. vLLM's ``LLM`` class)."""
    if fw is Framework.VLLM:
        seqs, tok_off, tok_srv = _VLLM_LARGE if device_bytes >= LARGE_DEVICE_BYTES else _VLLM_SMALL
        return SchedulerConfig(
            KvPolicy.ON_DEMAND, seqs, tok_off if offline else tok_srv, True, 16,
            KvBudget.OF_TOTAL, 0.9,
            source="vLLM V1 defaults (engine/arg_utils.py by usage context and device memory; "
                   "block_size 16, gpu_memory_utilization 0.9, recompute preemption)")
    if fw in (Framework.TENSORRT_LLM, Framework.TENSORRT_LLM_1):
        # BuildConfig defaults max_batch_size 2048, max_num_tokens 8192 (TensorRT-LLM >= 0.11,
        # "Best practices for tuning the performance"); KvCacheConfig tokens_per_block 32,
        # free_gpu_memory_fraction 0.9; trtllm-bench enables chunked context.
        return SchedulerConfig(
            KvPolicy.RESERVE, 2048, 8192, True, 32, KvBudget.OF_FREE, 0.9,
            source="TensorRT-LLM defaults (max_batch_size 2048, max_num_tokens 8192, "
                   "GUARANTEED_NO_EVICT, tokens_per_block 32, free_gpu_memory_fraction 0.9)")
    if fw is Framework.SGLANG:
        # SGLang server_args.py defaults: chunked_prefill_size 8192 on H100-class GPUs, page
        # size 1 (RadixAttention keeps one token per page), mem_fraction_static around 0.88 for
        # one 80 GB GPU (it is derived from the GPU memory and tp: the value here is the
        # documented single-GPU order, uncertain), max_running_requests derived from the pool
        # (capped here as vLLM's 1024); running requests are retracted when the pool runs out
        # (scheduler.py "retract_decode"), which the on-demand policy models.
        return SchedulerConfig(
            KvPolicy.ON_DEMAND, 1024, 8192, True, 1, KvBudget.OF_TOTAL, 0.88,
            source="SGLang defaults (chunked_prefill_size 8192, page_size 1, "
                   "mem_fraction_static ~0.88, retract on a full pool; max running capped at "
                   "1024)")
    if fw is Framework.ATOM:
        # ATOM atom/config.py and model_engine/arg_utils.py (the 2026-05 release InferenceX
        # runs): max_num_seqs 512, max_num_batched_tokens 16384, block size 16 (its MLA backend
        # pages one token: aiter_mla.py), gpu_memory_utilization 0.9 of the total memory, no
        # chunked prefill (a prompt waits until it fits the token budget: scheduler.py
        # ``schedule``), recompute preemption of the last running request (``preempt``).
        # ATOM runs prefill batches apart from decode batches (prefill first); the simulator
        # prices a prefill in the same iteration as the decodes, as its other stacks.
        return SchedulerConfig(
            KvPolicy.ON_DEMAND, 512, 16384, False, 16, KvBudget.OF_TOTAL, 0.9,
            source="ATOM defaults (max_num_seqs 512, max_num_batched_tokens 16384, block 16, "
                   "gpu_memory_utilization 0.9, no chunked prefill, recompute preemption)")
    # gpt-fast / eager PyTorch / training stacks: no serving scheduler, one static batch at a
    # time; the batch is the largest that fits (capped as vLLM's small-device default).
    return SchedulerConfig(
        KvPolicy.STATIC, 256, 1 << 30, False, 1, KvBudget.OF_TOTAL, 0.9,
        source=f"{fw.value}: no serving scheduler; static batches of the largest batch that "
               "fits (at most 256)")
