"""`accelmap measure list/show/export`, `accelmap calibrate` and `--profile` in estimate,
roofline and plan, through the real entry point's error handling."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from accelmap.cli import app as app_module
from accelmap.cli import estimate, measure_store, plan
from accelmap.cost.calibration import CalibrationProfile
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.store import ENV_DB, Store
from accelmap.units import DType

Run = Callable[..., Any]
H100 = "h100-sxm5-80gb"


def _app() -> typer.Typer:
    """The commands as the engine owner wires them (`accelmap measure ...`, `calibrate`)."""
    app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
    measure = typer.Typer(no_args_is_help=True)
    measure.command("list")(measure_store.list_cmd)
    measure.command("show")(measure_store.show_cmd)
    measure.command("export")(measure_store.export_cmd)
    app.add_typer(measure, name="measure")
    app.command("calibrate")(measure_store.calibrate_cmd)
    app.command("estimate")(estimate.estimate_cmd)
    app.command("roofline")(estimate.roofline_cmd)
    app.command("plan")(plan.plan_cmd)
    return app


@pytest.fixture
def run(cli: Run, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setattr(app_module, "app", _app())
    return cli


def j(r: Any) -> Any:
    assert r.code == 0, r.err
    return json.loads(r.out)


def err(r: Any) -> str:
    assert r.code == 2, (r.code, r.out, r.err)
    assert r.err.startswith("error: ") and r.err.count("\n") == 1, r.err
    return str(r.err)


def point(value: float, kind: Kind = Kind.MATMUL, dtype: str | None = "bf16",
          label: str = "8192x8192x8192", acc: str = H100) -> Measurement:
    unit = "FLOP/s" if kind is Kind.MATMUL else "B/s"
    # the local CPU's rows ran on the CPU: calibrate ignores rows of another kind of device
    env = (Environment("torch", "cpu", "local CPU", acc, versions={"torch": "2.13.0"})
           if acc.startswith("local-") else
           Environment("torch", "cuda:0", "NVIDIA H100 80GB HBM3", acc,
                       versions={"torch": "2.13.0"}))
    return Measurement(kind=kind, environment=env, dtype=dtype, label=label, value=value,
                       unit=unit, median=value, spread=0.02, repetitions=10)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "m.sqlite"
    s = Store(path)
    s.add([point(400e12, label="4096x4096x4096"), point(600e12)], run_id="aaa111")
    s.add([point(2.0e12, Kind.BANDWIDTH, None, "copy 4 GiB"),
           point(2.2e12, Kind.BANDWIDTH, None, "read 4 GiB")], run_id="bbb222")
    return path


def slow_profile(name: str = "slow", acc: str = H100) -> CalibrationProfile:
    """Far below the datasheet-derived defaults (~0.8 of peak, 0.834 x 3.35 TB/s)."""
    return CalibrationProfile(name=name, accelerator_id=acc,
                              matmul_efficiency={DType.BF16: 0.3}, bandwidth=1.0e12,
                              source="synthetic slow profile")


def fast_profile(name: str = "fast") -> CalibrationProfile:
    return CalibrationProfile(name=name, accelerator_id=H100,
                              matmul_efficiency={DType.BF16: 0.95}, bandwidth=3.3e12,
                              source="synthetic fast profile")


# --- measure list / show / export ----------------------------------------------------------
def test_list_runs_and_kind_filter(run: Run, db: Path) -> None:
    d = j(run("measure", "list", "--db", str(db), "--json"))
    assert [r["run_id"] for r in d["runs"]] == ["aaa111", "bbb222"]
    assert d["runs"][0]["count"] == 2 and d["runs"][0]["best"] == 600e12
    assert [r["run_id"] for r in j(run("measure", "list", "--db", str(db), "--kind",
                                       "bandwidth", "--json"))["runs"]] == ["bbb222"]
    table = run("measure", "list", "--db", str(db))
    assert table.code == 0 and "aaa111" in table.out and "600 TFLOP/s" in table.out
    assert "unknown measurement kind 'flops'" in err(run("measure", "list", "--db", str(db),
                                                         "--kind", "flops"))


def test_list_uses_env_store(run: Run, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DB, str(db))
    assert len(j(run("measure", "list", "--json"))["runs"]) == 2


def test_show_run_by_prefix(run: Run, db: Path) -> None:
    d = j(run("measure", "show", "aaa", "--db", str(db), "--json"))
    assert d["run_id"] == "aaa111" and [m["value"] for m in d["measurements"]] == [400e12, 600e12]
    table = run("measure", "show", "bbb222", "--db", str(db))
    assert table.code == 0 and "read 4 GiB" in table.out and "torch 2.13.0" in table.out
    e = err(run("measure", "show", "zzz", "--db", str(db)))
    assert "no run 'zzz'" in e and "aaa111" in e


def test_export(run: Run, db: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    d = j(run("measure", "export", "--out", str(out), "--format", "csv", "--db", str(db),
              "--json"))
    assert d["measurements"] == 4 and out.read_text().startswith("run_id,")
    r = run("measure", "export", "--out", str(tmp_path / "x.json"), "--db", str(db))
    assert r.code == 0 and "wrote 4 measurements" in r.out
    assert len(json.loads((tmp_path / "x.json").read_text())["measurements"]) == 4


def test_missing_store_is_one_line(run: Run, tmp_path: Path) -> None:
    e = err(run("measure", "show", "x", "--db", str(tmp_path / "none.sqlite")))
    assert "no measurement store at" in e


# --- calibrate -----------------------------------------------------------------------------
def test_calibrate_saves_and_prints_profile(run: Run, db: Path) -> None:
    d = j(run("calibrate", "--hw", "h100 sxm5", "--name", "lab", "--db", str(db), "--json"))
    p = CalibrationProfile.from_dict(d["profile"])
    peak = d["matmul"]["bf16"]["peak_flops"]
    assert p.name == "lab" and p.accelerator_id == H100
    assert p.matmul_efficiency[DType.BF16] == pytest.approx(600e12 / peak)
    assert p.bandwidth == 2.2e12 and len(p.matmul_curve[DType.BF16]) == 2
    assert Store(db).load_profile("lab") == p
    table = run("calibrate", "--hw", H100, "--db", str(db))  # default name: the accelerator
    assert table.code == 0 and f"profile {H100}" in table.out and "--profile" in table.out
    assert {s.name for s in Store(db).list_profiles()} == {"lab", H100}


def test_calibrate_defaults_to_the_only_stored_accelerator(run: Run, db: Path) -> None:
    assert j(run("calibrate", "--db", str(db), "--json"))["profile"]["accelerator_id"] == H100


def test_calibrate_without_measurements(run: Run, db: Path) -> None:
    e = err(run("calibrate", "--hw", "a100-sxm4-80gb", "--db", str(db)))
    assert "no matmul or copy/read bandwidth measurements of a100-sxm4-80gb" in e
    e = err(run("calibrate", "--hw", "no-such-chip", "--db", str(db)))
    assert "unknown accelerator" in e


def test_calibrate_local_cpu(run: Run, tmp_path: Path) -> None:
    local = pytest.importorskip("accelmap.hardware.local")
    acc = local.local_cpu()
    path = tmp_path / "cpu.sqlite"
    Store(path).add([point(200e9, dtype="fp32", acc=acc.id, label="1024x1024x1024")])
    d = j(run("calibrate", "--hw", "local", "--db", str(path), "--json"))
    assert d["profile"]["accelerator_id"] == acc.id
    assert j(run("calibrate", "--db", str(path), "--json"))["profile"]["name"] == acc.id


# --- --profile in estimate / roofline / plan ------------------------------------------------
@pytest.fixture
def profiles(db: Path) -> Path:
    s = Store(db)
    for p in (slow_profile(), fast_profile(), slow_profile("mi300", "mi300x")):
        s.save_profile(p)
    return db


SERVE = ("estimate", "llama-3.1-8b", "--hw", H100, "--serve", "--batch", "8", "--prompt",
         "1024", "--output", "64", "--json")


def test_profile_moves_ttft_and_tpot(run: Run, profiles: Path) -> None:
    base = j(run(*SERVE))
    slow = j(run(*SERVE, "--profile", "slow", "--db", str(profiles)))
    fast = j(run(*SERVE, "--profile", "fast", "--db", str(profiles)))
    assert base["calibration"].startswith("datasheet-derived defaults")
    assert slow["calibration"].startswith("measured profile 'slow'")
    assert "synthetic slow profile" in slow["calibration"]
    assert slow["ttft_s"] > base["ttft_s"] > fast["ttft_s"]  # compute-bound prefill
    assert slow["tpot_s"] > base["tpot_s"] > fast["tpot_s"]  # bandwidth-bound decode
    assert any(a.startswith("calibration: measured profile") for a in slow["assumptions"])


def test_profile_from_env_store(run: Run, profiles: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DB, str(profiles))
    assert j(run(*SERVE, "--profile", "slow"))["calibration"].startswith("measured profile")


def test_profile_in_training_and_cluster_estimates(run: Run, profiles: Path) -> None:
    train = ("estimate", "gpt3-1.3b", "--hw", H100, "--train", "--batch", "4", "--json")
    assert (j(run(*train, "--profile", "slow", "--db", str(profiles)))["step_time_s"]
            > j(run(*train))["step_time_s"])
    cl = ("estimate", "llama-3.1-8b", "--cluster", "8xH100", "--serve", "--tp", "8", "--json")
    base, slow = j(run(*cl)), j(run(*cl, "--profile", "slow", "--db", str(profiles)))
    assert base["calibration"].startswith("datasheet-derived")
    assert slow["calibration"].startswith("measured profile") and slow["tpot_s"] > base["tpot_s"]
    cl_train = ("estimate", "gpt3-1.3b", "--cluster", "8xH100", "--train", "--batch", "16",
                "--json")
    slow_t = j(run(*cl_train, "--profile", "slow", "--db", str(profiles)))
    assert slow_t["calibration"].startswith("measured profile")
    assert slow_t["step_time_s"] > j(run(*cl_train))["step_time_s"]


def test_profile_in_roofline(run: Run, profiles: Path) -> None:
    args = ("roofline", "llama-2-7b", "--hw", H100, "--phase", "decode", "--json")
    base, slow = j(run(*args)), j(run(*args, "--profile", "slow", "--db", str(profiles)))
    assert slow["calibration"].startswith("measured profile") and slow["total_s"] > base["total_s"]
    assert slow["ridge_flop_per_byte"] > base["ridge_flop_per_byte"]  # lower bandwidth


def test_profile_in_plan(run: Run, profiles: Path) -> None:
    args = ("plan", "llama-3.1-8b", "--cluster", "8xH100", "--serve", "--prompt", "512",
            "--output", "64", "--top", "1", "--json")
    base, slow = j(run(*args)), j(run(*args, "--profile", "slow", "--db", str(profiles)))
    assert base["calibration"].startswith("datasheet-derived")
    assert slow["calibration"].startswith("measured profile")
    assert slow["plans"][0]["tokens_per_s"] < base["plans"][0]["tokens_per_s"]
    train = ("plan", "gpt3-1.3b", "--cluster", "8xH100", "--train", "--seq", "2048",
             "--global-batch-tokens", "256K", "--top", "1", "--json")
    tb, ts = j(run(*train)), j(run(*train, "--profile", "slow", "--db", str(profiles)))
    assert ts["calibration"].startswith("measured profile")
    assert ts["plans"][0]["tokens_per_s"] < tb["plans"][0]["tokens_per_s"]


def test_unknown_profile_lists_names(run: Run, profiles: Path) -> None:
    e = err(run(*SERVE, "--profile", "nope", "--db", str(profiles)))
    assert "unknown calibration profile 'nope'" in e
    assert "fast, mi300, slow" in e


@pytest.mark.parametrize("args", [
    SERVE,
    ("roofline", "llama-2-7b", "--hw", H100, "--phase", "decode"),
    ("estimate", "llama-3.1-8b", "--cluster", "8xH100", "--serve", "--tp", "8"),
    ("plan", "llama-3.1-8b", "--cluster", "8xH100", "--serve"),
    ("plan", "llama-3.1-8b", "--cluster", "8xH100", "--train"),
])
def test_profile_of_another_accelerator_is_an_error(run: Run, profiles: Path,
                                                    args: tuple[str, ...]) -> None:
    e = err(run(*args, "--profile", "mi300", "--db", str(profiles)))
    assert "'mi300' was measured on mi300x, not h100-sxm5-80gb" in e
