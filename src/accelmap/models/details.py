"""What ``models list`` and ``models show`` report about a model: parameter counts (total,
active, by part), the shapes of each group of identical layers, and FLOPs per token.

Plain data (JSON-ready dicts), so every face prints the same keys.
"""

from __future__ import annotations

from typing import Any

from accelmap.models.params import count_params
from accelmap.models.schema import ModelSpec

# FLOPs per token are quoted at this sequence length unless one is given (or the model's
# maximum, when shorter): long enough that attention shows, short enough to be a common one.
DEFAULT_FLOPS_SEQ = 4096

FLOPS_DEFINITION = ("model FLOPs; causal attention over seq_len; training = 3x forward "
                    "(no recompute)")


def summary(spec: ModelSpec) -> dict[str, Any]:
    """One line of ``models list``: identity, total and active parameters, shape."""
    pc = count_params(spec)
    return {
        "id": spec.id,
        "name": spec.name,
        "family": spec.family,
        "params": pc.total,
        "active_params": pc.active,
        "attention": spec.attention_kind.value,
        "moe": spec.is_moe,
        "layers": spec.n_layers,
        "d_model": spec.d_model,
        "published_params": spec.published_params,
    }


def details(spec: ModelSpec, seq: int | None = None) -> dict[str, Any]:
    """The summary plus the spec, parameters by part, FLOPs per token at ``seq`` (default
    min(max_seq_len, DEFAULT_FLOPS_SEQ)), per-layer-group shapes and the cited sources."""
    # here, not at the top: the FLOPs module needs numpy, which `models list` can do without
    from accelmap.models.flops import (
        forward_flops_per_token,
        layer_groups,
        training_flops_per_token,
    )

    seq_len = seq or min(spec.max_seq_len, DEFAULT_FLOPS_SEQ)
    pc = count_params(spec)
    data = summary(spec)
    data.update({
        "spec": spec.model_dump(mode="json", exclude={"sources"}),
        "param_breakdown": pc.breakdown,
        "embedding_params": pc.embedding,
        "non_embedding_params": pc.non_embedding,
        "seq_len": seq_len,
        "flops_per_token": {
            "forward": forward_flops_per_token(spec, seq_len),
            "training": training_flops_per_token(spec, seq_len),
            "definition": FLOPS_DEFINITION,
        },
        "layers_detail": [
            {
                "layers": [g.first, g.last],
                "count": g.count,
                "kind": g.kind,
                "params_per_layer": g.params // g.count,
                "matrices": [{"name": m.name, "shape": [m.rows, m.cols], "copies": m.copies}
                             for m in g.matrices],
            }
            for g in layer_groups(spec)
        ],
        "sources": {k: v.model_dump(mode="json") for k, v in spec.sources.items()},
    })
    return data
