"""Exact parameter counts, as a tree with slash keys: sums over the tensors of
:mod:`accelmap.models.geometry`, which spells out every weight once (shapes and their sources are
cited there). Totals equal what ``model.num_parameters()`` prints for the published checkpoints
(e.g. Llama-2-7B = 6,738,415,616); the tests check 40+ presets and Hugging Face imports.

*Active* parameters per token count top_k routed experts (plus shared ones) instead of all E,
and everything else once, as Mixtral ("12.9B active") and DeepSeek-V3 ("37B activated") do.
A sharded geometry counts one rank's share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelmap.models.geometry import Geometry, Group, Part
from accelmap.models.schema import ModelSpec


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer block, split so reports can show shapes and shares."""

    attention: int
    norms: int
    ffn: int  # all FFN parameters stored (all experts for MoE)
    ffn_active: int  # FFN parameters one token touches
    moe: bool

    @property
    def total(self) -> int:
        return self.attention + self.norms + self.ffn

    @property
    def active(self) -> int:
        return self.attention + self.norms + self.ffn_active


@dataclass(frozen=True)
class ParamCount:
    total: int
    active: int
    embedding: int  # token (+ position) embeddings: no FLOPs per token beyond a lookup
    lm_head: int  # 0 when tied
    layers: tuple[LayerParams, ...]
    breakdown: dict[str, int] = field(default_factory=dict)

    @property
    def non_embedding(self) -> int:
        """Parameters that do matmul work per token (Kaplan et al. 2020's N excludes embeddings)."""
        return self.total - self.embedding


def group_params(group: Group, top_k: int) -> LayerParams:
    """One layer of ``group``."""

    def part(p: Part) -> int:
        return sum(t.params for t in group.tensors if t.part is p)

    ffn_active = sum(t.active(top_k) for t in group.tensors if t.part is Part.FFN)
    return LayerParams(attention=part(Part.ATTENTION), norms=part(Part.NORMS),
                       ffn=part(Part.FFN), ffn_active=ffn_active, moe=group.moe)


def count_params(model: ModelSpec | Geometry) -> ParamCount:
    """The whole model's parameters, or one rank's share for a sharded geometry."""
    geo = Geometry.of(model)

    def outer(p: Part) -> int:
        return sum(t.params for t in geo.outer if t.part is p)

    embedding, lm_head, extra_norms = outer(Part.EMBEDDING), outer(Part.LM_HEAD), outer(
        Part.FINAL_NORMS)
    layers: list[LayerParams] = []
    for g in geo.groups:
        layers += [group_params(g, geo.top_k)] * g.count
    body = sum(lp.total for lp in layers)
    body_active = sum(lp.active for lp in layers)
    breakdown = {
        "embedding": embedding,
        "layers/attention": sum(lp.attention for lp in layers),
        "layers/norms": sum(lp.norms for lp in layers),
        "layers/ffn": sum(lp.ffn for lp in layers if not lp.moe),
        "layers/moe": sum(lp.ffn for lp in layers if lp.moe),
        "final_norms": extra_norms,
        "lm_head": lm_head,
    }
    total = embedding + body + extra_norms + lm_head
    active = embedding + body_active + extra_norms + lm_head
    return ParamCount(
        total=total,
        active=active,
        embedding=embedding,
        lm_head=lm_head,
        layers=tuple(layers),
        breakdown={k: v for k, v in breakdown.items() if v},
    )


@dataclass(frozen=True)
class MTPCount:
    """Parameters of the multi-token-prediction modules (DeepSeek-V3 sec. 2.2): ``unique`` is
    what they add to the main model; ``stored`` adds the checkpoint's copies of the embedding and
    output head, which the architecture shares (DeepSeek's README_WEIGHTS.md: "11.5B unique
    parameters, excluding the shared 0.9B Embedding and 0.9B output Head")."""

    unique: int
    stored: int


def count_mtp_params(model: ModelSpec | Geometry) -> MTPCount:
    geo = Geometry.of(model)
    shared = sum(t.params for t in geo.mtp if t.part in (Part.EMBEDDING, Part.LM_HEAD))
    stored = sum(t.params for t in geo.mtp)
    return MTPCount(unique=stored - shared, stored=stored)
