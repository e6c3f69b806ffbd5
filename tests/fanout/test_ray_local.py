"""Small sweeps, designs, comparisons and validations through a local Ray (2 CPUs), compared
exactly with the single-process run; a task that raises is retried, reported, and fails with
one line. Skipped only where Ray is not installed or cannot start here (the reason is said).

One Ray is started for the module (about 10-30 s on a busy 2-core machine): every map uses
the Ray already running (``accelmap.fanout``) instead of starting its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.fanout import FanoutError, Runner

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'accelmap[ray]')")

REF = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "measurements"


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    import logging

    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR)
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"a local Ray cannot start here: {type(e).__name__}: {e}")
    try:
        yield ray
    finally:
        ray.shutdown()


class Notes:
    def __init__(self) -> None:
        self.total, self.done, self.notes, self.closed = 0, 0, [], False

    def start(self, total: int, what: str) -> None:
        self.total = total

    def advance(self, n: int) -> None:
        self.done += n

    def note(self, text: str) -> None:
        self.notes.append(text)

    def close(self) -> None:
        self.closed = True


CLOCKS = frozenset({"seconds", "simulated_s"})  # wall times of the run, not results


def _results(x: Any) -> Any:
    """``x`` without the wall-clock fields (compare's seconds, a plan's simulated_s)."""
    if isinstance(x, dict):
        return {k: _results(v) for k, v in x.items() if k not in CLOCKS}
    if isinstance(x, list | tuple):
        return [_results(v) for v in x]
    return x


def test_sweep_is_identical_on_ray(local_ray: Any) -> None:
    spec, system = api.load_model("gpt2"), api.load_system(hw="h100-sxm5-80gb")
    wl = api.training(8, 1024)
    params = ["memory_bandwidth=1TB/s..8TB/s:6", "n_layers=6,12,2000000"]  # one infeasible
    here = api.sweep(spec, system, wl, params)
    prog = Notes()
    there = api.sweep(spec, system, wl, params, runner=Runner("local", prog))
    assert there.to_dict() == here.to_dict()
    assert there.to_csv() == here.to_csv()
    assert (prog.total, prog.done, prog.closed) == (18, 18, True)
    assert any(not r["feasible"] for r in there.rows)


def test_design_compare_plan_validate_are_identical_on_ray(local_ray: Any,
                                                           catalog: Catalog) -> None:
    r = Runner("local")
    spec, system = api.load_model("gpt2"), api.load_system(hw="h100-sxm5-80gb")
    wl = api.training(8, 1024)
    assert (api.design(spec, system, wl, "124M", tolerance=0.05, runner=r).to_dict()
            == api.design(spec, system, wl, "124M", tolerance=0.05).to_dict())
    kw: dict[str, Any] = {"hw": "h100-sxm5-80gb,mi300x,tpu-v5e", "batch": 4}
    assert (_results(api.compare_accelerators("llama-3.1-8b", runner=r, **kw).to_dict())
            == _results(api.compare_accelerators("llama-3.1-8b", **kw).to_dict()))
    req = api.plan_request(train=True, seq=1024, global_batch_tokens="64K")
    clusters = api.plan_clusters(catalog, None, "h100-sxm5-80gb,mi300x", 2, True)
    assert (_results(api.compare_clusters(spec, clusters, req, runner=r).to_dict())
            == _results(api.compare_clusters(spec, clusters, req).to_dict()))
    cases = [REF / "inference.csv", REF / "matmul.csv"]
    assert (api.validate_cases(cases, runner=r).to_dict()
            == api.validate_cases(cases).to_dict())


def test_a_failing_task_is_retried_and_reported(local_ray: Any, tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"

    def flaky(ctx: int, x: int) -> int:
        if x == 7 and not marker.exists():
            marker.write_text("x")
            raise RuntimeError("a transient failure")
        return ctx * x

    prog = Notes()
    assert Runner("local", prog).map(flaky, list(range(10)), 3) == [3 * x for x in range(10)]
    assert any("failed (RuntimeError: a transient failure); retry 1 of 2" in n
               for n in prog.notes), prog.notes
    assert prog.notes[-1] == "1 task failed and ran again"


def test_a_task_that_always_raises_is_one_line(local_ray: Any) -> None:
    def broken(ctx: int, x: int) -> int:
        if x == 3:
            raise ZeroDivisionError("division by zero in point 3")
        return x

    prog = Notes()
    with pytest.raises(FanoutError) as e:
        Runner("local", prog).map(broken, list(range(8)), 0)
    msg = str(e.value)
    assert "failed 3 times: ZeroDivisionError: division by zero in point 3" in msg
    assert "\n" not in msg and prog.closed


def test_cli_sweep_is_identical_on_ray(local_ray: Any, cli: Any) -> None:
    args = ("sweep", "gpt2", "--hw", "h100-sxm5-80gb", "--train", "--batch", "8", "--param",
            "memory_bandwidth=1TB/s..4TB/s:4", "--param", "bf16=x1,x2", "--csv", "-")
    here, there = cli(*args), cli(*args, "--ray")
    assert (here.code, there.code) == (0, 0), there.err
    assert there.out == here.out and len(here.out.splitlines()) == 9
