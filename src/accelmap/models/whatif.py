"""What-ifs on a model's shape: "what if Llama 3.1 8B had a vocabulary of 128,256 + 64".

``--set vocab_size=50304`` (or ``layers=40``, ``kv_heads=4``, ``experts=16``) changes one
dimension of the model; the name follows the ModelSpec field (short aliases allowed), the
value is a whole number or a factor (``x2``). The changed spec is validated as a catalog file
would be (n_kv_heads must divide n_heads, ...), loses its published parameter count (it is no
longer the published model) and says what changed in its notes.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from accelmap.errors import InputError
from accelmap.models.schema import ModelSpec

# canonical name -> (path in the spec, aliases)
MODEL_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "n_layers": (("n_layers",), ("layers", "num_layers", "num_hidden_layers")),
    "d_model": (("d_model",), ("hidden", "hidden_size", "width")),
    "n_heads": (("n_heads",), ("heads", "num_heads", "num_attention_heads")),
    "n_kv_heads": (("n_kv_heads",), ("kv_heads", "num_key_value_heads")),
    "head_dim": (("head_dim",), ()),
    "ffn_dim": (("ffn_dim",), ("ffn", "intermediate_size")),
    "vocab_size": (("vocab_size",), ("vocab",)),
    "max_seq_len": (("max_seq_len",), ("context", "max_position_embeddings")),
    "num_experts": (("moe", "num_experts"), ("experts", "moe.num_experts")),
    "top_k": (("moe", "top_k"), ("experts_per_token", "moe.top_k")),
    "expert_ffn_dim": (("moe", "expert_ffn_dim"), ("expert_ffn", "moe.expert_ffn_dim")),
}
_BY_NAME = {n: canon for canon, (_, aliases) in MODEL_FIELDS.items() for n in (canon, *aliases)}


@dataclass(frozen=True)
class ModelOverride:
    name: str  # canonical
    text: str
    value: int | None = None
    factor: float | None = None

    def new_value(self, old: int | None, model: str) -> int:
        if self.value is not None:
            return self.value
        assert self.factor is not None
        if old is None:
            raise InputError(f"--set {self.text}: {model} has no {self.name} to scale")
        return max(1, round(old * self.factor))


def model_names() -> list[str]:
    return list(MODEL_FIELDS)


def all_names() -> list[str]:
    return list(_BY_NAME)


def is_model_field(name: str) -> bool:
    return name.strip().lower().replace("-", "_") in _BY_NAME


def parse_model_override(name: str, raw: str, text: str) -> ModelOverride:
    key = name.strip().lower().replace("-", "_")
    if key not in _BY_NAME:
        near = difflib.get_close_matches(key, list(_BY_NAME), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(dict.fromkeys(_BY_NAME[n] for n in near))}?" \
            if near else ""
        raise InputError(f"unknown model field {name!r}{hint}")
    canon = _BY_NAME[key]
    r = raw.strip().lower().replace(",", "_")
    try:
        if r[:1] in ("x", "*") or r.endswith("x"):
            k = float(r.strip("x*"))
            if not k > 0:
                raise ValueError
            return ModelOverride(canon, text, factor=k)
        v = int(float(r.replace("_", "")))
        if v <= 0 or float(r.replace("_", "")) != v:
            raise ValueError
    except ValueError:
        raise InputError(f"--set {text}: {canon} takes a positive whole number (e.g. "
                         f"{canon}=64) or a factor (x2)") from None
    return ModelOverride(canon, text, value=v)


def _get(spec: ModelSpec, path: tuple[str, ...]) -> int | None:
    obj: Any = spec
    for p in path:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    return int(obj)


def apply_model(spec: ModelSpec, overrides: Sequence[ModelOverride]) -> ModelSpec:
    """``spec`` with the overrides, validated; an impossible shape is one InputError."""
    if not overrides:
        return spec
    data = spec.model_dump()
    notes = []
    for o in overrides:
        path = MODEL_FIELDS[o.name][0]
        if path[0] == "moe" and spec.moe is None:
            raise InputError(f"--set {o.text}: {spec.id} is a dense model (no experts)")
        old = _get(spec, path)
        if old is None and o.name in ("n_kv_heads", "head_dim"):
            old = spec.kv_heads if o.name == "n_kv_heads" else spec.head_size
        new = o.new_value(old, spec.id)
        target = data
        for p in path[:-1]:
            target = target[p]
        target[path[-1]] = new
        notes.append(f"what-if: {o.name} {old} -> {new} (--set {o.text})")
    data["published_params"] = None
    data["published_params_source"] = None
    data["notes"] = (*spec.notes, *notes)
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as e:
        msg = str(e.errors()[0]["msg"]).removeprefix("Value error, ")
        raise InputError(f"--set on {spec.id}: {msg}") from None


def what_if_notes(spec: ModelSpec) -> list[str]:
    return [n for n in spec.notes if n.startswith("what-if: ")]
