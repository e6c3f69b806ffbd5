"""Hardware-aware model shapes: ``advise`` (the model's shape issues on this hardware, each
costed by the engine: ``search.advise``) and ``design`` (a search over shapes under a
parameter budget and a hardware target: ``search.design``).

    from accelmap import api
    spec, system = api.load_model("gpt2"), api.load_system(hw="a100-sxm4-80gb")
    adv = api.advise(spec, system, api.training(12, 1024), framework="torch-compile")
    for f in adv.findings:
        print(f.rule, f.fix, f.speedup)
"""

from __future__ import annotations

from typing import Any

from accelmap.engine import System, class_framework, estimate, resolve_framework
from accelmap.models.schema import ModelSpec
from accelmap.search.advise import Advice
from accelmap.search.advise import advise as _advise
from accelmap.search.design import Design
from accelmap.workload import Inference, Training

__all__ = ["Advice", "Design", "advise", "design"]


def advise(model: ModelSpec, system: System, workload: Training | Inference,
           mapping: Any = None, *, framework: Any = None) -> Advice:
    """Shape findings for ``model`` on ``system`` under ``workload`` and ``mapping`` (default:
    the engine's), each with the engine's time as it is and with the fix."""
    fw = resolve_framework(framework, class_framework(system, isinstance(workload, Training)))

    def run(spec: ModelSpec) -> Any:
        return estimate(spec, system, workload, mapping, framework=fw)

    tp = int(mapping.tp) if mapping is not None else 1
    ep = int(mapping.ep) if mapping is not None else 1
    seq = workload.seq_len if isinstance(workload, Training) else workload.prompt_len
    return _advise(model, system, run, fw.name, tp=tp, ep=ep, seq=seq)


def design(template: ModelSpec, system: System, workload: Training | Inference,
           params: str | float, mapping: Any = None, *, framework: Any = None,
           tolerance: float = 0.1, quality: str = "params", speed: str | None = None,
           tpot: str | float | None = None, experts: str | None = None,
           runner: Any = None) -> Design:
    """Shapes of ``params`` parameters (within ``tolerance``) in ``template``'s architecture,
    each estimated on ``system`` under ``workload``/``mapping``; the Pareto front of
    ``quality`` (params or flops) against ``speed`` (tokens/s, or 1/tpot for serving
    latency); ``tpot`` a latency target ('20ms'); ``experts`` 'E:k,...' MoE variants
    ('0' keeps dense ones too); ``runner`` (``api.runner``, --ray): where the shapes are
    estimated, the same rows."""
    from accelmap.api.parse import count, duration
    from accelmap.errors import InputError
    from accelmap.search.design import candidates, default_space, run_design

    budget = count(params)
    if not 0 < tolerance < 1:
        raise InputError(f"--tolerance {tolerance}: a fraction between 0 and 1")
    moe: list[tuple[int, int]] = []
    for part in (experts or "0").split(","):
        p = part.strip()
        if p in ("0", "dense", ""):
            moe.append((0, 0))
            continue
        e, _, k = p.partition(":")
        try:
            moe.append((int(e), int(k or 2)))
        except ValueError:
            raise InputError(f"--experts {p!r}: write E:k such as 8:2, or 0 for dense") \
                from None
    train = isinstance(workload, Training)
    if tpot is not None and train:
        raise InputError("--tpot is a serving target (--serve)")
    sp = speed or ("1/tpot" if (tpot is not None) else "tokens/s")
    shapes = candidates(template, budget, tolerance, default_space(budget, moe))
    if not shapes:
        raise InputError(f"no {template.id}-style shape lands within {tolerance:.0%} of "
                         f"{budget:,.0f} parameters: widen --tolerance")
    fw = resolve_framework(framework, class_framework(system, train))

    def run(spec: ModelSpec) -> Any:
        return estimate(spec, system, workload, mapping, framework=fw)

    return run_design(template, shapes, run, budget=budget, quality=quality, speed=sp,
                      tpot_max_s=duration(tpot) if tpot is not None else None,
                      accelerator=system.accelerator.id, runner=runner)
