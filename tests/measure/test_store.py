"""The measurement store: round trips, profiles, export, concurrent writers, interrupted runs
and unusable paths."""

from __future__ import annotations

import csv
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError
from accelmap.measure.environment import Environment
from accelmap.measure.records import Kind, Measurement
from accelmap.measure.store import ENV_DB, Store, default_path
from accelmap.units import DType

FORK = mp.get_context("fork")


def meas(value: float = 1e12, kind: Kind = Kind.MATMUL, label: str = "1024x1024x1024",
         acc: str | None = "h100-sxm5-80gb", dtype: str | None = "bf16") -> Measurement:
    env = Environment("torch", "cuda:0", "NVIDIA H100 80GB HBM3", acc,
                      versions={"torch": "2.13.0"})
    return Measurement(kind=kind, environment=env, dtype=dtype, label=label, value=value,
                       unit="FLOP/s", median=value, spread=0.01, repetitions=5,
                       settings={"m": 1024, "n": 1024, "k": 1024})


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "m.sqlite")


def test_add_query_runs_round_trip(store: Store) -> None:
    rid = store.add([meas(1e12), meas(2e12, label="2048x2048x2048")])
    store.add([meas(3e12, kind=Kind.BANDWIDTH, label="copy 1 GiB")], run_id="bw1")
    got = store.query(run_id=rid)
    assert [m.value for m in got] == [1e12, 2e12]
    assert got[0].settings == {"m": 1024, "n": 1024, "k": 1024} and got[0].run_id == rid
    assert got[0].environment == meas().environment and got[0].created_at
    assert got[0].device == "cuda:0 NVIDIA H100 80GB HBM3"
    assert [r.run_id for r in store.runs()] == [rid, "bw1"]
    (mm,) = store.runs(Kind.MATMUL)
    assert mm.count == 2 and mm.best == 2e12
    assert [m.label for m in store.query(kind="bandwidth")] == ["copy 1 GiB"]
    assert store.accelerators() == ["h100-sxm5-80gb"]


def test_default_path_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_DB, str(tmp_path / "x.sqlite"))
    assert default_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv(ENV_DB)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "accelmap" / "measurements.sqlite"


def profile(name: str = "p1", acc: str = "h100-sxm5-80gb", eff: float = 0.7) -> CalibrationProfile:
    return CalibrationProfile(name=name, accelerator_id=acc,
                              matmul_efficiency={DType.BF16: eff, DType.FP32: 0.5},
                              matmul_curve={DType.BF16: ((1e9, 0.2), (1e12, eff))},
                              bandwidth=2.5e12, source="measured on test",
                              matmul_peak={DType.BF16: 989e12})


def test_profiles_save_load_list_replace(store: Store) -> None:
    store.save_profile(profile("b"))
    store.save_profile(profile("a", eff=0.6))
    assert store.load_profile("b") == profile("b")
    assert [p.name for p in store.list_profiles()] == ["a", "b"]
    store.save_profile(profile("a", eff=0.65))  # same name: replaced
    assert store.load_profile("a").matmul_efficiency[DType.BF16] == 0.65
    assert len(store.list_profiles()) == 2


def test_unknown_profile_lists_saved_names(store: Store) -> None:
    with pytest.raises(InputError, match="no profiles are saved yet"):
        store.load_profile("nope")
    store.save_profile(profile("mine"))
    with pytest.raises(InputError) as e:
        store.load_profile("nope")
    assert "'nope'" in str(e.value) and "saved profiles: mine" in str(e.value)
    assert "\n" not in str(e.value)


def test_export_json_and_csv(store: Store, tmp_path: Path) -> None:
    store.add([meas(1e12), meas(2e12)], run_id="r1")
    store.add([meas(5e11, kind=Kind.BANDWIDTH, label="copy 1 GiB")], run_id="r2")
    store.save_profile(profile())
    n = store.export(tmp_path / "out" / "all.json")
    data = json.loads((tmp_path / "out" / "all.json").read_text())
    assert n == 3 and len(data["measurements"]) == 3
    assert data["measurements"][0]["kind"] == "matmul"
    assert data["profiles"][0]["name"] == "p1" and data["profiles"][0]["created_at"]
    assert CalibrationProfile.from_dict(data["profiles"][0]) == profile()
    assert store.export(tmp_path / "mm.csv", "csv", kind=Kind.MATMUL) == 2
    rows = list(csv.DictReader((tmp_path / "mm.csv").open()))
    assert [float(r["value"]) for r in rows] == [1e12, 2e12]
    assert json.loads(rows[0]["settings"]) == {"k": 1024, "m": 1024, "n": 1024}
    assert not list(tmp_path.glob("**/.*.tmp"))  # written atomically, nothing left behind


def test_export_errors(store: Store, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown export format 'xml'"):
        store.export(tmp_path / "a.xml", "xml")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot write"):
        store.export(blocker / "a.json")


# --- concurrent writers --------------------------------------------------------------------
WRITERS, RUNS, ROWS = 6, 15, 8


def _writer(path: str, worker: int, start: Any) -> None:
    s = Store(path)
    start.wait()
    for r in range(RUNS):
        s.add([meas(float(worker * 1000 + r * 10 + i)) for i in range(ROWS)],
              run_id=f"w{worker}-r{r}")


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    start = FORK.Event()
    procs = [FORK.Process(target=_writer, args=(path, w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()  # all at once
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    s = Store(path)
    runs = s.runs()
    assert len(runs) == WRITERS * RUNS and all(r.count == ROWS for r in runs)
    values = sorted(m.value for m in s.query())
    assert values == sorted(float(w * 1000 + r * 10 + i) for w in range(WRITERS)
                            for r in range(RUNS) for i in range(ROWS))


# --- interrupted writes --------------------------------------------------------------------
def test_exception_mid_transaction_leaves_no_partial_run(store: Store) -> None:
    store.add([meas(1.0)], run_id="before")
    bad = [meas(2.0), meas(3.0), meas(float("nan")), meas(4.0)]
    # NOT NULL value: SQLite stores NaN as NULL, so the third INSERT fails inside the transaction
    with pytest.raises(sqlite3.IntegrityError):
        store.add(bad, run_id="broken")
    assert store.query(run_id="broken") == []
    assert store.add([meas(5.0)], run_id="after") == "after"
    assert [r.run_id for r in store.runs()] == ["before", "after"]


class _StallingStore(Store):
    """Pauses inside its write transaction, after some rows are in, until it is killed."""

    def __init__(self, path: str, ready: Any) -> None:
        super().__init__(path)
        self.ready = ready

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with Store._connect(self) as db:
            calls = {"n": 0}

            def handler() -> int:
                if db.in_transaction:
                    calls["n"] += 1
                    if calls["n"] == 200:  # well into the run's INSERTs
                        self.ready.set()
                        time.sleep(600)
                return 0

            db.set_progress_handler(handler, 100)
            yield db


def _killed_writer(path: str, ready: Any) -> None:
    s = _StallingStore(path, ready)
    s.add([meas(float(i)) for i in range(5000)], run_id="killed")


def test_process_killed_inside_add_leaves_no_partial_run(tmp_path: Path) -> None:
    path = str(tmp_path / "k.sqlite")
    Store(path).add([meas(1.0)], run_id="before")
    ready = FORK.Event()
    child = FORK.Process(target=_killed_writer, args=(path, ready))
    child.start()
    assert ready.wait(60), "the child never got inside its transaction"
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    s = Store(path)
    assert s.query(run_id="killed") == []
    s.add([meas(2.0)], run_id="after")  # the dead writer's lock is gone
    assert [r.run_id for r in s.runs()] == ["before", "after"]


# --- unusable paths ------------------------------------------------------------------------
def test_corrupt_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database, just some text " * 200)
    with pytest.raises(InputError) as e:
        Store(bad)
    msg = str(e.value)
    assert str(bad) in msg and "not a database" in msg and ENV_DB in msg and "\n" not in msg


@pytest.mark.parametrize("where", ["under_a_file", "a_directory"])
def test_unwritable_path_is_one_clear_error(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "blocker"
    if where == "under_a_file":
        blocker.write_text("x")
        path = blocker / "m.sqlite"
    else:
        blocker.mkdir()
        path = blocker
    with pytest.raises(InputError) as e:
        Store(path)
    assert "cannot open the measurement store" in str(e.value) and "\n" not in str(e.value)


def test_export_never_replaces_a_device_link_or_directory(store: Store, tmp_path: Path) -> None:
    """The atomic replace would swap out whatever --out names (issue 16: as root it replaced a
    device node); only regular files are written."""
    target = tmp_path / "kept.json"
    target.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    for out, word in ((link, "symbolic link"), (tmp_path, "directory"),
                      (Path("/dev/null"), "not a regular file")):
        with pytest.raises(InputError, match=word):
            store.export(out)
    assert target.read_text() == "keep me" and link.is_symlink()
    assert Path("/dev/null").exists() and not Path("/dev/null").is_file()
    assert store.export(tmp_path / "new.json") >= 0  # a plain new file is fine


@pytest.mark.parametrize("payload", ["{not json", '{"name": "bad", "matmul_efficiency": NaN}',
                                     "[1, 2]", "{}"])
def test_one_damaged_profile_row_hides_nothing_else(tmp_path: Path, payload: str) -> None:
    """A hand-edited or truncated profile row: listing skips it (and says so), loading it is
    one InputError naming it; the other profiles still read."""
    path = tmp_path / "m.sqlite"
    store = Store(path)
    store.save_profile(CalibrationProfile(name="good", accelerator_id="h100-sxm5-80gb"))
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO profiles VALUES ('bad', 'h100-sxm5-80gb', ?, 'now')", (payload,))
    assert [p.name for p in store.list_profiles()] == ["good"]
    assert len(store.damaged_profiles()) == 1 and "'bad'" in store.damaged_profiles()[0]
    with pytest.raises(InputError, match=r"profile 'bad' .* is damaged"):
        store.load_profile("bad")
    assert store.load_profile("good").name == "good"
