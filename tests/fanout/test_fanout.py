"""The fan-out module without Ray: chunking, the in-process map, addresses, and that nothing
imports Ray unless asked (``accelmap.fanout``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelmap.fanout import FanoutError, Runner, check_address, chunks, runner

SRC = Path(__file__).resolve().parents[2] / "src"


@given(st.integers(0, 100_000), st.integers(1, 512))
def test_chunks_cover_every_item_once_in_order(n: int, workers: int) -> None:
    parts = chunks(n, workers)
    assert [i for a, b in parts for i in range(a, b)] == list(range(n))
    if n:
        sizes = [b - a for a, b in parts]
        assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
        assert max(sizes) <= 2_000
        # a few tasks per worker, not one per point
        assert len(parts) <= max(workers * 4, -(-n // 2_000))


def test_chunks_are_not_one_per_point() -> None:
    assert len(chunks(20_000, 2)) == 10  # 2,000 points a task
    assert len(chunks(20_000, 64)) == 256
    assert chunks(3, 8) == [(0, 1), (1, 2), (2, 3)]


def _add(ctx: int, x: int) -> int:
    return ctx + x


def test_in_process_map_is_the_plain_map() -> None:
    assert Runner().map(_add, [3, 1, 2], 10) == [13, 11, 12]
    assert not Runner().distributed


@pytest.mark.parametrize("text, want", [("local", "local"), (" AUTO ", "auto"),
                                        ("ray://head:10001", "ray://head:10001"),
                                        ("ray://head", "ray://head:10001"),
                                        ("10.0.0.1:6379", "10.0.0.1:6379")])
def test_addresses(text: str, want: str) -> None:
    assert check_address(text) == want


@pytest.mark.parametrize("text", ["", "llama-3.1-8b", "ray://", "host:port", "h:70000",
                                  "http://x/y:1"])
def test_bad_address_is_one_line(text: str) -> None:
    with pytest.raises(FanoutError, match="give local, auto, ray://HOST:PORT"):
        check_address(text)


def test_env_var_names_the_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELMAP_RAY", "auto")
    assert runner(None).address == "auto"
    monkeypatch.setenv("ACCELMAP_RAY", "")
    assert runner(None).address is None
    assert runner("local").address == "local"


def test_ray_missing_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(FanoutError, match=r"needs Ray, which is not installed: pip install"):
        Runner("local").map(_add, [1], 0)


def test_unreachable_address_is_one_line() -> None:
    pytest.importorskip("ray", reason="the connect check runs after Ray is imported")
    with pytest.raises(FanoutError, match="cannot reach it"):
        Runner("ray://127.0.0.1:1").map(_add, [1], 0)


def test_default_path_never_imports_ray() -> None:
    code = ("import sys; from accelmap import api; from accelmap.fanout import Runner; "
            "spec = api.load_model('gpt2'); sys_ = api.load_system(hw='h100-sxm5-80gb'); "
            "sw = api.sweep(spec, sys_, api.training(8, 1024), ['bf16=x1,x2']); "
            "assert len(sw.rows) == 2; print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, check=True)
    assert out.stdout.strip() == "False"
