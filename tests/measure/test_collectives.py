"""Collectives through torch.distributed: size parsing, a real two-process Gloo run under
torchrun (nccl-tests bandwidth definitions, rows in the store), and the launcher's errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelmap.errors import InputError
from accelmap.measure.collectives import (
    CollectivesError,
    human_bytes,
    parse_ops,
    parse_sizes,
    run_collectives,
)
from accelmap.measure.records import Kind
from accelmap.measure.store import Store

torch = pytest.importorskip("torch")


def test_sizes_are_binary_like_nccl_tests() -> None:
    assert parse_sizes("1K, 64K,1M,16M,8") == [1024, 65536, 2**20, 2**24, 8]
    assert parse_sizes("1KiB,2MB,1G") == [1024, 2 * 2**20, 2**30]
    assert [human_bytes(s) for s in (1024, 65536, 2**20, 8)] == ["1K", "64K", "1M", "8B"]
    for bad in ("", "12Q", "-1K", "0"):
        with pytest.raises(InputError):
            parse_sizes(bad)


def test_ops() -> None:
    assert len(parse_ops("all")) == 5
    assert [o.value for o in parse_ops("all-reduce,sendrecv")] == ["all_reduce", "send_recv"]
    with pytest.raises(InputError, match="unknown collective"):
        parse_ops("all_reduce,broadcast_tree")


def test_two_process_gloo_run_stores_nccl_tests_bus_bandwidth(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    report = run_collectives(nproc=2, sizes="1K,64K", ops="all_reduce,all_gather", db=db,
                             timeout=120, extra=("--reps", "2", "--warmup", "1"))
    assert report["backend"] == "gloo"
    rows = report["rows"]
    assert [(r["op"], r["size_bytes"]) for r in rows] == [
        ("all_reduce", 1024), ("all_reduce", 65536), ("all_gather", 1024),
        ("all_gather", 65536)]
    # nccl-tests PERFORMANCE.md with n = 2: all-reduce 2(n-1)/n = 1, all-gather (n-1)/n = 1/2
    factor = {"all_reduce": 1.0, "all_gather": 0.5}
    for r in rows:
        assert r["world_size"] == 2
        assert r["time_s"] > 0 and r["busbw"] > 0
        assert r["bus_factor"] == factor[r["op"]]
        assert r["algbw"] == pytest.approx(r["size_bytes"] / r["time_s"])
        assert r["busbw"] == pytest.approx(r["algbw"] * factor[r["op"]])
    stored = Store(db).query(kind=Kind.COLLECTIVE)
    assert len(stored) == 4 and {m.run_id for m in stored} == {report["run_id"]}
    assert [m.value for m in stored] == pytest.approx([r["busbw"] for r in rows])
    assert stored[0].unit == "B/s" and stored[0].settings["backend"] == "gloo"
    assert stored[0].label == "all_reduce 1K x 2"
    env = stored[0].environment  # the record every other kind stores, plus the process group
    assert env.backend == "torch" and env.device == "cpu" and "torch" in env.versions
    assert env.settings["distributed"] == "gloo" and env.settings["world_size"] == "2"
    assert report["device"] == env.label == stored[0].device


def test_missing_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(InputError, match=r"accelmap\[measure\]"):
        run_collectives(nproc=2, sizes="1K")


def test_torchrun_failure_is_reported(tmp_path: Path) -> None:
    with pytest.raises(CollectivesError, match="torchrun exited with status"):
        run_collectives(nproc=1, sizes="1K", db=tmp_path / "m.sqlite", timeout=60,
                        extra=("--reps", "0"))


def test_render(capsys: pytest.CaptureFixture[str]) -> None:
    from accelmap.cli.measure_coll import render

    row = {"op": "all_reduce", "size_bytes": 1024, "count": 256, "dtype": "fp32",
           "world_size": 2, "time_s": 1e-4, "spread": 0.1, "algbw": 1.024e7, "busbw": 1.024e7}
    render({"backend": "gloo", "device": "cpu X", "run_id": "abc", "db": "m.sqlite",
            "rows": [row]})
    out = capsys.readouterr().out
    assert "all_reduce" in out and "0.010" in out and "run abc" in out
