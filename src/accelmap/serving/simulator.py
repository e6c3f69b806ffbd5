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

SGLang's ``--scheduler-recv-interval`` N (``SchedulerConfig.recv_interval``): the scheduler
polls the tokenizer's socket for new requests only when a counter reaches N, and the counter
grows by the weight of the batch it last ran: 1 for a decode (or speculative verify) step, 1000
for any step with prompt tokens, 1 for an idle loop, whose spins are microseconds
(``SchedulerRecvSkipper``, python/sglang/srt/managers/scheduler_recv_skipper.py; weights
``SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_*``). So a request that arrives while the batch only
decodes waits up to N decode steps before it can be admitted; after a prefill, or on an idle
server, it is taken at once. N = 1 is the plain loop.

TensorRT-LLM's attention-DP balance (``SchedulerConfig.adp_balance_iters`` N: its
``attention_dp_config`` with ``enable_balance: true, timeout_iters: N, batching_wait_iters:
0``; ``PyExecutor._balance_adp_requests``): a context request is scheduled only in an
iteration where every DP-attention rank has one (and a free slot), so that the ranks prefill
together; otherwise a counter of such iterations grows by one, and the held requests go when it
reaches N (it then restarts from 0) or when some rank has no generation request to run. The
counter grows in every iteration that fails the test, with or without a waiting request, so a
lone arrival waits out the rest of the current cycle of N iterations. The ranks are tracked
in the balance's bookkeeping: a new request goes to the rank with the fewest active requests
(in a closed loop, the rank whose request just finished), so every rank has one waiting only
once each has seen a finish. With ``batching_wait_iters`` W > 0
(``SchedulerConfig.adp_batching_wait_iters``), an iteration in which every rank has a context
request and a free slot, and every rank a generation request, still holds them unless W such
iterations have already been held (a second counter, reset when they go): the prompts go in
batches every W + 1 such iterations, more of them per batch (``_balance_adp_requests``'s
``batching_wait_iters`` branch).

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
from itertools import islice

import numpy as np

from accelmap.serving.iteration import IterationCost
from accelmap.serving.requests import Requests
from accelmap.serving.scheduler import KvPolicy, SchedulerConfig

WATERMARK = 0.01  # vLLM keeps 1 % of the KV blocks free when admitting (watermark=0.01)
# SchedulerRecvSkipper's weights (module doc): a step with prompt tokens, and a decode step
RECV_AFTER_PREFILL = 1000
RECV_AFTER_DECODE = 1


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
    """Serve ``req`` on one replica, iteration by iteration (module doc): each step admits the
    arrivals, makes KV room for its decode tokens, schedules prompt chunks and admissions in
    the token budget, prices the pass with ``cost`` and advances decodes and prompts."""
    r = _Replica(req, sched, kv_capacity_tokens, step, concurrency)
    n, waiting, prefilling = r.n, r.waiting, r.prefilling
    # bound once: the loop runs once per iteration (tens of thousands per simulation)
    arrive, make_room, prompt_chunks, admit, run_step = (
        r.arrive, r.make_room, r.prompt_chunks, r.admit, r.run_step)
    interval = sched.recv_interval
    recv = interval  # the counter starts at the threshold: the first loop receives
    balance = _AdpBalance(sched, n) if sched.adp_balance_iters and sched.ranks > 1 else None
    if balance is not None:
        r.on_done = balance.done
    while r.finished < n:
        running = r.D + len(prefilling)
        idle = running == 0
        if r.nxt < n and (recv >= interval or idle):
            arrive()
            recv = 0
        if running == 0 and not waiting:
            r.clock = r.arrival[r.nxt]
            continue
        preempted_now = make_room()
        chunks: list[tuple[int, int]] = []  # (request, tokens)
        budget = prompt_chunks(chunks)
        if balance is None:
            admitted = admit(chunks, budget, running, preempted_now) \
                if waiting or r.static else 0
        else:  # the counter moves every iteration, with or without a request waiting
            balance.assign(r.nxt)
            admitted = 0
            if balance.release() and waiting:
                head = list(islice(waiting, max(r.max_seqs - running, 0)))  # admitted first
                admitted = admit(chunks, budget, running, preempted_now)
                balance.admitted(head[:admitted])
        if not chunks and r.D == 0:
            if r.nxt < n and not prefilling:
                r.clock = max(r.clock, r.arrival[r.nxt])
                continue
            raise CapacityError("the scheduler cannot make progress: raise --max-tokens or "
                                "the KV memory")
        run_step(chunks, admitted, cost)
        recv += RECV_AFTER_PREFILL if chunks else RECV_AFTER_DECODE
    # what the client sees: the stack's latency outside the serving loop (front end, tokenizer
    # and detokenizer processes; cost/framework.py ``request_latency_s``) on every request's
    # first token and finish. The closed loop releases the next request at the loop's finish,
    # ahead of the client by that latency: at most latency / E2E of the rate (under 1 % for
    # the sweeps' second-long requests).
    late = float(getattr(cost, "request_latency_s", 0.0))
    return SimResult(np.array(r.arrival, dtype=float), np.array(r.first) + late,
                     np.array(r.finish) + late,
                     req.prompt, req.output, np.array(r.steps_s), np.array(r.steps_d),
                     np.array(r.steps_t), r.preemptions, r.peak, kv_capacity_tokens, r.busy)


class _AdpBalance:
    """TensorRT-LLM's attention-DP balance gate (module doc), over the ranks of the group: each
    new request goes to the rank with the fewest active (waiting or running) requests, lowest
    index first (TensorRT-LLM's ``_balance_requests_across_ranks``: a heap of active counts);
    ``release`` says whether this iteration schedules the waiting context requests."""

    __slots__ = ("active", "batching", "count", "rank_of", "ranks", "running", "seen", "slots",
                 "timeout", "wait", "waiting")

    def __init__(self, sched: SchedulerConfig, n: int) -> None:
        self.timeout, self.ranks = sched.adp_balance_iters, sched.ranks
        self.slots = max(sched.max_seqs // sched.ranks, 1)  # a rank's max_batch_size
        self.count = 0
        self.wait, self.batching = sched.adp_batching_wait_iters, 0  # batching_wait_iters
        self.seen = 0  # requests given a rank so far (they arrive in index order)
        self.rank_of = [0] * n
        self.active = [0] * self.ranks
        self.waiting = [0] * self.ranks
        self.running = [0] * self.ranks

    def assign(self, upto: int) -> None:
        """Ranks for the requests that arrived since the last call (indices seen .. upto - 1)."""
        active, waiting, rank_of = self.active, self.waiting, self.rank_of
        for r in range(self.seen, upto):
            k = active.index(min(active))
            rank_of[r] = k
            active[k] += 1
            waiting[k] += 1
        self.seen = max(self.seen, upto)

    def release(self) -> bool:
        if min(self.waiting) > 0 and max(self.running) < self.slots:
            self.count = 0  # every rank has a context request and a free slot
            if min(self.running) > 0 and self.batching < self.wait:
                self.batching += 1  # and a generation request: wait to batch more prompts
                return False
            self.batching = 0
            return True
        self.count += 1
        if self.count >= self.timeout or min(self.running) == 0:
            self.count = 0
            return True
        return False

    def admitted(self, requests: list[int]) -> None:
        for r in requests:
            k = self.rank_of[r]
            self.waiting[k] -= 1
            self.running[k] += 1

    def done(self, r: int) -> None:
        k = self.rank_of[r]
        self.active[k] -= 1
        self.running[k] -= 1


class _Replica:
    """One replica's scheduler state: per request its target, emitted tokens, KV position,
    decode start and preemption version; the waiting queue, the prefilling and running lists;
    the decoding sequences as aggregates (``D`` sequences, ``K`` summed context) with a heap of
    finish steps; the clock and the per-iteration record."""

    __slots__ = (
        "B", "D", "K", "arrival", "blocks_cap", "budget_cap", "busy", "cached", "chunk_cap",
        "chunked", "clock", "concurrency", "ctx0", "dec_start", "decoding", "done_tok", "extra",
        "finish", "finished", "first", "g", "half", "heap", "is_running", "it",
        "kv_capacity_tokens", "kv_prefill", "max_seqs", "n", "nxt", "on_done", "output", "peak",
        "policy",
        "pos", "preemptions", "prefill_s", "prefilling", "prompt", "released", "reserved",
        "reserved_blocks", "running_order", "static", "static_left", "static_width", "steps_d",
        "steps_s", "steps_t", "target", "verify", "version", "waiting", "watermark")

    def __init__(self, req: Requests, sched: SchedulerConfig, kv_capacity_tokens: float,
                 step: DecodeStep, concurrency: int | None) -> None:
        n = self.n = len(req)
        self.arrival: list[float] = req.arrival_s.tolist()
        self.released = n
        if concurrency is not None:  # closed loop: N at t = 0, then one per finish
            if concurrency < 1:
                raise ValueError(f"concurrency must be at least 1, got {concurrency}")
            self.released = min(concurrency, n)
            self.arrival = [0.0] * self.released + [math.inf] * (n - self.released)
        self.prompt: list[int] = req.prompt.tolist()
        self.output: list[int] = req.output.tolist()
        self.cached: list[int] = req.cached.tolist()
        self.kv_capacity_tokens = kv_capacity_tokens
        self.B = sched.block_tokens
        self.blocks_cap = math.floor(kv_capacity_tokens / self.B)
        self.half = (self.B - 1) / 2.0
        self.policy = sched.policy
        self.static = self.policy is KvPolicy.STATIC
        self.chunked = sched.chunked_prefill
        self.budget_cap = sched.max_batched_tokens
        # a prompt chunk is one request's, on its DP-attention rank: a rank's token budget
        self.chunk_cap = max(sched.max_batched_tokens // max(sched.ranks, 1), 1)
        self.max_seqs = sched.max_seqs
        self.g, self.verify = step.advance, step.verify
        self.extra, self.prefill_s = step.extra_s, step.prefill_s
        self.first = [math.nan] * n
        self.finish = [math.nan] * n
        # per-request state
        self.target = self.prompt[:]  # tokens that must be in KV before decoding
        self.done_tok = [0] * n  # output tokens already emitted
        self.pos = [0] * n  # tokens in KV while prefilling
        self.dec_start = [0] * n  # step index at which decoding began
        self.ctx0 = [0.0] * n  # context when decoding began
        self.version = [0] * n  # bumps on preemption (lazy heap deletion)
        self.reserved = [0] * n  # RESERVE: blocks held
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []  # admitted, prompt not finished, FCFS
        self.running_order: list[int] = []  # admission order (LIFO preemption), lazily cleaned
        self.is_running = [False] * n
        self.decoding = [False] * n
        self.heap: list[tuple[int, int, int]] = []  # (last step, request, version)
        self.D = 0  # decoding sequences
        self.K = 0.0  # their summed context
        self.kv_prefill = 0.0  # tokens held by prefilling requests
        self.reserved_blocks = 0
        self.static_left = 0  # STATIC: requests of the current batch not finished
        self.static_width = 0
        self.clock = 0.0
        self.nxt = 0
        self.it = 0
        self.finished = 0
        self.preemptions = 0
        self.peak = 0
        self.busy = 0.0
        self.steps_s: list[float] = []
        self.steps_d: list[int] = []
        self.steps_t: list[float] = []
        self.watermark = (WATERMARK * self.blocks_cap if self.policy is KvPolicy.ON_DEMAND
                          else 0.0)
        self.on_done: Callable[[int], None] | None = None  # the ADP balance's bookkeeping

    def used_blocks(self, extra_tokens: float = 0.0, extra_seqs: int = 0) -> float:
        seqs = self.D + len(self.prefilling) + extra_seqs
        return (self.K + self.kv_prefill + extra_tokens + seqs * self.half) / self.B

    def arrive(self) -> None:
        """Arrivals up to the current time join the waiting queue."""
        arrival, n, clock, waiting = self.arrival, self.n, self.clock, self.waiting
        nxt = self.nxt
        while nxt < n and arrival[nxt] <= clock:
            waiting.append(nxt)
            nxt += 1
        self.nxt = nxt

    def make_room(self) -> bool:
        """KV for this step's decode tokens: ON_DEMAND preempts until they fit; whether it
        preempted."""
        if self.policy is not KvPolicy.ON_DEMAND or not self.D:
            return False
        preempted_now = False
        while self.D and self.used_blocks(self.D * self.g) > self.blocks_cap:
            if not self.preempt_one():
                break
            preempted_now = True
        return preempted_now

    def preempt_one(self) -> bool:
        """The most recently admitted running request back to the front of the queue with its
        prompt and the tokens it had generated (recompute); whether there was one."""
        running_order, is_running, it, g = self.running_order, self.is_running, self.it, self.g
        while running_order:
            v = running_order.pop()
            if not is_running[v]:
                continue
            is_running[v] = False
            if self.decoding[v]:
                emitted = self.done_tok[v] + int(g * (it - self.dec_start[v]))
                emitted = min(emitted, self.output[v] - 1)
                self.K -= self.ctx0[v] + g * (it - self.dec_start[v])
                self.D -= 1
                self.decoding[v] = False
                self.done_tok[v] = emitted
                self.version[v] += 1
            else:
                self.kv_prefill -= self.pos[v]
                self.prefilling.remove(v)
            self.target[v] = self.prompt[v] + self.done_tok[v]
            self.pos[v] = 0
            self.waiting.appendleft(v)
            self.preemptions += 1
            return True
        return False

    def prompt_chunks(self, chunks: list[tuple[int, int]]) -> int:
        """Prompt chunks of admitted requests into ``chunks``; the token budget left."""
        policy, D, target, pos = self.policy, self.D, self.target, self.pos
        budget = self.budget_cap - D * self.verify
        for r in self.prefilling:
            if budget <= 0:
                break
            left = target[r] - pos[r]
            if self.chunked and policy is not KvPolicy.STATIC:
                take = min(left, budget, self.chunk_cap)
            elif left <= budget or (not chunks and D == 0) or policy is KvPolicy.STATIC:
                take = left
            else:
                break
            if policy is KvPolicy.ON_DEMAND and chunks and \
                    self.used_blocks(D * self.g + take) > self.blocks_cap:
                break
            if take:
                chunks.append((r, take))
                budget -= take
        return budget

    def admit(self, chunks: list[tuple[int, int]], budget: int, running: int,
              preempted_now: bool) -> int:
        """Waiting requests in arrival order while ``max_seqs``, the budget and the KV pool
        allow, their first chunks into ``chunks``; how many were admitted. vLLM V1
        (v1/core/sched/scheduler.py) admits only in a step that preempted nobody: a full pool
        is not refilled while it is evicting."""
        static = self.static
        admit_ok = (not static or (self.D == 0 and not self.prefilling)) and not preempted_now
        if static and admit_ok and self.waiting:
            self.static_width = 0
        admitted = 0
        if admit_ok and (budget > 0 or static) and \
                self.D + len(self.prefilling) < self.max_seqs:
            admitted = self._admit_waiting(chunks, budget, running)
        if static and self.static_width and self.static_left == 0:
            self.static_left = self.static_width
        return admitted

    def _admit_waiting(self, chunks: list[tuple[int, int]], budget: int, running: int) -> int:
        """``admit``'s queue walk: each waiting request's first chunk, until a cap or the KV
        pool stops it (a request no empty pool could hold: ``CapacityError``)."""
        policy, waiting, B, static = self.policy, self.waiting, self.B, self.static
        prompt, output, target, pos = self.prompt, self.output, self.target, self.pos
        admitted = 0
        while waiting and (budget > 0 or static) \
                and self.D + len(self.prefilling) < self.max_seqs:
            r = waiting[0]
            start = self.cached[r] if pos[r] == 0 and self.done_tok[r] == 0 else 0
            left = target[r] - start
            if static:
                take = left
            elif self.chunked:
                take = min(left, budget, self.chunk_cap)
            elif left <= budget or (not chunks and self.D == 0):
                take = left
            else:
                break
            if policy is KvPolicy.RESERVE:
                need = math.ceil((prompt[r] + output[r]) / B)
                if self.reserved_blocks + need > self.blocks_cap:
                    if running == 0 and not chunks:
                        raise CapacityError(_too_big(prompt[r] + output[r],
                                                     self.kv_capacity_tokens))
                    break
            elif static:
                need = 0
                if (self.static_width + 1) * (prompt[r] + output[r]) > self.kv_capacity_tokens:
                    if self.static_width == 0:
                        raise CapacityError(_too_big(prompt[r] + output[r],
                                                     self.kv_capacity_tokens))
                    break
            else:
                need = 0
                if self.used_blocks(start + take, 1) + self.watermark > self.blocks_cap:
                    if running == 0 and not chunks and self.D == 0:
                        raise CapacityError(_too_big(target[r], self.kv_capacity_tokens))
                    break
            waiting.popleft()
            admitted += 1
            pos[r] = start
            self.kv_prefill += start
            self.reserved[r] = need
            self.reserved_blocks += need
            self.prefilling.append(r)
            self.running_order.append(r)
            self.is_running[r] = True
            self.static_width += 1
            if take:
                chunks.append((r, take))
                budget -= take
        return admitted

    def run_step(self, chunks: list[tuple[int, int]], admitted: int,
                 cost: IterationCost) -> None:
        """Price the step (its prompt tokens and their mean context, its decode sequences,
        ``verify`` tokens each, at their mean context, the drafter's extra), advance the clock,
        then the decodes and the prompts."""
        pos, target, verify, D = self.pos, self.target, self.verify, self.D
        tp = 0.0
        ctx_sum = 0.0
        completing = 0
        largest = 0
        for r, take in chunks:
            s = pos[r]
            tp += take
            largest = max(largest, take)
            ctx_sum += take * (s + (take + 1) / 2.0)
            if s + take >= target[r]:
                completing += 1
        width = self.static_width if self.static else D
        decode_ctx = self.K / D if D else 0.0
        tokens = tp + width * verify
        dt = cost.cost(tokens, width * verify + completing, tp, ctx_sum / tp if tp else 0.0,
                       width, decode_ctx + (verify - 1) / 2.0, admitted > 0, largest)
        if self.extra is not None and width:
            dt += self.extra(width, decode_ctx)
        if self.prefill_s is not None and tp:
            dt += self.prefill_s(tp, ctx_sum / tp)
        self.clock += dt
        self.busy += dt
        self.steps_s.append(dt)
        self.steps_d.append(D)
        self.steps_t.append(tokens)
        running = D + len(self.prefilling)
        if running > self.peak:
            self.peak = running
        self.K += D * self.g
        heap = self.heap
        if heap and heap[0][0] <= self.it:
            self.finish_decodes()
        if chunks:
            self.advance_prompts(chunks)
        if self.static and self.static_left <= 0:
            self.static_width = 0
            self.static_left = 0
        self.it += 1
        if self.K < 0:  # float drift from fractional advances
            self.K = 0.0

    def done(self, r: int) -> None:
        """Request ``r`` finished now: the next closed-loop request is sent, its blocks freed."""
        self.finish[r] = self.clock
        self.finished += 1
        if self.released < self.n:
            self.arrival[self.released] = self.clock
            self.released += 1
        self.reserved_blocks -= self.reserved[r]
        if self.policy is KvPolicy.STATIC:
            self.static_left -= 1
        if self.on_done is not None:
            self.on_done(r)

    def finish_decodes(self) -> None:
        """Decoding requests whose last step this was leave."""
        heap, version, decoding, it, g = self.heap, self.version, self.decoding, self.it, self.g
        while heap and heap[0][0] <= it:
            _last, r, ver = heapq.heappop(heap)
            if ver != version[r] or not decoding[r]:
                continue
            decoding[r] = False
            self.is_running[r] = False
            self.K -= self.ctx0[r] + g * (it + 1 - self.dec_start[r])
            self.D -= 1
            self.done(r)

    def advance_prompts(self, chunks: list[tuple[int, int]]) -> None:
        """Prompt progress: completed prompts emit their first token and start decoding (or
        finish, with one output token)."""
        pos, target, g = self.pos, self.target, self.g
        for r, take in chunks:
            pos[r] += take
            self.kv_prefill += take
            if pos[r] >= target[r]:
                self.prefilling.remove(r)
                self.kv_prefill -= pos[r]
                if math.isnan(self.first[r]):
                    self.first[r] = self.clock
                self.done_tok[r] += 1  # the pass over the prompt samples the next token
                remaining = self.output[r] - self.done_tok[r]
                if remaining <= 0:
                    self.is_running[r] = False
                    self.done(r)
                    continue
                self.decoding[r] = True
                self.dec_start[r] = self.it + 1
                self.ctx0[r] = float(pos[r] + 1)
                self.K += self.ctx0[r]
                self.D += 1
                heapq.heappush(self.heap, (self.it + math.ceil(remaining / g), r,
                                           self.version[r]))


def _too_big(tokens: float, capacity: float) -> str:
    return (f"a request of {tokens:,.0f} tokens needs more KV cache than the pool holds "
            f"({capacity:,.0f} tokens per replica): use more tensor/pipeline parallelism, a "
            "smaller KV dtype (--kv fp8) or shorter requests")
