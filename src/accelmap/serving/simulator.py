"""A discrete-event simulator of one serving instance (one replica), iteration by iteration.

Each event is one forward pass; the scheduler (``scheduler``) decides what it contains, the
engine-derived ``IterationCost`` says how long it takes, and the clock advances by that much
(or jumps to the next arrival when there is nothing to run). As in vLLM's and Vidur's
schedulers (Agrawal et al. MLSys 2024, sec. 4.2), a step runs:

1. arrivals up to the current time join the waiting queue;
2. decode tokens of running requests are scheduled first; under ``ON_DEMAND`` KV allocation a
   request that needs a block when none is free preempts the most recently admitted running
   request (recompute: it goes back to the front of the queue with its prompt and the tokens it
   had generated, PagedAttention sec. 4.5);
3. the rest of the token budget goes to prompt chunks of admitted requests, then to waiting
   requests in arrival order while ``max_seqs`` and the KV pool allow (``RESERVE``: prompt plus
   whole output reserved at admission; ``STATIC``: only when the batch before has finished;
   ``ON_DEMAND``: not in a step that had to preempt, as vLLM V1's scheduler);
4. the iteration's cost is priced, finished requests leave, and prompts that completed emit
   their first token.

Decoding requests are not touched one by one: all of them advance by the same number of tokens
per step, so the running set is kept as aggregates (count, summed context) plus a heap of finish
steps, and a step costs O(1) Python work plus O(log n) per request event. Paged-KV use is the
tokens held plus half a block of rounding per sequence (the expected waste of the last block,
Kwon et al. 2023 sec. 4.2), in blocks.

Closed-loop concurrency (``concurrency`` = N; ``vllm bench serve --max-concurrency N``,
genai-perf ``--concurrency N``): N clients each send their next request the moment their previous
one finishes, with no think time. The first N requests arrive at t = 0; every finish releases the
next request of the list at that instant, so ``SimResult.arrival_s`` holds the times the requests
were actually sent (each client's latency clock starts there, as in vLLM's benchmark, which
starts timing a request after it acquires the concurrency semaphore).

Speculative decoding plugs in through ``DecodeStep``: each decode step verifies ``verify``
tokens per sequence and advances ``advance`` tokens on average (Leviathan et al. 2023), with
an extra cost per step for drafting.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from accelmap.serving.iteration import IterationCost
from accelmap.serving.requests import Requests
from accelmap.serving.scheduler import KvPolicy, SchedulerConfig

WATERMARK = 0.01  # vLLM keeps 1 % of the KV blocks free when admitting (watermark=0.01)


@dataclass(frozen=True)
class DecodeStep:
    """What one decode step does per sequence: ``verify`` query tokens through the target
    model, ``advance`` tokens accepted on average, ``extra_s(seqs, context)`` more seconds
    (a draft model's passes), and ``prefill_s(tokens, context)`` more seconds in an iteration
    that prefills ``tokens`` prompt tokens (the drafter's own prefill). Plain decoding is
    (1, 1, none, none)."""

    verify: int = 1
    advance: float = 1.0
    extra_s: Callable[[float, float], float] | None = None
    prefill_s: Callable[[float, float], float] | None = None


@dataclass(frozen=True)
class SimResult:
    """Per request: ``first_token_s`` and ``finish_s`` (absolute times); per iteration:
    ``step_s`` (duration) and ``step_decodes`` (sequences that got a token)."""

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    step_s: np.ndarray
    step_decodes: np.ndarray
    step_tokens: np.ndarray
    preemptions: int
    peak_running: int
    kv_capacity_tokens: float
    busy_s: float


class CapacityError(ValueError):
    """A request can never be admitted (it needs more KV than the whole pool)."""


def simulate(req: Requests, cost: IterationCost, sched: SchedulerConfig,
             kv_capacity_tokens: float, step: DecodeStep = DecodeStep(),
             concurrency: int | None = None) -> SimResult:
    n = len(req)
    arrival = req.arrival_s.tolist()
    released = n
    if concurrency is not None:  # closed loop: N at t = 0, then one per finish
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        released = min(concurrency, n)
        arrival = [0.0] * released + [math.inf] * (n - released)
    prompt = req.prompt.tolist()
    output = req.output.tolist()
    cached = req.cached.tolist()
    B = sched.block_tokens
    blocks_cap = math.floor(kv_capacity_tokens / B)
    half = (B - 1) / 2.0
    policy = sched.policy
    chunked = sched.chunked_prefill
    budget_cap = sched.max_batched_tokens
    max_seqs = sched.max_seqs
    g, verify = step.advance, step.verify
    extra = step.extra_s

    first = [math.nan] * n
    finish = [math.nan] * n
    # per-request state
    target = prompt[:]  # tokens that must be in KV before decoding (prompt + recomputed output)
    done_tok = [0] * n  # output tokens already emitted
    pos = [0] * n  # tokens in KV while prefilling
    dec_start = [0] * n  # step index at which decoding began
    ctx0 = [0.0] * n  # context when decoding began
    version = [0] * n  # bumps on preemption (lazy heap deletion)
    reserved = [0] * n  # RESERVE: blocks held

    waiting: deque[int] = deque()
    prefilling: list[int] = []  # admitted, prompt not finished, FCFS
    running_order: list[int] = []  # admission order (LIFO preemption), lazily cleaned
    is_running = [False] * n
    decoding = [False] * n
    heap: list[tuple[int, int, int]] = []  # (last step, request, version)
    D = 0  # decoding sequences
    K = 0.0  # their summed context
    kv_prefill = 0.0  # tokens held by prefilling requests
    reserved_blocks = 0
    static_left = 0  # STATIC: requests of the current batch not finished
    static_width = 0

    clock = 0.0
    nxt = 0
    it = 0
    finished = 0
    preemptions = 0
    peak = 0
    busy = 0.0
    steps_s: list[float] = []
    steps_d: list[int] = []
    steps_t: list[float] = []
    watermark = WATERMARK * blocks_cap if policy is KvPolicy.ON_DEMAND else 0.0

    def used_blocks(extra_tokens: float = 0.0, extra_seqs: int = 0) -> float:
        seqs = D + len(prefilling) + extra_seqs
        return (K + kv_prefill + extra_tokens + seqs * half) / B

    def preempt_one() -> bool:
        nonlocal D, K, kv_prefill, preemptions
        while running_order:
            v = running_order.pop()
            if not is_running[v]:
                continue
            is_running[v] = False
            if decoding[v]:
                emitted = done_tok[v] + int(g * (it - dec_start[v]))
                emitted = min(emitted, output[v] - 1)
                K -= ctx0[v] + g * (it - dec_start[v])
                D -= 1
                decoding[v] = False
                done_tok[v] = emitted
                version[v] += 1
            else:
                kv_prefill -= pos[v]
                prefilling.remove(v)
            target[v] = prompt[v] + done_tok[v]
            pos[v] = 0
            waiting.appendleft(v)
            preemptions += 1
            return True
        return False

    while finished < n:
        while nxt < n and arrival[nxt] <= clock:
            waiting.append(nxt)
            nxt += 1
        running = D + len(prefilling)
        if running == 0 and not waiting:
            clock = arrival[nxt]
            continue
        # -- KV for this step's decode tokens (ON_DEMAND may preempt) --
        preempted_now = False
        if policy is KvPolicy.ON_DEMAND:
            while D and used_blocks(D * g) > blocks_cap:
                if not preempt_one():
                    break
                preempted_now = True
        budget = budget_cap - D * verify
        chunks: list[tuple[int, int]] = []  # (request, tokens)
        # -- prompt chunks of admitted requests --
        for r in prefilling:
            if budget <= 0:
                break
            left = target[r] - pos[r]
            if chunked and policy is not KvPolicy.STATIC:
                take = min(left, budget)
            elif left <= budget or (not chunks and D == 0) or policy is KvPolicy.STATIC:
                take = left
            else:
                break
            if policy is KvPolicy.ON_DEMAND and chunks and \
                    used_blocks(D * g + take) > blocks_cap:
                break
            if take:
                chunks.append((r, take))
                budget -= take
        # -- admissions --
        admitted = 0
        # vLLM V1 (v1/core/sched/scheduler.py) admits waiting requests only in a step that
        # preempted nobody: a full pool is not refilled while it is evicting
        admit_ok = (policy is not KvPolicy.STATIC or (D == 0 and not prefilling)) and \
            not preempted_now
        if policy is KvPolicy.STATIC and admit_ok and waiting:
            static_width = 0
        while admit_ok and waiting and (budget > 0 or policy is KvPolicy.STATIC) \
                and D + len(prefilling) < max_seqs:
            r = waiting[0]
            start = cached[r] if pos[r] == 0 and done_tok[r] == 0 else 0
            left = target[r] - start
            if policy is KvPolicy.STATIC:
                take = left
            elif chunked:
                take = min(left, budget)
            elif left <= budget or (not chunks and D == 0):
                take = left
            else:
                break
            if policy is KvPolicy.RESERVE:
                need = math.ceil((prompt[r] + output[r]) / B)
                if reserved_blocks + need > blocks_cap:
                    if running == 0 and not chunks:
                        raise CapacityError(_too_big(prompt[r] + output[r], kv_capacity_tokens))
                    break
            elif policy is KvPolicy.STATIC:
                need = 0
                if (static_width + 1) * (prompt[r] + output[r]) > kv_capacity_tokens:
                    if static_width == 0:
                        raise CapacityError(_too_big(prompt[r] + output[r], kv_capacity_tokens))
                    break
            else:
                need = 0
                if used_blocks(start + take, 1) + watermark > blocks_cap:
                    if running == 0 and not chunks and D == 0:
                        raise CapacityError(_too_big(target[r], kv_capacity_tokens))
                    break
            waiting.popleft()
            admitted += 1
            pos[r] = start
            kv_prefill += start
            reserved[r] = need
            reserved_blocks += need
            prefilling.append(r)
            running_order.append(r)
            is_running[r] = True
            static_width += 1
            if take:
                chunks.append((r, take))
                budget -= take
        if policy is KvPolicy.STATIC and static_width and static_left == 0:
            static_left = static_width
        if not chunks and D == 0:
            if nxt < n and not prefilling:
                clock = max(clock, arrival[nxt])
                continue
            raise CapacityError("the scheduler cannot make progress: raise --max-tokens or "
                                "the KV memory")
        # -- price the step --
        tp = 0.0
        ctx_sum = 0.0
        completing = 0
        for r, take in chunks:
            s = pos[r]
            tp += take
            ctx_sum += take * (s + (take + 1) / 2.0)
            if s + take >= target[r]:
                completing += 1
        width = static_width if policy is KvPolicy.STATIC else D
        decode_ctx = K / D if D else 0.0
        tokens = tp + width * verify
        dt = cost.cost(tokens, width * verify + completing, tp, ctx_sum / tp if tp else 0.0,
                       width, decode_ctx + (verify - 1) / 2.0, admitted > 0)
        if extra is not None and width:
            dt += extra(width, decode_ctx)
        if step.prefill_s is not None and tp:
            dt += step.prefill_s(tp, ctx_sum / tp)
        clock += dt
        busy += dt
        steps_s.append(dt)
        steps_d.append(D)
        steps_t.append(tokens)
        peak = max(peak, D + len(prefilling))
        # -- decode progress and finishes --
        K += D * g
        while heap and heap[0][0] <= it:
            _last, r, ver = heapq.heappop(heap)
            if ver != version[r] or not decoding[r]:
                continue
            decoding[r] = False
            is_running[r] = False
            K -= ctx0[r] + g * (it + 1 - dec_start[r])
            D -= 1
            finish[r] = clock
            finished += 1
            if released < n:
                arrival[released] = clock
                released += 1
            reserved_blocks -= reserved[r]
            if policy is KvPolicy.STATIC:
                static_left -= 1
        # -- prompt progress: completed prompts emit their first token --
        for r, take in chunks:
            pos[r] += take
            kv_prefill += take
            if pos[r] >= target[r]:
                prefilling.remove(r)
                kv_prefill -= pos[r]
                if math.isnan(first[r]):
                    first[r] = clock
                done_tok[r] += 1  # the pass over the prompt samples the next token
                remaining = output[r] - done_tok[r]
                if remaining <= 0:
                    is_running[r] = False
                    finish[r] = clock
                    finished += 1
                    if released < n:
                        arrival[released] = clock
                        released += 1
                    reserved_blocks -= reserved[r]
                    if policy is KvPolicy.STATIC:
                        static_left -= 1
                    continue
                decoding[r] = True
                dec_start[r] = it + 1
                ctx0[r] = float(pos[r] + 1)
                K += ctx0[r]
                D += 1
                heapq.heappush(heap, (it + math.ceil(remaining / g), r, version[r]))
        if policy is KvPolicy.STATIC and static_left <= 0:
            static_width = 0
            static_left = 0
        it += 1
        if K < 0:  # float drift from fractional advances
            K = 0.0
    return SimResult(np.array(arrival, dtype=float), np.array(first), np.array(finish),
                     req.prompt, req.output, np.array(steps_s), np.array(steps_d),
                     np.array(steps_t), preemptions, peak, kv_capacity_tokens, busy)


def _too_big(tokens: float, capacity: float) -> str:
    return (f"a request of {tokens:,.0f} tokens needs more KV cache than the pool holds "
            f"({capacity:,.0f} tokens per replica): use more tensor/pipeline parallelism, a "
            "smaller KV dtype (--kv fp8) or shorter requests")
