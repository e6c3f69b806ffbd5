"""A measured local CPU as an addressable device: a calibration profile carries the CPU's facts,
so `--hw local` (the newest local profile) or the printed id works in estimate, roofline, plan,
compare and validate; `validate --local` takes the newest profile of its device by default; the
command `accelmap calibrate` prints works. A recorded profile (tests/fixtures) stands in for a
measurement, so nothing here times anything."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap import api
from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError
from accelmap.hardware.local import (
    CpuFacts,
    describe,
    facts_from_dict,
    facts_to_dict,
    local_cpu,
    local_facts,
)
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.store import Store

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "measurements" / \
    "local_cpu_profile.json"


def recorded() -> CalibrationProfile:
    return CalibrationProfile.from_dict(json.loads(FIXTURE.read_text()))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "m.sqlite"
    Store(path).save_profile(recorded())
    return path


def test_the_recorded_profile_describes_its_device() -> None:
    prof = recorded()
    acc = api.measurement.profile_device(prof)
    assert acc is not None and acc.id == prof.accelerator_id == "local-amd-epyc-1c"
    assert "local" in acc.aliases and str(acc.device_class) == "cpu"
    assert acc.compute_units is not None and acc.compute_units.count.value == 1
    # a catalog device's profile carries no description
    assert api.measurement.profile_device(CalibrationProfile("h", "h100-sxm5-80gb")) is None


def test_cpu_facts_round_trip() -> None:
    f = local_facts()
    back = facts_from_dict(json.loads(json.dumps(facts_to_dict(f))))
    assert back == f and describe(back).id == local_cpu().id
    with pytest.raises(ValueError):
        facts_from_dict({"model": "x"})


def test_cores_follow_the_affinity_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    import accelmap.hardware.local as local

    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert local.usable_cpus() == 1
    f = CpuFacts("AMD EPYC 9654 96-Core Processor", "AuthenticAMD", 1, 2.4e9, "model name",
                 frozenset({"avx512f"}), 8 * 2.0**30)
    assert describe(f).id == "local-amd-epyc-9654-96-core-processor-1c"


def test_hw_local_is_the_newest_local_profile(db: Path) -> None:
    md = api.measured_device("local", None, db)
    assert md.profile is not None and md.profile.name == "epyc-1c-recorded"
    assert "local-amd-epyc-1c" in md.catalog.accelerators and "newest profile" in md.how
    # the printed id resolves the same way, with or without --profile
    by_id = api.measured_device("local-amd-epyc-1c", None, db)
    named = api.measured_device("local-amd-epyc-1c", "epyc-1c-recorded", db)
    assert by_id.profile == named.profile == md.profile
    assert "local-amd-epyc-1c" in named.catalog.accelerators


def test_latest_profile_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import accelmap.measure.store as store_mod

    store = Store(tmp_path / "m.sqlite")
    old, new = recorded(), recorded()
    for name, stamp in (("b-old", "2026-01-01T00:00:00+00:00"),
                        ("a-new", "2026-02-01T00:00:00+00:00")):
        monkeypatch.setattr(store_mod, "now_iso", lambda s=stamp: s)
        store.save_profile(CalibrationProfile.from_dict({**old.to_dict(), "name": name}))
    store.save_profile(CalibrationProfile("gpu", "h100-sxm5-80gb"))  # newest, not local
    saved = store.latest_profile(local=True)
    assert saved is not None and saved.name == "a-new"
    assert store.latest_profile("local-amd-epyc-1c").name == "a-new"  # type: ignore[union-attr]
    assert store.latest_profile("nothing-here") is None
    assert new.to_dict() == old.to_dict()


def test_no_local_profile_says_how_to_make_one(tmp_path: Path) -> None:
    Store(tmp_path / "m.sqlite")
    with pytest.raises(InputError, match="accelmap calibrate"):
        api.measured_device("local", None, tmp_path / "m.sqlite")


def test_estimate_roofline_plan_compare_take_hw_local(cli: Callable[..., Any], db: Path) -> None:
    r = cli("estimate", "gpt3-125m", "--hw", "local", "--train", "--batch", "2", "--seq", "128",
            "--dtype", "fp32", "--db", str(db), "--json")
    assert r.code == 0, r.err
    est = json.loads(r.out)
    assert est["accelerator"] == "local-amd-epyc-1c" and "epyc-1c-recorded" in est["calibration"]
    assert any("eager-cpu" in a for a in est["assumptions"])  # the CPU training stack
    r = cli("estimate", "gpt3-125m", "--hw", "local-amd-epyc-1c", "--serve", "--batch", "1",
            "--prompt", "64", "--output", "8", "--db", str(db), "--json")
    assert r.code == 0, r.err
    r = cli("roofline", "gpt3-125m", "--hw", "local", "--phase", "decode", "--db", str(db))
    assert r.code == 0, r.err
    r = cli("plan", "gpt3-125m", "--hw", "local", "--train", "--seq", "128",
            "--global-batch-tokens", "512", "--db", str(db), "--json")
    assert r.code == 0, r.err
    r = cli("compare", "gpt3-125m", "--hw", "local", "--serve", "--prompt", "64", "--output",
            "8", "--db", str(db), "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["rows"]
    assert [row["accelerator"] for row in rows] == ["local-amd-epyc-1c"]


def _synthetic_local_measurements(store: Store) -> None:
    env = Environment(backend="torch", device="cpu", device_name="test CPU",
                      accelerator_id=local_cpu().id, threads=1)
    store.add([
        Measurement(Kind.MATMUL, env, "fp32", "512x512x512", 5e10, "FLOP/s", 5e10, 0.01, 5,
                    {"m": 512, "n": 512, "k": 512}),
        Measurement(Kind.BANDWIDTH, env, "fp32", "copy 256 MiB", 2e10, "B/s", 2e10, 0.01, 5,
                    {"kernel": "copy"}),
    ])


def test_the_calibrate_hint_runs(cli: Callable[..., Any], tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    _synthetic_local_measurements(Store(db))
    r = cli("calibrate", "--db", str(db))
    assert r.code == 0, r.err
    hints = re.findall(r"accelmap (estimate MODEL [^\n(]*)", r.out)
    assert len(hints) == 2, r.out  # --hw ID --profile NAME, and --hw local
    for hint in hints:
        args = hint.replace("MODEL", "gpt3-125m").split()
        r = cli(*args, "--train", "--batch", "1", "--seq", "64", "--dtype", "fp32")
        assert r.code == 0, (hint, r.err)


def test_validate_local_takes_the_newest_profile(cli: Callable[..., Any], tmp_path: Path
                                                 ) -> None:
    pytest.importorskip("torch")
    db = tmp_path / "m.sqlite"
    Store(db).save_profile(CalibrationProfile(
        name="mine", accelerator_id=local_cpu().id, matmul_efficiency={api.DType.FP32: 0.5},
        bandwidth=1e10, source="synthetic"))
    r = cli("validate", "--local", "gpt3-125m", "--scale", "tiny", "--steps", "1", "--warmup",
            "0", "--seq", "16", "--batch", "1", "--decode-tokens", "2", "--device", "cpu",
            "--db", str(db), "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["run"]["profile"] == "mine"
    notes = data["rows"][0]["notes"]
    assert any("newest profile" in n and "'mine'" in n for n in notes), notes
    assert any(n.startswith("load:") for n in notes) or data["run"]["load"] is None
