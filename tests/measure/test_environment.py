"""The one environment record: both backends fill the same fields, it round-trips through the
store, rows written before it read back, and a missing PyTorch is one clear line."""

from __future__ import annotations

import builtins
import importlib
import json
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from accelmap.errors import InputError
from accelmap.measure.backends import get_backend, import_torch, torch_backend
from accelmap.measure.environment import Environment, host_cpu, read_environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.store import SCHEMA, Store

FULL = Environment(
    backend="torch", device="cuda:0", device_name="NVIDIA H100 80GB HBM3",
    accelerator_id="h100-sxm5-80gb", memory_bytes=85520809984.0, compute_units=132, threads=8,
    host="node7", os="Linux-6.8-x86_64", cpu="Intel(R) Xeon(R) Platinum 8480+",
    versions={"python": "3.11.7", "numpy": "2.1.0", "torch": "2.13.0", "cuda": "13.0",
              "nccl": "2.27.3", "driver": "580.65"},
    settings={"tf32_matmul": "false", "OMP_NUM_THREADS": "8", "distributed": "nccl"})


def point(env: Environment, value: float = 1e12) -> Measurement:
    return Measurement(kind=Kind.MATMUL, environment=env, dtype="bf16", label="4096x4096x4096",
                       value=value, unit="FLOP/s", median=value, spread=0.01, repetitions=5,
                       settings={"m": 4096})


# --- both backends, one record ------------------------------------------------------------
def _filled(env: Environment) -> set[str]:
    return {f.name for f in fields(env) if getattr(env, f.name) not in (None, "", {})}


def test_both_backends_fill_the_same_fields() -> None:
    pytest.importorskip("torch")
    np_env = get_backend("cpu", "numpy").environment("local-test")
    th_env = get_backend("cpu", "torch").environment("local-test")
    shared = {"backend", "device", "device_name", "accelerator_id", "memory_bytes",
              "compute_units", "host", "os", "cpu", "versions"}
    assert shared <= _filled(np_env) and shared <= _filled(th_env)
    # the only field one backend leaves empty: NumPy's BLAS picks its own thread count
    assert _filled(th_env) - _filled(np_env) <= {"threads", "settings"}
    assert th_env.threads is not None and th_env.threads >= 1
    assert (np_env.backend, th_env.backend) == ("numpy", "torch")
    for env in (np_env, th_env):
        assert env.device == "cpu" and env.device_name == host_cpu().model == env.cpu
        assert env.label == f"cpu {host_cpu().model}"  # the same device, the same label
        assert {"python", "numpy"} <= set(env.versions) and env.memory_bytes > 0
    assert "torch" in th_env.versions and "torch" not in np_env.versions
    assert th_env.facts()["backend"] == "torch" and "threads" in th_env.facts()


def test_setting_variables_are_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env = get_backend("cpu", "numpy").environment()
    assert env.settings["OMP_NUM_THREADS"] == "3" and "CUDA_VISIBLE_DEVICES" not in env.settings
    assert env.with_settings(distributed="gloo").settings == {"OMP_NUM_THREADS": "3",
                                                             "distributed": "gloo"}
    assert env.compared_with("x").accelerator_id == "x" and env.accelerator_id is None


def test_labels() -> None:
    assert FULL.label == "cuda:0 NVIDIA H100 80GB HBM3" and FULL.device_type == "cuda"
    assert Environment("torch", "mps").label == "mps"
    assert Environment("torch", "mps", "mps").label == "mps"


# --- round trips --------------------------------------------------------------------------
def test_record_round_trips_through_json() -> None:
    assert Environment.from_dict(json.loads(json.dumps(FULL.to_dict()))) == FULL
    env = get_backend("cpu", "numpy").environment("local-test")
    assert Environment.from_dict(json.loads(json.dumps(env.to_dict()))) == env


def test_record_round_trips_through_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.sqlite")
    measured = get_backend("cpu", "numpy").environment("local-test")
    rid = store.add([point(FULL), point(measured, 2e12)])
    got = store.query(run_id=rid)
    assert [m.environment for m in got] == [FULL, measured]
    assert got[0].device == FULL.label and got[0].accelerator_id == FULL.accelerator_id
    assert store.query(accelerator_id="local-test")[0].environment == measured
    with sqlite3.connect(store.path) as db:  # the columns are the record's label and catalog id
        rows = db.execute("SELECT device, accelerator_id FROM measurements ORDER BY id").fetchall()
    assert rows == [(FULL.label, FULL.accelerator_id), (measured.label, "local-test")]
    exported = tmp_path / "all.json"
    store.export(exported)
    first = json.loads(exported.read_text())["measurements"][0]
    assert first["device"] == FULL.label and first["accelerator_id"] == FULL.accelerator_id
    assert Environment.from_dict(first["environment"]) == FULL


# --- rows written before the record -------------------------------------------------------
# Flat dicts exactly as the old backends.py (numpy, torch) and torch_env.py (collectives with
# their distributed backend, local runs without one) stored them, and as the old tests did.
LEGACY = [
    ("cpu AMD EPYC", "local-amd-epyc",
     {"backend": "numpy", "python": "3.11.7", "numpy": "2.4.6", "os": "Linux-6.1", "host": "vm"}),
    ("cuda:0 NVIDIA H100 80GB HBM3", "h100-sxm5-80gb",
     {"backend": "torch", "torch": "2.13.0", "python": "3.11.7", "numpy": "2.4.6",
      "os": "Linux-6.1", "host": "n1", "threads": "16", "cuda": "13.0", "driver": "580.65"}),
    ("cuda:0 NVIDIA H100 80GB HBM3", None,
     {"torch": "2.13.0", "python": "3.11.7", "host": "n1", "platform": "Linux-6.1",
      "backend": "nccl", "cuda": "13.0", "nccl": "2.27.3", "gpu": "NVIDIA H100 80GB HBM3",
      "cpu": "Intel Xeon"}),
    ("cpu AMD EPYC", "local-amd-epyc",
     {"torch": "2.13.0", "python": "3.11.7", "host": "vm", "platform": "Linux-6.1",
      "cpu": "AMD EPYC"}),
    ("cuda:0 NVIDIA H100 80GB HBM3", "h100-sxm5-80gb", {"torch": "2.13.0"}),
]


def test_legacy_environments_read_into_the_record() -> None:
    numpy_row, torch_row, coll, local, bare = (read_environment(e, label, acc)
                                               for label, acc, e in LEGACY)
    assert numpy_row == Environment(
        backend="numpy", device="cpu", device_name="AMD EPYC", accelerator_id="local-amd-epyc",
        host="vm", os="Linux-6.1", cpu="AMD EPYC",
        versions={"python": "3.11.7", "numpy": "2.4.6"})
    assert torch_row.backend == "torch" and torch_row.threads == 16
    assert torch_row.versions["driver"] == "580.65" and torch_row.device == "cuda:0"
    assert coll.backend == "torch" and coll.settings == {"distributed": "nccl"}
    assert coll.os == "Linux-6.1" and coll.cpu == "Intel Xeon" and coll.versions["nccl"]
    assert coll.label == "cuda:0 NVIDIA H100 80GB HBM3" and coll.accelerator_id is None
    assert local.backend == "torch" and local.cpu == "AMD EPYC" and local.os == "Linux-6.1"
    assert bare.versions == {"torch": "2.13.0"} and bare.backend == "torch"
    # unknown keys are kept, as settings
    assert read_environment({"torch": "2", "mystery": "x"}).settings == {"mystery": "x"}


def _old_store(path: Path) -> None:
    """A store file as the first version wrote it: same schema, flat environment JSON."""
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        for i, (label, acc, env) in enumerate(LEGACY):
            kind = "collective" if env.get("backend") == "nccl" else "matmul"
            db.execute(
                "INSERT INTO measurements (run_id, created_at, kind, device, accelerator_id,"
                " dtype, label, value, unit, median, spread, repetitions, settings, environment)"
                " VALUES (?, '2026-01-01T00:00:00+00:00', ?, ?, ?, 'bf16', 'x', ?, 'FLOP/s', ?,"
                " 0.0, 5, '{}', ?)",
                (f"old{i}", kind, label, acc, 1e12 + i, 1e12 + i, json.dumps(env)))


def test_a_store_written_by_the_old_code_reads(tmp_path: Path,
                                               cli: Callable[..., Any]) -> None:
    path = tmp_path / "old.sqlite"
    _old_store(path)
    store = Store(path)
    got = store.query()
    assert [m.device for m in got] == [label for label, _, _ in LEGACY]
    assert [m.accelerator_id for m in got] == [acc for _, acc, _ in LEGACY]
    assert got[2].environment.settings["distributed"] == "nccl"
    store.add([point(FULL)], run_id="new")  # new rows go into the old file
    assert store.query(run_id="new")[0].environment == FULL
    shown = cli("measure", "show", "old1", "--db", str(path))
    assert shown.code == 0, shown.err
    assert "driver 580.65" in shown.out and "threads 16" in shown.out


# --- without PyTorch ----------------------------------------------------------------------
def test_missing_torch_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    for call in (lambda: import_torch("measuring X"), lambda: torch_backend("cpu", "measuring X"),
                 lambda: get_backend("cuda"), lambda: get_backend("cpu", "torch")):
        with pytest.raises(InputError) as e:
            call()
        assert "accelmap[measure]" in str(e.value) and "\n" not in str(e.value)
    assert get_backend("cpu").name == "numpy"  # the CPU falls back to NumPy
    monkeypatch.delitem(sys.modules, "accelmap.measure.torch_model", raising=False)
    with pytest.raises(InputError, match=r"accelmap\[measure\]"):
        importlib.import_module("accelmap.measure.torch_model")


def test_torch_that_does_not_load_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def broken(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "torch":
            raise OSError("libcudart.so.13: cannot open shared object file\nmore detail")
        return real(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(builtins, "__import__", broken)
    with pytest.raises(InputError) as e:
        import_torch("measuring X")
    msg = str(e.value)
    assert "does not load" in msg and "libcudart" in msg and "\n" not in msg


# --- a CUDA device, through a stand-in torch (the CPU-only CI has no GPU) ----------------------
class _Dev:
    def __init__(self, kind: str, index: int | None = None) -> None:
        if ":" in kind:
            kind, idx = kind.split(":")
            index = int(idx)
        self.type, self.index = kind, index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


def _fake_torch() -> Any:
    from types import SimpleNamespace as NS

    props = NS(total_memory=85520809984, multi_processor_count=132, L2_cache_size=50 * 2**20)
    cuda = NS(is_available=lambda: True, current_device=lambda: 0,
              get_device_name=lambda dev: "NVIDIA H100 80GB HBM3",
              get_device_properties=lambda dev: props, synchronize=lambda dev: None,
              nccl=NS(version=lambda: (2, 27, 3)))
    return NS(__version__="2.13.0+cu130", device=_Dev, cuda=cuda,
              empty=lambda *a, **k: None, version=NS(cuda="13.0", hip=None),
              get_float32_matmul_precision=lambda: "highest", get_num_threads=lambda: 8,
              backends=NS(cuda=NS(matmul=NS(allow_tf32=False)), cudnn=NS(allow_tf32=True)))


def test_cuda_record_and_catalog_match(catalog: Any) -> None:
    from accelmap.measure.catalog_match import match_accelerator
    from accelmap.measure.torch_backend import TorchBackend

    be = TorchBackend(_fake_torch(), "cuda")
    assert be.device == "cuda:0"  # the current device made explicit
    env = be.environment()
    assert env.label == "cuda:0 NVIDIA H100 80GB HBM3" and env.device_type == "cuda"
    assert env.memory_bytes == 85520809984.0 and env.compute_units == 132 and env.threads == 8
    assert env.versions["cuda"] == "13.0" and env.versions["nccl"] == "2.27.3"
    assert "hip" not in env.versions  # empty facts are left out
    assert env.settings["tf32_matmul"] == "false" and env.settings["tf32_cudnn"] == "true"
    acc, how = match_accelerator(None, env, catalog)
    assert acc is not None and acc.id == "h100-sxm5-80gb" and "device name" in how
    assert be.environment(acc.id).accelerator_id == acc.id
    assert read_environment(env.to_dict(), env.label, acc.id) == env.compared_with(acc.id)
