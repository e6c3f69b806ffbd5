"""Exporters turn a plan into launchable framework configs.

An exporter is registered by name, states the framework version it targets and a link to the
documentation its keys come from, and returns the files it writes, the launch command, and the
plan fields its framework cannot express (never silently dropped). Each exporter also reads its
own output back into a mapping, so round trips can be tested.

The plan side is :class:`PlanJob`: the chosen mapping plus what the job is (model, cluster,
sequence, batch, precision), as ``accelmap plan --json`` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelmap.errors import InputError


@dataclass(frozen=True)
class PlanJob:
    kind: str  # "train" or "serve"
    model: str  # catalog model id
    accelerator: str
    devices_per_node: int
    nodes: int
    mapping: dict[str, Any]
    seq_len: int = 4096  # training sequence or serving max model length
    global_batch: int = 1  # sequences per optimizer step (training)
    dtype: str = "bf16"
    prompt_len: int = 0
    output_len: int = 0
    framework: str = ""

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "accelerator": self.accelerator,
                "devices_per_node": self.devices_per_node, "nodes": self.nodes,
                "mapping": self.mapping, "seq_len": self.seq_len,
                "global_batch": self.global_batch, "dtype": self.dtype,
                "prompt_len": self.prompt_len, "output_len": self.output_len,
                "framework": self.framework}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanJob:
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except TypeError as e:
            raise InputError(f"plan job is missing a field ({e})") from None


@dataclass(frozen=True)
class ExportResult:
    files: dict[str, str]  # file name -> contents
    launch: str  # the command line that starts the job
    unsupported: list[str] = field(default_factory=list)  # plan fields the framework lacks


@dataclass(frozen=True)
class Exporter:
    name: str
    framework: str
    version: str  # the framework version whose documented keys are used
    url: str
    kinds: tuple[str, ...]  # "train", "serve"
    export: Callable[[PlanJob, Any], ExportResult]  # (job, ModelSpec) -> files
    read_back: Callable[[dict[str, str]], dict[str, Any]]  # files -> mapping fields


_REGISTRY: dict[str, Exporter] = {}


def register(exporter: Exporter) -> Exporter:
    if exporter.name in _REGISTRY:
        raise RuntimeError(f"two exporters named {exporter.name!r}")
    _REGISTRY[exporter.name] = exporter
    return exporter


def exporters() -> dict[str, Exporter]:
    from accelmap.export import formats  # noqa: F401  (registers every exporter)

    return dict(sorted(_REGISTRY.items()))


def get_exporter(name: str) -> Exporter:
    table = exporters()
    if name not in table:
        raise InputError(f"unknown export format {name!r}; use one of {', '.join(table)} "
                         "(accelmap export --list)")
    return table[name]


def load_plan_file(path: Path, index: int = 0) -> PlanJob:
    """A PlanJob from `accelmap plan --json` output (or a bare job object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no such plan file: {path}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if isinstance(data, dict) and "job" in data and "plans" in data:
        plans = data["plans"]
        if not plans:
            raise InputError(f"{path}: the plan file holds no feasible plan to export")
        if not 0 <= index < len(plans):
            raise InputError(f"{path}: plan index {index} out of range (0-{len(plans) - 1})")
        return PlanJob.from_dict({**data["job"], "mapping": plans[index]["mapping"]})
    if isinstance(data, dict) and "mapping" in data and "kind" in data:
        return PlanJob.from_dict(data)
    raise InputError(f"{path}: expected the JSON of `accelmap plan --json`")
