"""What a report draws from: the ``--json`` result of a command, its detail, its inputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelmap.errors import InputError

# The results a report knows, by the command whose --json wrote them.
KINDS = {
    "estimate": "accelmap estimate",
    "plan": "accelmap plan",
    "hardware": "accelmap plan --hw A,B",
    "deadline": "accelmap plan --deadline",
    "compare": "accelmap compare",
    "validate": "accelmap validate --cases",
    "roofline": "accelmap roofline",
    "serving": "accelmap estimate --scenario offline/server",
    "frontier": "accelmap frontier",
}


def kind_of(data: Any) -> str:
    """Which command's ``--json`` this is (one of ``KINDS``), from the keys it has."""
    if isinstance(data, dict):
        if "plans" in data and "objective" in data:
            return "plan"
        if "hardware" in data and "pareto" in data:
            return "hardware"
        if "frontier" in data and "concurrency" in data:
            return "frontier"
        if "tried" in data and "deadline_s" in data:
            return "deadline"
        if "rows" in data and "summary" in data:
            return "validate"
        if "rows" in data and "job" in data:
            return "compare"
        if "ridge_flop_per_byte" in data and "ops" in data:
            return "roofline"
        if "scenario" in data and "requests" in data:
            return "serving"
        if "phase" in data and "memory" in data:
            return "estimate"
    # short enough to stay one line after a long path: the commands by name, not by flags
    raise InputError("not a result accelmap can report: give what --json of estimate, plan, "
                     "compare, validate or roofline wrote")


@dataclass(frozen=True)
class Report:
    """One command's result and what the pictures need besides it.

    - ``result``: the object ``--json`` prints (the web API returns the same);
    - ``detail``: ``roofline`` (ops, peak FLOP/s, bandwidth, ridge), ``estimate`` (the best
      plan's full estimate, for its memory and step-time breakdown), ``pipeline`` (the
      passes of one step, ``cost.timeline``), ``notes`` (what could not be drawn and why);
    - ``inputs``: the options that produced it, by their CLI names;
    - ``version``: the accelmap version; ``command``: the command line, where known.
    """

    kind: str
    result: dict[str, Any]
    detail: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    version: str = ""
    command: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"unknown report kind {self.kind!r}; one of {', '.join(KINDS)}")

    @property
    def title(self) -> str:
        r = self.result
        model = r.get("model") or (r.get("job") or {}).get("model") or ""
        where = r.get("cluster") or r.get("system") or r.get("accelerator") or ""
        what = {"estimate": "estimate", "plan": "plan", "hardware": "accelerators compared",
                "deadline": "smallest cluster for a deadline", "compare": "accelerators compared",
                "validate": "validation: predicted vs measured", "roofline": "roofline",
                "serving": "serving simulation",
                "frontier": "throughput vs interactivity"}[self.kind]
        head = " on ".join(x for x in (str(model), str(where)) if x)
        return f"accelmap {what}" + (f": {head}" if head else "")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "version": self.version,
                "command": self.command, "inputs": self.inputs, "result": self.result,
                "detail": self.detail}
