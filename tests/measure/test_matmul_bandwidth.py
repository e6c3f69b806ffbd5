"""Tiny CPU sweeps and bandwidth runs through both backends, the store, the CLI functions, and
the local CPU description. Sizes and budgets are small: the whole file runs in a few seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from accelmap.errors import InputError
from accelmap.hardware.local import (
    AMX_BF16_FLOP_PER_CYCLE,
    CpuFacts,
    describe,
    local_cpu,
    parse_cpuinfo,
    parse_lscpu,
    parse_meminfo,
    parse_size,
)
from accelmap.hardware.schema import Accelerator, DeviceClass
from accelmap.measure.backends import get_backend
from accelmap.measure.bandwidth import buffer_sizes, measure_bandwidth
from accelmap.measure.matmul import sweep
from accelmap.measure.numpy_backend import NumpyBackend
from accelmap.measure.records import Kind
from accelmap.measure.store import Store
from accelmap.units import DType

MiB = 2**20


def small_cpu(cores: int = 2) -> Accelerator:
    """A CPU whose caches are tiny, so flush buffers stay small in tests."""
    facts = CpuFacts(model="Test CPU", vendor="GenuineIntel", cores=cores, clock_hz=2.5e9,
                     clock_from="test", flags=frozenset({"avx2", "fma", "amx_bf16", "amx_tile"}),
                     memory_bytes=8 * 2**30, available_bytes=4 * 2**30,
                     caches=((2, 1 * MiB), (3, 2 * MiB)), machine="x86_64")
    return describe(facts)


def test_numpy_sweep_stores_records(tmp_path: Path) -> None:
    acc = small_cpu()
    r = sweep("cpu", "fp32", acc, budget_s=0.5, backend="numpy", reps=2, max_shapes=4)
    assert r.backend == "numpy" and 1 <= len(r.points) <= 4
    assert r.best_flops_per_s > 0 and r.best_shape.count("x") == 2
    assert r.peak and r.efficiency is not None and r.efficiency > 0 and r.peak_derived
    assert [f for f, _ in r.efficiency_curve()] == sorted(f for f, _ in r.efficiency_curve())
    store = Store(tmp_path / "m.sqlite")
    run_id = store.add(r.measurements)
    rows = store.query(kind=Kind.MATMUL, run_id=run_id)
    assert len(rows) == len(r.points)
    assert all(m.value > 0 and m.unit == "FLOP/s" and m.accelerator_id == acc.id for m in rows)
    assert {"m", "n", "k", "flops", "seconds", "efficiency"} <= set(rows[0].settings)
    assert rows[0].environment.backend == "numpy"
    assert rows[0].environment == r.measurements[0].environment  # the record round-trips
    json.dumps(r.to_dict())  # serialisable


def test_torch_sweep_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    r = sweep("cpu", DType.BF16, small_cpu(), budget_s=1.0, backend="torch", reps=2,
              max_shapes=3)
    assert r.backend == "torch" and r.best_flops_per_s > 0
    assert all(p.timing.median > 0 and p.timing.spread >= 0 for p in r.points)
    assert r.points[0].timing.warmup >= 2
    assert Store(tmp_path / "m.sqlite").add(r.measurements)


def test_bandwidth_small_buffer(tmp_path: Path) -> None:
    acc = small_cpu()
    r = measure_bandwidth("cpu", acc, budget_s=2.0, sizes=[4 * MiB], backend="numpy", reps=2)
    assert {p.kind for p in r.points} == {"copy", "read", "write"}
    copy = r.best("copy")
    assert copy is not None and copy.bytes_per_call == 2 * 4 * MiB
    assert all(p.bytes_per_s > 0 for p in r.points)
    assert r.cache_bytes == 3 * MiB and "catalog" in r.cache_source
    assert r.catalog is None and copy.efficiency is None  # the local CPU's bandwidth is unknown
    store = Store(tmp_path / "m.sqlite")
    rows = store.query(kind=Kind.BANDWIDTH, run_id=store.add(r.measurements))
    assert {m.settings["kernel"] for m in rows} == {"copy", "read", "write"}
    assert all(m.unit == "B/s" for m in rows)


def test_bandwidth_torch_small_buffer() -> None:
    pytest.importorskip("torch")
    r = measure_bandwidth("cpu", small_cpu(), budget_s=2.0, kinds=["copy"], sizes=[4 * MiB],
                          backend="torch", reps=2)
    assert len(r.points) == 1 and r.points[0].bytes_per_s > 0


def test_buffer_sizes_follow_stream_rule() -> None:
    assert buffer_sizes(484 * MiB, 24 * 2**30) == [1936 * MiB, 3872 * MiB]
    assert buffer_sizes(1 * MiB, None) == [64 * MiB]  # at least MIN_BUFFER
    capped = buffer_sizes(484 * MiB, 4 * 2**30)  # little free memory: capped, not failed
    assert max(capped) <= (4 * 2**30 * 0.5 - 2 * 484 * MiB) / 2
    with pytest.raises(InputError):
        buffer_sizes(484 * MiB, 1 * 2**30)


def test_backend_selection_and_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match=r"accelmap\[measure\]"):
        get_backend("cuda", "numpy")
    with pytest.raises(InputError, match=r"accelmap\[measure\]"):
        NumpyBackend().matmul(64, 64, 64, DType.BF16)
    monkeypatch.setenv("ACCELMAP_NO_TORCH", "1")  # as if torch were not installed
    assert get_backend("cpu").name == "numpy"
    with pytest.raises(InputError, match=r"accelmap\[measure\]"):
        get_backend("cuda")
    with pytest.raises(InputError, match="unknown backend"):
        get_backend("cpu", "jax")


def test_torch_is_imported_lazily() -> None:
    code = ("import sys, accelmap.measure.matmul, accelmap.measure.bandwidth, "
            "accelmap.cli.measure_hw, accelmap.hardware.local; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_local_cpu_description_validates() -> None:
    acc = local_cpu()
    assert isinstance(acc, Accelerator) and acc.device_class == DeviceClass.CPU
    assert acc.id.startswith("local-") and acc.memory_bandwidth is None
    assert acc.dtypes and all(e.derived for t in (acc.matrix, acc.vector) for e in t.values())
    assert acc.cited_ids() <= set(acc.sources)


def test_describe_derives_peaks_from_isa_flags() -> None:
    acc = small_cpu(cores=4)
    bf16 = acc.matrix[DType.BF16]
    assert bf16.value == pytest.approx(AMX_BF16_FLOP_PER_CYCLE * 4 * 2.5e9)
    assert bf16.derived and "local-intel-amx" in bf16.source and "derived" in (bf16.note or "")
    assert acc.peak(DType.FP32) == pytest.approx(32 * 4 * 2.5e9)  # AVX2 + FMA
    assert acc.compute_units and acc.compute_units.matrix_tile == (16, 16, 32)
    avx512 = describe(CpuFacts("X", "GenuineIntel", 8, 3e9, "t", frozenset({"avx512f"}),
                               16 * 2**30, machine="x86_64"))
    assert avx512.peak(DType.FP32) == pytest.approx(64 * 8 * 3e9)
    assert avx512.peak(DType.FP64) == pytest.approx(32 * 8 * 3e9)
    assert avx512.peak(DType.BF16) is None  # no AMX, no AVX512_BF16


def test_parsers() -> None:
    info = parse_cpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\n"
                         "cpu MHz\t\t: 2599.998\nphysical id\t: 0\ncore id\t\t: 0\n"
                         "flags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\nphysical id\t: 0\n"
                         "core id\t\t: 0\ncpu MHz\t\t: 2600.5\n\n")
    assert info["model"] == "Xeon X" and info["cores"] == 1  # two hyperthreads, one core
    assert info["mhz"] == 2600.5 and "amx_bf16" in info["flags"]
    total, avail = parse_meminfo("MemTotal:       24684084 kB\nMemAvailable:   24292704 kB\n")
    assert total == 24684084 * 1024 and avail == 24292704 * 1024
    ls = parse_lscpu("Core(s) per socket:  2\nSocket(s):  1\nL2 cache:  4 MiB (2 instances)\n"
                     "L3 cache:  480 MiB (1 instance)\n")
    assert ls["cores"] == 2 and ls["caches"] == ((2, 4 * MiB), (3, 480 * MiB))
    assert parse_size("491520K") == 480 * MiB


def _app() -> typer.Typer:
    from accelmap.cli.measure_hw import bandwidth_cmd, matmul_cmd

    app = typer.Typer()
    app.command("matmul")(matmul_cmd)
    app.command("bandwidth")(bandwidth_cmd)
    return app


def _json(out: str) -> Any:
    return json.loads(out[out.index("{"):])


def test_cli_matmul_and_bandwidth(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    runner = CliRunner()
    res = runner.invoke(_app(), ["matmul", "--backend", "numpy", "--dtype", "fp32", "--budget",
                                 "0.3", "--reps", "2", "--hw", "local", "--db", str(db),
                                 "--json"])
    assert res.exit_code == 0, res.output
    data = _json(res.output)
    assert data["results"][0]["best_flops_per_s"] > 0
    assert data["accelerator_id"] == local_cpu().id
    assert len(Store(db).query(run_id=data["run_id"])) == len(data["results"][0]["points"])
    res = runner.invoke(_app(), ["bandwidth", "--backend", "numpy", "--size", "4 MiB",
                                 "--no-flush", "--reps", "2", "--budget", "2", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "copy" in res.output and "Stored 3 measurements" in res.output
    bad = runner.invoke(_app(), ["matmul", "--dtype", "fp7", "--db", str(db)])
    assert isinstance(bad.exception, InputError)
