"""Per-operation overhead of eager execution: what one tiny op costs end to end.

The roofline charges each kernel a fixed cost on top of its compute and memory time (the
framework profile's ``kernel_overhead_s``; 5 us for eager GPU launches by default). On the
user's own device that cost is measured instead: a chain of dependent elementwise ops on a
16-element tensor, so that compute and memory are negligible and what is timed is dispatch,
launch and the gap between kernels (``timing.time_kernel``: median of repetitions, device
synchronised through the backend). Only PyTorch is meaningful here (its dispatcher is what
eager training and decoding pay), so the backend is a :class:`TorchBackend`.

On a CPU the host's work is not hidden behind the device's, so what one *dispatched aten op*
costs inside a real model matters too (``cost/eager_cpu.py``): :func:`measure_dispatch` runs a
micro GPT-2-style transformer (``MICRO``: one layer, d_model 64, 8 tokens) whose arithmetic is
microseconds, counts the aten ops each pass dispatches (a ``TorchDispatchMode``, untimed) and
times the passes: a decode step under ``inference_mode`` (the ``forward`` figure) and a training
step's backward plus fused AdamW (the ``backward`` figure). The figure is the fastest
repetition's time over the count: Python, the dispatcher, allocation, autograd and the thread
pool's fork and join on this machine, with the least interference from other processes.

Timings are the fastest of many short repetitions (``FAST_REPS`` of ``OPS_PER_REP`` ops), not
the median: a repetition that another process preempted is slower, never faster, so on a shared
machine the fastest is the one that measured the op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelmap.errors import InputError
from accelmap.measure.backends import Backend
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.timing import time_kernel
from accelmap.measure.torch_backend import TorchBackend

OPS_PER_REP = 200  # ~0.5 ms: long against the timer, short against a scheduler slice
FAST_REPS = 30  # repetitions at least, the fastest kept (see the module doc)
# A 64-byte fp32 tensor: one cache line, so each op's compute and traffic are ~ns and what is
# left is the per-op software and launch cost.
TINY_ELEMENTS = 16


@dataclass(frozen=True)
class OverheadResult:
    device: str
    seconds_per_op: float
    spread: float
    measurements: tuple[Measurement, ...]
    dispatch_s: dict[str, float] = field(default_factory=dict)  # per aten op, by pass

    def to_dict(self) -> dict[str, object]:
        return {"device": self.device, "seconds_per_op": self.seconds_per_op,
                "spread": self.spread, "dispatch_s": dict(self.dispatch_s)}


def measure_overhead(be: Backend, accelerator_id: str | None, reps: int = 7) -> OverheadResult:
    """Seconds one eager PyTorch op costs on ``be``'s device (a torch backend)."""
    if not isinstance(be, TorchBackend):
        raise InputError("per-op overhead is PyTorch's dispatch and launch cost: measure it "
                         "with the torch backend (--backend torch)")
    torch = be.torch
    state = [torch.zeros(TINY_ELEMENTS, device=be.dev)]

    def chain() -> None:
        x = state[0]
        for _ in range(OPS_PER_REP):
            x = x + 1.0  # each op depends on the last: no batching across them
        state[0] = x

    # warm-up chains bring up the allocator, dispatcher caches and lazy modules
    t = time_kernel(chain, be.synchronize, warmup=10, reps=max(reps, FAST_REPS))
    per_op = min(t.times) / OPS_PER_REP
    env = be.environment(accelerator_id)
    m = Measurement(kind=Kind.OVERHEAD, environment=env, dtype=None,
                    label=f"dependent add on {TINY_ELEMENTS} elements x {OPS_PER_REP}",
                    value=per_op, unit="s", median=t.median / OPS_PER_REP, spread=t.spread,
                    repetitions=len(t.times),
                    settings={"ops_per_rep": OPS_PER_REP, "elements": TINY_ELEMENTS,
                              "statistic": "fastest repetition"})
    dispatch = measure_dispatch(be, accelerator_id, reps)
    if be.dev.type == "cuda":  # graph stacks' cost per replayed kernel (cost/host.py)
        replay = measure_graph_replay(be, accelerator_id, reps)
        if replay is not None:
            dispatch[GRAPH_REPLAY] = replay
    return OverheadResult(env.label, per_op, t.spread, (m, *dispatch.values()),
                          {p: d.value for p, d in dispatch.items()})


GRAPH_REPLAY = "graph-replay"  # the 'pass' of the replay measurement (profile.dispatch_s key)


def per_replayed_kernel(replay_s: float, launch_s: float, kernels: int) -> float:
    """Seconds per kernel node of a replayed CUDA graph: a replay of ``kernels`` nodes took
    ``replay_s`` (launch and device walk, synchronised), less one graph launch ``launch_s``
    (the replay of a one-node graph), over the nodes; never below zero."""
    if kernels < 2:
        raise ValueError("a replay measurement needs at least two kernels")
    return max(replay_s - launch_s, 0.0) / (kernels - 1)


def measure_graph_replay(be: TorchBackend, accelerator_id: str | None, reps: int = 7
                         ) -> Measurement | None:
    """The cost of one kernel inside a replayed CUDA graph: OPS_PER_REP dependent tiny adds
    captured once (torch.cuda.CUDAGraph, torch docs "CUDA Graphs"), replayed and timed against
    a captured single add. UNTESTED ON A GPU (written without one; its arithmetic is
    ``per_replayed_kernel``, unit-tested); None where capture fails."""
    torch = be.torch
    x = torch.zeros(TINY_ELEMENTS, device=be.dev)

    def capture(n: int) -> Any:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x
            for _ in range(n):
                y = y + 1.0
        return g

    try:
        for _ in range(3):  # warm the allocator and kernels outside capture, as torch asks
            x.add(1.0)
        torch.cuda.synchronize()
        many, one = capture(OPS_PER_REP), capture(1)
    except RuntimeError:
        return None
    n = max(reps, FAST_REPS)
    t_many = time_kernel(many.replay, be.synchronize, warmup=3, reps=n)
    t_one = time_kernel(one.replay, be.synchronize, warmup=3, reps=n)
    value = per_replayed_kernel(min(t_many.times), min(t_one.times), OPS_PER_REP)
    return Measurement(
        kind=Kind.OVERHEAD, environment=be.environment(accelerator_id), dtype="fp32",
        label=f"CUDA graph replay, {OPS_PER_REP} dependent adds on {TINY_ELEMENTS} elements",
        value=value, unit="s", median=value, spread=t_many.spread, repetitions=len(t_many.times),
        settings={"pass": GRAPH_REPLAY, "kernels": OPS_PER_REP,
                  "statistic": "fastest repetition"})


# The micro reference transformer: GPT-2's structure (pre-LayerNorm, biases, GELU MLP, learned
# positions, tied embeddings) at sizes where every op is a few hundred FLOPs.
MICRO = {"id": "dispatch-micro", "name": "micro transformer (dispatch cost)", "family": "gpt",
         "n_layers": 1, "d_model": 64, "n_heads": 4, "ffn_dim": 256, "vocab_size": 512,
         "max_seq_len": 64, "ffn_kind": "plain", "activation": "gelu", "position": "learned",
         "norm": "layernorm", "tied_embeddings": True, "qkv_bias": True, "attn_out_bias": True,
         "mlp_bias": True}
MICRO_TOKENS = 8
STEPS_PER_REP = 5
DISPATCH_REPS = 12  # repetitions at least, the fastest kept


def count_dispatches(torch: Any, fn: Callable[[], object]) -> int:
    """Aten ops ``fn`` dispatches (run once, untimed)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            self.n += 1
            return func(*args, **(kwargs or {}))

    with _Count() as c:
        fn()
    return c.n


def measure_dispatch(be: TorchBackend, accelerator_id: str | None, reps: int = 7
                     ) -> dict[str, Measurement]:
    """Seconds per dispatched aten op of the micro transformer: ``forward`` (a decode step,
    inference_mode) and ``backward`` (a training step's backward and optimizer step)."""
    from accelmap.measure.local_run import _adamw
    from accelmap.measure.torch_model import KVCache, build
    from accelmap.models.schema import ModelSpec

    torch, sync = be.torch, be.synchronize
    spec = ModelSpec.model_validate(MICRO)
    tokens = torch.randint(0, spec.vocab_size, (1, MICRO_TOKENS + 1), device=be.dev)
    model = build(spec, be.dev)
    opt = _adamw(torch, model)
    x, y = tokens[:, :-1], tokens[:, 1:]
    state: dict[str, Any] = {}

    def forward() -> None:
        state["loss"] = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())

    def backward() -> None:
        state["loss"].backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def step() -> None:
        forward()
        backward()

    cache = KVCache.empty(spec, 1, MICRO_TOKENS + 1, torch.float32, be.dev)
    nxt = x[:, :1]

    def decode() -> None:
        with torch.inference_mode():
            model(nxt, MICRO_TOKENS, cache)[:, -1].argmax(-1, keepdim=True)

    step()
    forward()
    n_back = count_dispatches(torch, backward)
    n_dec = count_dispatches(torch, decode)

    def repeat(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(STEPS_PER_REP):
                fn()
        return run

    n = max(reps, DISPATCH_REPS)
    t_step = time_kernel(repeat(step), sync, warmup=3, reps=n)
    t_fwd = time_kernel(repeat(forward), sync, warmup=3, reps=n)
    t_dec = time_kernel(repeat(decode), sync, warmup=3, reps=n)
    per = {"forward": (min(t_dec.times) / STEPS_PER_REP / n_dec, n_dec, t_dec),
           "backward": (max(min(t_step.times) - min(t_fwd.times), 0.0) / STEPS_PER_REP / n_back,
                        n_back, t_step)}
    env = be.environment(accelerator_id)
    return {phase: Measurement(
        kind=Kind.OVERHEAD, environment=env, dtype="fp32",
        label=f"eager dispatch, {phase} (micro transformer, {count} aten ops per pass)",
        value=value, unit="s", median=value, spread=t.spread, repetitions=len(t.times),
        settings={"pass": phase, "dispatches": count, "model": "micro transformer",
                  "statistic": "fastest repetition"})
        for phase, (value, count, t) in per.items()}
