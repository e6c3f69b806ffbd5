"""What one serving iteration costs, tabulated once from the engine's operator graph and
roofline (``ops.graph.forward_ops`` + ``cost.roofline.time_ops``, the same calls ``accelmap
estimate`` makes) so that the simulator prices each of its many iterations in microseconds.

An iteration of a continuous-batching server runs one forward pass over a mix of prompt chunks
and decode tokens (Sarathi-Serve's hybrid batches, Agrawal et al. 2024 sec. 4; Vidur, Agrawal
et al. MLSys 2024 sec. 4, splits the cost the same way):

- token-wise operators (QKV/output projections, MLP or experts, norms, embedding): one pass over
  all T tokens of the iteration, so their time is a function of T alone (tile and wave
  quantization included, which is why the table is exact in T up to ``EXACT``);
- the LM head: only the rows that sample a token (one per decoding sequence and per prompt
  finished in this iteration);
- attention: a prefill part (Tp tokens, mean keys per query c_p) and a decode part (D sequences,
  mean cached context c_d). At a fixed context both parts are linear in their token count
  (FLOPs, Q/O and KV bytes all scale with it, the roofline's efficiency depends on the context
  only), so two evaluations per context point give slope and intercept exactly;
- tensor/expert/pipeline communication over T tokens (``engine.serve.serving_comm``);
- the framework's per-iteration host overhead (``step_overhead_s``: scheduling, sampling,
  graph launch).

Pipeline stages run one after the other within an iteration (as in ``engine.serve``).

Under DP attention (``Mapping.dp_attention``) the replica is the group of G ranks: the
token-wise operators outside attention see all T tokens (gathered), the attention block of each
rank its own T / G tokens and D / G decode sequences with the whole heads (``Shape.
attention_share`` = 1 / G: the requests balanced over the ranks, ``engine.serve``'s module doc).
A prompt chunk, though, is one request's and runs on its rank alone, and the expert layers wait
for every rank: an iteration's attention block takes the busiest rank's time, its decode share
plus max(P / G, the largest chunk) of the P prompt tokens ("some ranks may be processing
computationally intensive context phases while others execute generation phases ... the
iteration time is dominated by the slowest rank": TensorRT-LLM tech blog 10, "ADP Balance
Strategy", whose balancing is off by default, ``AttentionDpConfig.enable_balance = False``).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from accelmap.cost.framework import FrameworkProfile
from accelmap.cost.roofline import time_ops
from accelmap.engine.serve import rank_geometry, serving_comm, serving_links
from accelmap.engine.shapes import inference_precision
from accelmap.engine.system import System
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.ops.graph import Shape, forward_ops, kv_per_query_head
from accelmap.workload import Inference

EXACT = 4096  # token counts tabulated one by one; beyond, a geometric grid
GROWTH = 1.01  # geometric step of the grids (1 %): linear interpolation between points


def grid(top: float, exact: int = EXACT) -> np.ndarray:
    """1, 2, ... ``exact``, then 1 % steps up to ``top`` (inclusive)."""
    pts = np.arange(1, min(exact, math.ceil(top)) + 1, dtype=float)
    if top > exact:
        n = math.ceil(math.log(top / exact) / math.log(GROWTH))
        pts = np.concatenate([pts, exact * GROWTH ** np.arange(1, n + 1)])
    return pts


@dataclass(frozen=True)
class Curve:
    """y(x) on a sorted grid; exact on integer points of the dense head, linear between."""

    xs: list[float]
    ys: list[float]
    exact: int

    @classmethod
    def of(cls, xs: np.ndarray, ys: Any, exact: int = EXACT) -> Curve:
        return cls([float(x) for x in xs], [float(y) for y in np.broadcast_to(ys, xs.shape)],
                   exact)

    def at(self, x: float) -> float:
        if x <= 0:
            return 0.0
        xs, ys = self.xs, self.ys
        if x <= self.exact and x == int(x) and x <= len(xs):
            return ys[int(x) - 1]
        i = bisect.bisect_left(xs, x)
        if i <= 0:
            return ys[0] * x / xs[0]
        if i >= len(xs):  # past the grid: extend the last segment
            i = len(xs) - 1
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _sum(times: list[Any], keep: Any) -> Any:
    out: Any = 0.0
    for t in times:
        if keep(t.op):
            out = out + t.total_s
    return out


def _is_head(op: Any) -> bool:
    return op.name.startswith("lm_head")


def _in_attention_block(op: Any) -> bool:
    """What a DP-attention rank runs on its own requests (``Shape.for_attention``): the norm,
    projections and output of attention; the core is priced apart (``IterationCost.attention``)."""
    return op.name.startswith("layers/attention/") and not op.attention_core


class IterationCost:
    """Seconds of one iteration on one replica: ``cost(tokens, sampled, prefill_tokens,
    prefill_context, decode_seqs, decode_context)``."""

    def __init__(self, spec: ModelSpec, system: System, wl: Inference, m: Mapping,
                 fw: FrameworkProfile, *, max_tokens: float, max_seqs: int,
                 max_context: float, imbalance: float = 1.0) -> None:
        self.fw = fw
        dev = system.device
        shard = rank_geometry(spec, m)
        p = inference_precision(wl)
        flash = wl.flash_attention
        share = 1.0 / float(m.attention_dp) if m.dp_attention else None

        def timed(shape: Shape) -> list[Any]:
            shape = replace(shape, attention_share=share)
            ops = forward_ops(shard, shape, p, flash, imbalance)
            if shape.decode and fw.decode_kv_per_query_head:
                ops = kv_per_query_head(ops, shard, p)
            return time_ops(ops, dev, fw)

        # token-wise operators over T tokens (one sampled row, the head is priced apart); under
        # DP attention the attention block's apart (``cost``: the busiest rank's tokens)
        self.ranks = float(m.attention_dp) if m.dp_attention else 1.0
        t_grid = grid(max(max_tokens * self.ranks, 2))
        lin = timed(Shape(tokens=t_grid, context=1.0, kv_tokens=t_grid, sequences=1.0,
                          logits_tokens=1.0))
        block = _in_attention_block if self.ranks > 1 else (lambda op: False)
        body = _sum(lin, lambda op: not op.attention_core and not _is_head(op) and not block(op))
        a = wl.stream_dtype.bytes  # 16-bit hidden states (Inference.stream_dtype)
        comm = serving_comm(spec, serving_links(system.cluster, m, fw), m, t_grid, a)
        self.linear = Curve.of(t_grid, body + sum(np.asarray(v, float) for v in comm.values()))
        self.attention_block = Curve.of(t_grid, _sum(lin, block))
        l_grid = grid(max(max_seqs, 2))
        head = timed(Shape(tokens=l_grid, context=1.0, kv_tokens=l_grid, sequences=l_grid,
                           logits_tokens=l_grid))
        self.head = Curve.of(l_grid, _sum(head, _is_head))
        # attention: slope and intercept in the token count at each context point
        c_grid = grid(max(max_context, 2), exact=64)
        self.context_grid = [float(c) for c in c_grid]
        self.decode_slope, self.decode_fixed = self._linear_in_count(timed, c_grid, True)
        self.prefill_slope, self.prefill_fixed = self._linear_in_count(timed, c_grid, False)
        self.step_overhead_s = float(fw.step_overhead_s)
        self.request_overhead_s = float(fw.request_overhead_s)
        # outside the loop: added to what the client sees by the simulator, never to a step
        self.request_latency_s = float(fw.request_latency_s)

    @staticmethod
    def _linear_in_count(timed: Any, c: np.ndarray, decode: bool) -> tuple[Curve, Curve]:
        def at(n: float) -> Any:
            return _sum(timed(Shape(tokens=n + 0 * c, context=c,
                                    kv_tokens=n * c if decode else n + 0 * c,
                                    sequences=n if decode else 1.0, logits_tokens=1.0,
                                    decode=decode)), lambda op: op.attention_core)

        one, two = np.asarray(at(1.0), float), np.asarray(at(2.0), float)
        return Curve.of(c, two - one, exact=64), Curve.of(c, 2 * one - two, exact=64)

    def attention(self, count: float, context: float, decode: bool) -> float:
        if count <= 0:
            return 0.0
        slope, fixed = ((self.decode_slope, self.decode_fixed) if decode
                        else (self.prefill_slope, self.prefill_fixed))
        c = max(context, 1.0)
        return fixed.at(c) + count * slope.at(c)

    def cost(self, tokens: float, sampled: float, prefill_tokens: float,
             prefill_context: float, decode_seqs: float, decode_context: float,
             admits: bool = False, largest_chunk: float | None = None) -> float:
        """One iteration: ``tokens`` through the token-wise operators (prefill + decode query
        tokens), ``sampled`` rows through the LM head, prefill attention over
        ``prefill_tokens`` queries seeing ``prefill_context`` keys on average, decode attention
        of ``decode_seqs`` queries over ``decode_context`` cached tokens each; ``admits``: new
        requests join in this iteration, which pays the framework's per-request-batch host
        work once (``request_overhead_s``, as ``engine.serve`` charges a batch's TTFT).
        ``largest_chunk``: the largest one request's prompt tokens in the iteration, which
        under DP attention sets the busiest rank (module doc; None: spread evenly)."""
        if tokens <= 0:
            return 0.0
        g = self.ranks
        busy = prefill_tokens  # prompt tokens of the busiest rank, as G ranks' worth
        if g > 1 and largest_chunk is not None and prefill_tokens > 0:
            busy = g * max(prefill_tokens / g, min(prefill_tokens, largest_chunk))
        return (self.linear.at(tokens) + self.attention_block.at(tokens - prefill_tokens + busy)
                + self.head.at(max(sampled, 1.0))
                + self.attention(busy, prefill_context, False)
                + self.attention(decode_seqs, decode_context, True)
                + self.step_overhead_s + (self.request_overhead_s if admits else 0.0))
