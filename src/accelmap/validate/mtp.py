"""Multi-token-prediction (MTP) runs of the run format (``mtp``, ``acceptance``), predicted
through the serving simulator's speculative decoding (``serving/speculative.py``).

The run states k = ``mtp`` draft tokens per step and the accepted share of the drafted tokens
(``acceptance`` = accepted draft tokens / drafted tokens, in (0, 1]). The simulator takes the
per-token acceptance probability alpha of Leviathan et al. (ICML 2023, "Fast Inference from
Transformers via Speculative Decoding", sec. 3.1 / eq. 1: each draft token accepted i.i.d. with
probability alpha, the step stopping at the first rejection). Under that model the draft tokens
accepted per step are E - 1 = alpha + alpha^2 + ... + alpha^k, so the accepted share is

    share(alpha, k) = (alpha + ... + alpha^k) / k

which rises from 0 to 1 as alpha does; alpha is its inverse, found by bisection (k = 1:
alpha = share). A share of 1 (every draft accepted) is alpha = 1, E = k + 1, taken as
:data:`ALPHA_CAP` (the simulator's acceptance lies in [0, 1)); E is then k + 1 within
k (k + 1) / 2 x 1e-6.

The drafter is the model's own MTP module (``ModelSpec.mtp_layers``, config.json's
num_nextn_predict_layers: one layer for DeepSeek-V3/R1 and GLM-4.5), run k times per step as
SGLang and vLLM run DeepSeek-V3's single module for k > 1; a model without one is drafted by a
one-layer head of its width sharing its embedding and LM head (EAGLE, Li et al. ICML 2024,
sec. 4: one decoder layer plus an FC layer), said in the notes.
"""

from __future__ import annotations

from accelmap.errors import InputError
from accelmap.models.schema import ModelSpec
from accelmap.serving.speculative import Speculation
from accelmap.validate.runs import ServingRun

ALPHA_CAP = 1.0 - 1e-6  # a share of 1: alpha just below 1 (Speculation takes [0, 1))
_BISECTION_STEPS = 60  # alpha to 1e-18: far below any stated share's precision
EAGLE_HEAD_LAYERS = 1  # EAGLE (Li et al. 2024, sec. 4): one decoder layer


def accepted_share(alpha: float, k: int) -> float:
    """Accepted draft tokens / drafted tokens at per-token acceptance ``alpha`` and ``k`` draft
    tokens per step (Leviathan et al. 2023, eq. 1 less the target's own token, over k)."""
    return sum(alpha ** i for i in range(1, k + 1)) / k


def alpha_of_share(share: float, k: int) -> float:
    """The per-token acceptance alpha whose accepted share at ``k`` draft tokens is ``share``
    (the inverse of :func:`accepted_share`, by bisection; 1 is :data:`ALPHA_CAP`)."""
    if not 0.0 < share <= 1.0 or k < 1:
        raise ValueError(f"share {share} must lie in (0, 1] and k {k} be >= 1")
    if share >= 1.0:
        return ALPHA_CAP
    if k == 1:
        return share
    lo, hi = 0.0, 1.0
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi) / 2
        if accepted_share(mid, k) < share:
            lo = mid
        else:
            hi = mid
    return min((lo + hi) / 2, ALPHA_CAP)


def speculation_of(run: ServingRun, spec: ModelSpec, notes: list[str]
                   ) -> Speculation | str | None:
    """The run's MTP drafter (None: the run states neither field; a str: the fact missing)."""
    if run.mtp is None and run.acceptance is None:
        return None
    if run.mtp is None:
        return "acceptance is stated without mtp (draft tokens per step)"
    if run.acceptance is None:
        return (f"mtp {run.mtp} is stated without acceptance (accepted share of the draft "
                "tokens): the speedup depends on it")
    alpha = alpha_of_share(run.acceptance, run.mtp)
    layers = spec.mtp_layers or EAGLE_HEAD_LAYERS
    try:
        sp = Speculation(alpha, run.mtp, None, layers)
    except InputError as e:  # a draft length past the simulator's 1..64
        return f"mtp {run.mtp}: {e}"
    head = (f"its MTP module ({layers} layer(s), num_nextn_predict_layers)" if spec.mtp_layers
            else f"a {layers}-layer head of its width ({spec.id} has no MTP module; EAGLE, "
                 "Li et al. 2024 sec. 4)")
    notes.append(f"MTP: {run.mtp} draft tokens per step by {head}; accepted share "
                 f"{run.acceptance:g} = per-token acceptance alpha {alpha:.4f} (Leviathan et "
                 "al. 2023 eq. 1)")
    return sp


__all__ = ["ALPHA_CAP", "accepted_share", "alpha_of_share", "speculation_of"]
