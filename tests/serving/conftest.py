"""Small serving setups shared by the serving tests."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from accelmap import api
from accelmap.cost.framework import FrameworkProfile
from accelmap.engine import System, resolve_framework
from accelmap.mapping.plan import Mapping
from accelmap.models.schema import ModelSpec
from accelmap.serving.iteration import IterationCost
from accelmap.workload import Inference


@dataclass(frozen=True)
class Setup:
    spec: ModelSpec
    system: System
    wl: Inference
    m: Mapping
    fw: FrameworkProfile


def setup(model: str = "llama-3.1-8b", hw: str | None = "h100-sxm5-80gb",
          cluster: str | None = None, tp: int = 1, fw: str = "vllm", prompt: int = 512,
          output: int = 128, batch: int = 1, weights: str = "bf16") -> Setup:
    system = api.load_system(hw=None if cluster else hw, cluster=cluster)
    return Setup(api.load_model(model), system, api.inference(batch, prompt, output, weights),
                 Mapping.serving(tp=tp), resolve_framework(fw, None))


@pytest.fixture(scope="module")
def small() -> Setup:
    return setup()


@pytest.fixture(scope="session")
def make_setup() -> object:
    return setup


@pytest.fixture(scope="module")
def cost(small: Setup) -> IterationCost:
    """The small setup's iteration cost, for the scheduler tests that drive the simulator."""
    return IterationCost(small.spec, small.system, small.wl, small.m, small.fw, max_tokens=9000,
                         max_seqs=96, max_context=3000)
