"""Claim checks: is a device spec, and a throughput claimed on it, possible?

Three verdicts, each with the bound that decides it, with its numbers:

- **impossible**: the claim needs more than the spec's own peak (memory bandwidth, compute or
  capacity: no software can beat them), or the spec holds more SRAM than its die could hold if
  it were nothing but SRAM;
- **implausible**: the claim needs more than the best fraction of peak ever measured (HBM
  streams at <= 92 % of its datasheet bandwidth, GEMMs at <= 96.9 % of peak), or the spec
  breaks an empirical bound: HBM stacks x the per-stack bandwidth of its generation, FLOP/s per
  watt or per mm2 past 2x the best part shipped on its process node, SRAM over half the die
  (``hardware/plausibility.py`` and the node bounds below). Past such an empirical bound by more
  than 2x again (4x the best part shipped) is impossible;
  or it needs more than the engine's own best prediction for the same model, devices and
  lengths plus the engine's error band (``engine_bound``; ``api.claims`` runs the engine);
- **plausible**: none of these.

A throughput claim ("N tok/s on MODEL at batch B") is decode: each step reads every weight
once for the whole batch (the experts a balanced router touches, for MoE) plus the batch's KV
cache, and does 2 x active parameters FLOPs per token. From the claimed rate the step rate
follows, and from it the least bandwidth and compute the claim needs (no attention FLOPs, no
activations: lower bounds, so a claim flagged here is flagged for certain). Speculative decoding
or multi-token prediction checks several tokens per weight pass and can beat the bandwidth
bound; the claim must say so (``speculative``).

Pure functions over an Accelerator, a ModelSpec and a parsed :class:`Claim`; the engine's own
prediction for the same claim is added by ``api.claims``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from accelmap.errors import InputError
from accelmap.hardware import plausibility
from accelmap.hardware.schema import Accelerator, MemoryKind, MemoryRole
from accelmap.models.schema import ModelSpec
from accelmap.units import Dimension, DType, format_quantity


class Verdict(StrEnum):
    PLAUSIBLE = "plausible"
    IMPLAUSIBLE = "implausible"
    IMPOSSIBLE = "impossible"


_ORDER = {Verdict.PLAUSIBLE: 0, Verdict.IMPLAUSIBLE: 1, Verdict.IMPOSSIBLE: 2}

# The best fractions of peak ever measured, past which a claim is implausible:
# HBM: 7.35 TB/s of GB200's 8 TB/s (92 %) in Microsoft's Azure ND GB200 v6 benchmarks (Azure HPC
# blog, 2025: "7.35 TB/s HBM bandwidth utilization (92% efficiency)"), the highest published;
BEST_BANDWIDTH_FRACTION = 0.92
BANDWIDTH_FRACTION_SOURCE = ("best measured HBM streaming: 7.35 of 8 TB/s (92 %) on GB200, "
                             "Microsoft Azure HPC blog 2025")
# GEMM: 418.7 of 432 TFLOP/s (96.9 %) bf16 on Gaudi 2, the best maximum-achievable-matmul row of
# the shared measurements (matmul.csv M0001, Stas Bekman's ml-engineering table).
BEST_MATMUL_FRACTION = 0.969
MATMUL_FRACTION_SOURCE = ("best measured dense GEMM: 96.9 % of peak (Gaudi 2 bf16, "
                          "ml-engineering MAMF table, matmul.csv M0001)")
NODE_MARGIN = 2.0  # as plausibility.EFFICIENCY_MARGIN: ~two process generations of headroom
SRAM_SHARE_IMPLAUSIBLE = 0.5  # Groq TSP and WSE-3 spend ~25 % of their area on SRAM bitcells


@dataclass(frozen=True)
class Bound:
    """One check: what is needed (or stated) against what is available (or possible)."""

    name: str  # 'decode-bandwidth', 'flops-per-mm2-16bit', 'hbm3-bandwidth' ...
    verdict: Verdict
    need: float
    have: float
    unit: Dimension | str
    sentence: str
    source: str

    @property
    def ratio(self) -> float:
        return self.need / self.have if self.have else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.name, "verdict": self.verdict.value, "need": self.need,
                "have": self.have, "ratio": self.ratio,
                "unit": self.unit.value if isinstance(self.unit, Dimension) else self.unit,
                "message": self.sentence, "source": self.source}


def _q(v: float, dim: Dimension) -> str:
    return format_quantity(v, dim)


# -- silicon: die area and process node ----------------------------------------------------------
@dataclass(frozen=True)
class Silicon:
    process: str
    node_nm: float
    die_area_mm2: float
    source: str = "the spec"


@lru_cache(maxsize=1)
def _silicon_file() -> tuple[dict[str, Silicon], dict[str, str]]:
    from importlib import resources

    import yaml

    data = yaml.safe_load(resources.files("accelmap").joinpath(
        "hardware/data/silicon.yaml").read_text(encoding="utf-8"))
    titles = {k: v["title"] for k, v in data["sources"].items()}
    parts = {k: Silicon(v["process"], float(v["node_nm"]), float(v["die_area_mm2"]),
                        titles[v["source"]]) for k, v in data["parts"].items()}
    return parts, titles


def bundled_silicon(acc_id: str) -> Silicon | None:
    return _silicon_file()[0].get(acc_id)


def parse_silicon(data: Any, origin: str) -> Silicon:
    """The optional ``silicon: {process, node_nm, die_area_mm2}`` block of a spec file."""
    if not isinstance(data, dict):
        raise InputError(f"{origin}: 'silicon' is a mapping such as {{process: TSMC N4, "
                         "node_nm: 4, die_area_mm2: 800}")
    try:
        node, area = float(data["node_nm"]), float(data["die_area_mm2"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{origin}: 'silicon' needs node_nm and die_area_mm2 as numbers") \
            from None
    if node <= 0 or area <= 0:
        raise InputError(f"{origin}: silicon node_nm and die_area_mm2 must be positive")
    return Silicon(str(data.get("process", f"{node:g} nm")), node, area,
                   str(data.get("source", origin)))


def node_class(nm: float) -> str:
    """Marketing node -> the class whose shipped parts bound it: 3nm, 5nm (4N/N4/N5), 7nm
    (N7/N6), 8nm (Samsung 8N/10), 16nm (12-16 nm FinFET)."""
    if nm <= 3.5:
        return "3nm"
    if nm <= 5.5:
        return "5nm"
    if nm <= 7.5:
        return "7nm"
    if nm <= 10.5:
        return "8nm"
    return "16nm"


# TSMC N3E vs N5: 1.6x logic density and 30-35 % less power at the same speed (TSMC's N3E
# announcement, 2022; the table in Tom's Hardware's N2 report). A 3 nm part is bounded by the
# best 5 nm part scaled by these, since none with a published die area is in the catalog.
N3_DENSITY_GAIN = 1.6
N3_POWER_GAIN = 1 / 0.7
N3_SOURCE = "TSMC N3E vs N5: 1.6x logic density, ~30 % less power (TSMC, 2022)"

# SRAM macro density, Mib per mm2 with assist circuits: TSMC N5 and N3E 31.8 (0.021 um2 HD
# bitcell), N3B 33.55 (0.0199 um2) (TSMC IEDM 2022, WikiChip "did we just witness the death of
# SRAM"); other nodes scaled by HD bitcell area: N7 0.027 um2, 14/16 nm 0.064 um2 (GF 14LPP;
# TSMC 16FF+ is 0.074, the larger cell gives the looser bound to neither), Samsung 8 nm taken at
# N7's density (a loose bound).
SRAM_MIB_PER_MM2 = {"3nm": 33.55, "5nm": 31.8, "7nm": 31.8 * 0.021 / 0.027,
                    "8nm": 31.8 * 0.021 / 0.027, "16nm": 31.8 * 0.021 / 0.064}
SRAM_SOURCE = ("SRAM macro density: 31.8 Mib/mm2 at TSMC N5/N3E (0.021 um2 bitcell, TSMC IEDM "
               "2022 via WikiChip), scaled by bitcell area for other nodes")


@dataclass(frozen=True)
class NodeReference:
    part: str
    value: float  # FLOP/s per mm2 or per W
    source: str


def _width(d: DType) -> str:
    return "16bit" if d in (DType.BF16, DType.FP16) else "8bit"


def node_references(known: Sequence[Accelerator]) -> dict[tuple[str, str, str], NodeReference]:
    """(node class, 'mm2'|'W', '16bit'|'8bit') -> the best bundled part on that node: its dense
    FLOP/s per mm2 of die (parts with a published area) and per watt of TDP; a peak the catalog
    marks uncertain (WSE-3's undisclosed dense fp16) is left out."""
    out: dict[tuple[str, str, str], NodeReference] = {}
    for acc in known:
        si = bundled_silicon(acc.id)
        if si is None:
            continue
        cls = node_class(si.node_nm)
        for d in (DType.BF16, DType.FP16, DType.FP8, DType.INT8):
            entry = acc.peak_entry(d)
            if entry is None or entry[1].uncertain:  # an unconfirmed peak bounds nothing
                continue
            p = entry[1].value
            per = [("mm2", p / si.die_area_mm2)]
            if acc.tdp is not None:  # an uncertain (system-level) TDP only lowers a ratio
                per.append(("W", p / acc.tdp.value))
            for what, v in per:
                key = (cls, what, _width(d))
                if key not in out or v > out[key].value:
                    out[key] = NodeReference(acc.id, v, si.source)
    # 8-bit runs at least at twice the 16-bit rate on any part with 8-bit matrix units (the
    # precision ladder of plausibility.py): a node whose parts lack them (V100) still bounds
    # an 8-bit design by 2x its 16-bit best
    for (cls, what, w), ref in list(out.items()):
        if w == "16bit":
            key = (cls, what, "8bit")
            if key not in out or out[key].value < 2 * ref.value:
                out[key] = NodeReference(ref.part, 2 * ref.value,
                                         f"{ref.source}; 8-bit at 2x the 16-bit rate")
    # 3 nm: the 5 nm best, scaled by TSMC's stated gains
    for (cls, what, w), ref in list(out.items()):
        if cls == "5nm":
            k = N3_DENSITY_GAIN if what == "mm2" else N3_POWER_GAIN
            out.setdefault(("3nm", what, w), NodeReference(ref.part, ref.value * k,
                                                          f"{ref.source}; x{k:.2f}: {N3_SOURCE}"))
    return out


def check_silicon(acc: Accelerator, si: Silicon, known: Sequence[Accelerator]) -> list[Bound]:
    """FLOP/s per mm2 and per watt against the node's best shipped part x 2; SRAM against what
    the die could hold."""
    refs = node_references(known)
    cls = node_class(si.node_nm)
    out: list[Bound] = []
    for d in (DType.BF16, DType.FP16, DType.FP8, DType.INT8):
        p = acc.peak(d)
        if p is None:
            continue
        per = [("mm2", p / si.die_area_mm2, f"{si.die_area_mm2:g} mm2")]
        if acc.tdp is not None:
            per.append(("W", p / acc.tdp.value, _q(acc.tdp.value, Dimension.POWER)))
        for what, v, over in per:
            ref = refs.get((cls, what, _width(d)))
            if ref is None:
                continue
            limit = ref.value * NODE_MARGIN
            unit = "FLOP/s per mm2" if what == "mm2" else "FLOP/s per W"
            verdict = _empirical(v / limit)
            out.append(Bound(
                f"{d.value}-per-{what}-{cls}", verdict, v, limit, unit,
                f"{d.value} {_q(p, Dimension.FLOPS)} on {over} = {v / 1e12:.3g} T{unit}; "
                f"{cls} parts reach {ref.value / 1e12:.3g} ({ref.part}), bound "
                f"{NODE_MARGIN:g}x = {limit / 1e12:.3g}",
                f"best bundled {cls} part x {NODE_MARGIN:g} ({ref.source})"))
    sram = sum(m.capacity.value for m in acc.memory if m.kind is MemoryKind.SRAM)
    if sram:
        cap = si.die_area_mm2 * SRAM_MIB_PER_MM2[cls] * 2**20 / 8  # bytes on an all-SRAM die
        share = sram / cap
        verdict = (Verdict.IMPOSSIBLE if share > 1.01 else Verdict.IMPLAUSIBLE
                   if share > SRAM_SHARE_IMPLAUSIBLE else Verdict.PLAUSIBLE)
        out.append(Bound(
            f"sram-density-{cls}", verdict, sram, cap * SRAM_SHARE_IMPLAUSIBLE, Dimension.BYTES,
            f"{_q(sram, Dimension.BYTES)} of SRAM on {si.die_area_mm2:g} mm2 of {si.process}: "
            f"{share:.0%} of what the die holds as pure SRAM ({_q(cap, Dimension.BYTES)}); "
            f"over {SRAM_SHARE_IMPLAUSIBLE:.0%} is implausible, over 100 % impossible",
            SRAM_SOURCE))
    return out


def spec_bounds(acc: Accelerator, known: Sequence[Accelerator] = (),
                silicon: Silicon | None = None) -> list[Bound]:
    """Every bound on the spec itself: the plausibility findings (HBM stacks x per-stack
    bandwidth, capacity, FLOP/s per W, power budget, consistency) and, with a die area and a
    node, the silicon bounds. A plausibility finding more than 2x past its bound is beyond any
    package that ships or is announced: impossible."""
    out = []
    for f in plausibility.check(acc, known):
        if f.explained:
            continue
        v = Verdict.IMPOSSIBLE if f.factor > 2.0 else Verdict.IMPLAUSIBLE
        out.append(Bound(f.bound, v, f.factor, 1.0, "x bound", f.sentence(), f.source))
    si = silicon or bundled_silicon(acc.id)
    if si is not None:
        out += check_silicon(acc, si, known)
    return out


# -- claims --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    """'N tok/s [per user|per device] on MODEL [at batch B] [with PRECISION] [on D devices]
    [prompt P] [output O] [speculative]'."""

    tokens_per_s: float
    model: str
    batch: int | None = None
    per: str = "total"  # total | user | device
    precision: DType | None = None
    devices: int | None = None
    prompt: int | None = None
    output: int | None = None
    speculative: bool = False
    text: str = ""
    counts: str = "output"  # output tokens (serving benchmarks' throughput) or all (in + out)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tokens_per_s": self.tokens_per_s, "per": self.per,
                "counts": self.counts,
                "model": self.model, "batch": self.batch,
                "precision": self.precision.value if self.precision else None,
                "devices": self.devices, "prompt": self.prompt, "output": self.output,
                "speculative": self.speculative}


_NUM = r"([0-9][0-9,_]*(?:\.[0-9]+)?)\s*([kKM]?)"
_RATE = re.compile(_NUM + r"\s*(?:output\s+)?(?:tok(?:en)?s?)\s*(?:/|per)\s*(?:s|sec|second)\b",
                   re.I)


def _number(num: str, suffix: str) -> float:
    return float(num.replace(",", "").replace("_", "")) * {"": 1, "k": 1e3, "K": 1e3,
                                                           "M": 1e6}[suffix]


def parse_claim(text: str) -> Claim:
    """Read a claim sentence; one InputError that shows the form when it cannot."""
    t = " ".join(text.split())
    m = _RATE.search(t)
    form = ("write it as 'N tok/s on MODEL at batch B' (optionally 'per user', 'per device', "
            "'with fp8', 'on 8 devices', 'prompt 2048 output 128', 'speculative')")
    if not m:
        raise InputError(f"claim {text!r}: no rate found; {form}")
    rate = _number(m.group(1), m.group(2))
    rest = t[m.end():]
    per = "total"
    if re.search(r"\bper\s+(user|request|sequence|stream)\b", t, re.I):
        per = "user"
    elif re.search(r"\bper\s+(device|gpu|chip|card|accelerator)\b", t, re.I):
        per = "device"
    mm = re.search(r"\bon\s+(?!\d+\s*(?:x\s*)?(?:devices?|gpus?|chips?|cards?|accelerators?)\b)"
                   r"([A-Za-z0-9][\w.\-/]*)", rest, re.I)
    if not mm:
        raise InputError(f"claim {text!r}: no model found; {form}")

    def grab(pattern: str) -> int | None:
        g = re.search(pattern, t, re.I)
        return int(_number(g.group(1), g.group(2))) if g else None

    batch = grab(r"\bbatch(?:\s+size)?\s*(?:of\s+|=\s*)?" + _NUM)
    devices = grab(r"\bon\s+" + _NUM + r"\s*(?:x\s*)?(?:devices?|gpus?|chips?|cards?|"
                   r"accelerators?)\b")
    prompt = grab(r"\b(?:prompt|input|isl)\s*(?:of\s+|=\s*)?" + _NUM)
    output = grab(r"\b(?:output|osl)\s*(?:of\s+|=\s*)?" + _NUM + r"(?!\s*tok)")
    precision = None
    for d in sorted(DType, key=lambda x: -len(x.value)):
        if re.search(rf"\b{d.value}\b", t, re.I):
            precision = d
            break
    spec = bool(re.search(r"\bspeculat|\bmtp\b|\bmedusa\b|\beagle\b", t, re.I))
    if per == "user" and batch is None:
        batch = 1
    counts = "all" if re.search(r"input\s*(\+|and)\s*output|total\s+tokens|all\s+tokens", t,
                                re.I) else "output"
    return Claim(rate, mm.group(1), batch, per, precision, devices, prompt, output, spec, t,
                 counts)


@dataclass(frozen=True)
class Need:
    """What one decode step and the claimed rate require."""

    weight_dtype: DType
    weight_dtype_note: str
    weights_bytes: float  # every weight, stored
    bytes_per_step: float  # weights read + KV read per decode step
    steps_per_s: float | None
    aggregate_tokens_per_s: float
    flops_per_token: float
    devices: int
    notes: list[str] = field(default_factory=list)


def _weight_dtype(acc: Accelerator, claim: Claim) -> tuple[DType, str]:
    if claim.precision is not None:
        return claim.precision, f"{claim.precision.value} weights, as the claim says"
    for d in (DType.FP4, DType.INT4, DType.FP8, DType.INT8, DType.BF16, DType.FP16):
        if acc.peak(d) is not None:
            return d, (f"precision not stated: {d.value} weights, the narrowest format "
                       f"{acc.id} computes in (the most lenient reading)")
    return DType.BF16, "precision not stated: bf16 weights"


def need(acc: Accelerator, spec: ModelSpec, claim: Claim, params: Any) -> Need:
    """The bytes, FLOPs and step rate a decode claim needs (``params``: models.params count)."""
    dt, dt_note = _weight_dtype(acc, claim)
    D = claim.devices or 1
    agg = claim.tokens_per_s * {"total": 1, "user": claim.batch or 1, "device": D}[claim.per]
    notes = [dt_note]
    # weights a decode step reads: all but the embedding table (a tied table is the LM head)
    read = params.total - params.embedding + (params.embedding if spec.tied_embeddings else 0)
    if spec.moe is not None and claim.batch:
        E, k = spec.moe.num_experts, spec.moe.top_k
        per_expert = (params.total - params.active) / max(E - k, 1)
        touched = E * (1 - (1 - k / E) ** claim.batch)
        read = read - (E - touched) * per_expert
        notes.append(f"MoE: {touched:.1f} of {E} experts per layer touched at batch "
                     f"{claim.batch} with balanced routing")
    elif spec.moe is not None:
        read = params.active - params.embedding
        notes.append("MoE without a batch: only the active experts counted")
    kv = 0.0
    if claim.batch and claim.prompt:
        ctx = claim.prompt + (claim.output or 0) / 2
        kv = claim.batch * ctx * spec.kv_width * spec.n_layers * dt.bytes
        notes.append(f"KV cache read per step: {claim.batch} x {ctx:,.0f} tokens")
    else:
        notes.append("no prompt length: the KV-cache read is left out (a lower bound)")
    steps = agg / claim.batch if claim.batch else None
    flops = 2.0 * (params.active - params.embedding)  # one forward pass of one token
    if claim.counts == "all":
        notes.append("the rate counts prompt and output tokens: 2 x active parameters each")
        if claim.prompt and claim.output and steps is not None:
            steps *= claim.output / (claim.prompt + claim.output)  # decode steps are the outputs
    elif claim.prompt and claim.output:
        flops *= (claim.prompt + claim.output) / claim.output
        notes.append(f"each output token carries {claim.prompt / claim.output:g} prompt tokens "
                     "of prefill: 2 x active parameters x (prompt + output) / output FLOPs")
    else:
        notes.append("no prompt/output lengths: decode FLOPs only (a lower bound)")
    return Need(dt, dt_note, params.total * dt.bytes, read * dt.bytes + kv, steps, agg,
                flops, D, notes)


def _device_bandwidth(acc: Accelerator) -> tuple[float | None, str]:
    """Where weights stream from: device memory (SRAM on SRAM machines)."""
    m = acc.device_memory
    return (m.bandwidth.value if m.bandwidth else None), f"{m.name} ({m.kind.value})"


def claim_bounds(acc: Accelerator, spec: ModelSpec, claim: Claim, params: Any,
                 silicon: Silicon | None = None, known: Sequence[Accelerator] = ()
                 ) -> tuple[list[Bound], Need]:
    """Capacity, bandwidth and compute the claim needs against the spec (x devices); with the
    die area and node, the compute per device against what that node has shipped per mm2."""
    n = need(acc, spec, claim, params)
    D = n.devices
    out: list[Bound] = []
    cap = sum(m.capacity.value for m in acc.memory if m.role is MemoryRole.DEVICE
              or (m.kind is MemoryKind.SRAM and acc.device_memory.kind is MemoryKind.SRAM))
    cap_all = cap * D
    out.append(Bound(
        "claim-weights-fit", Verdict.IMPOSSIBLE if n.weights_bytes > cap_all * 1.01
        else Verdict.PLAUSIBLE, n.weights_bytes, cap_all, Dimension.BYTES,
        f"{spec.id} in {n.weight_dtype.value} is {_q(n.weights_bytes, Dimension.BYTES)}; "
        f"{D} x {acc.id} hold {_q(cap_all, Dimension.BYTES)}",
        "the spec's device memory"))
    bw, where = _device_bandwidth(acc)
    if n.steps_per_s is not None and bw:
        have = bw * D
        req = n.bytes_per_step * n.steps_per_s
        ratio = req / have
        v = (Verdict.IMPOSSIBLE if ratio > 1.01 else Verdict.IMPLAUSIBLE
             if ratio > BEST_BANDWIDTH_FRACTION else Verdict.PLAUSIBLE)
        if claim.speculative and v is not Verdict.PLAUSIBLE:
            v = Verdict.PLAUSIBLE
        tail = (" (the claim uses speculative decoding: several tokens per weight pass, so "
                "this bound does not apply)" if claim.speculative else
                " (speculative decoding could beat it: say so in the claim)"
                if ratio > BEST_BANDWIDTH_FRACTION else "")
        out.append(Bound(
            "claim-bandwidth", v, req, have, Dimension.BANDWIDTH,
            f"{n.steps_per_s:,.1f} decode steps/s x {_q(n.bytes_per_step, Dimension.BYTES)} "
            f"per step needs {_q(req, Dimension.BANDWIDTH)}; {D} x {where} give "
            f"{_q(have, Dimension.BANDWIDTH)} ({ratio:.0%}; the best measured is "
            f"{BEST_BANDWIDTH_FRACTION:.0%}){tail}",
            BANDWIDTH_FRACTION_SOURCE))
    peak = acc.peak(n.weight_dtype) or acc.peak(DType.BF16) or max(
        (acc.peak(d) or 0.0) for d in DType)
    # weight-only int4/int8 GEMMs run at the activation dtype when the part has no such unit
    if peak:
        have = peak * D
        req = n.flops_per_token * n.aggregate_tokens_per_s
        ratio = req / have
        v = (Verdict.IMPOSSIBLE if ratio > 1.01 else Verdict.IMPLAUSIBLE
             if ratio > BEST_MATMUL_FRACTION else Verdict.PLAUSIBLE)
        out.append(Bound(
            "claim-compute", v, req, have, Dimension.FLOPS,
            f"{n.aggregate_tokens_per_s:,.0f} tok/s x {n.flops_per_token / 1e9:,.1f} GFLOP per "
            f"token needs {_q(req, Dimension.FLOPS)}; {D} x {acc.id} peak "
            f"{_q(have, Dimension.FLOPS)} ({ratio:.0%}; the best measured GEMM is "
            f"{BEST_MATMUL_FRACTION:.1%})", MATMUL_FRACTION_SOURCE))
    if silicon is not None:
        cls = node_class(silicon.node_nm)
        ref = node_references(known).get((cls, "mm2", _width(n.weight_dtype)))
        if ref is not None:
            per_dev = n.flops_per_token * n.aggregate_tokens_per_s / D
            limit = ref.value * NODE_MARGIN * silicon.die_area_mm2
            out.append(Bound(
                f"claim-{_width(n.weight_dtype)}-per-mm2-{cls}", _empirical(per_dev / limit),
                per_dev, limit, Dimension.FLOPS,
                f"the claim needs {_q(per_dev, Dimension.FLOPS)} per device; "
                f"{silicon.die_area_mm2:g} mm2 of {cls} silicon at {NODE_MARGIN:g}x the best "
                f"shipped density ({ref.value / 1e12:.3g} TFLOP/s per mm2, {ref.part}) gives "
                f"{_q(limit, Dimension.FLOPS)}",
                f"best bundled {cls} part x {NODE_MARGIN:g} ({ref.source})"))
    return out, n


# where no error band covers runs like the claim's (engine.error_band), the claim may exceed
# the engine's best by this factor before it is implausible: the largest p80 serving error of
# any group in engine/data/error_bands.yaml is below 2x for the GPU stacks (a stated,
# conservative allowance, not a fit)
NO_BAND_ALLOWANCE = 1.0


def engine_bound(claimed: float, best: float, best_batch: int, band_pct: float | None,
                 speculative: bool) -> Bound:
    """The second tier: a claim above the engine's best prediction for the same model, devices
    and lengths (the best over the batches that fit, when the claim names none) plus the
    engine's error band on runs like it is implausible. Speculative decoding is not simulated
    here, so it is stated but not judged."""
    allowance = band_pct / 100 if band_pct is not None else NO_BAND_ALLOWANCE
    have = best * (1 + allowance)
    v = (Verdict.PLAUSIBLE if speculative or claimed <= have else Verdict.IMPLAUSIBLE)
    band = (f"its error band ±{band_pct:.0f} %" if band_pct is not None else
            f"a {NO_BAND_ALLOWANCE:.0%} allowance (no error band for runs like this)")
    tail = " (speculative: not simulated here, so not judged)" if speculative else ""
    return Bound(
        "claim-engine-best", v, claimed, have, "tokens/s",
        f"{claimed:,.0f} tok/s claimed; the engine's best is {best:,.0f} tok/s (batch "
        f"{best_batch:,}), with {band} {have:,.0f} tok/s ({claimed / have:.2f}x){tail}",
        "the engine's own prediction (api.claims) and engine.error_band")


def _empirical(ratio: float) -> Verdict:
    """An empirical bound (already 2x the best shipped part): past it implausible, past it by
    more than 2x again (4x anything shipped on the node) impossible."""
    return (Verdict.IMPOSSIBLE if ratio > 2.0 else Verdict.IMPLAUSIBLE if ratio > 1.01
            else Verdict.PLAUSIBLE)


def verdict(bounds: Sequence[Bound]) -> Verdict:
    return max((b.verdict for b in bounds), key=lambda v: _ORDER[v], default=Verdict.PLAUSIBLE)


def deciding(bounds: Sequence[Bound]) -> Bound | None:
    """The bound that decides the verdict: the worst verdict, then the largest ratio."""
    v = verdict(bounds)
    worst = [b for b in bounds if b.verdict is v and v is not Verdict.PLAUSIBLE]
    return max(worst, key=lambda b: b.ratio) if worst else None
