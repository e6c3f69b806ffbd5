"""The measurement store: one SQLite file in the user's data directory.

Path: ``$ACCELMAP_DB`` if set, else ``$XDG_DATA_HOME/accelmap/measurements.sqlite`` (default
``~/.local/share/accelmap``), or the path given. SQLite in WAL mode with a busy timeout makes
concurrent writers from several processes (one per rank of a torchrun collectives run) wait
rather than fail; each run is written in one transaction, so an interrupted run leaves either
all of its rows or none (SQLite's atomic commit).
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accelmap.errors import InputError
from accelmap.measure.records import Kind, Measurement

ENV_DB = "ACCELMAP_DB"
BUSY_TIMEOUT_S = 30.0  # how long a writer waits for another process's transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    kind TEXT NOT NULL,
    device TEXT NOT NULL,
    accelerator_id TEXT,
    dtype TEXT,
    label TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL,
    median REAL NOT NULL,
    spread REAL NOT NULL,
    repetitions INTEGER NOT NULL,
    settings TEXT NOT NULL,
    environment TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS measurements_run ON measurements(run_id);
CREATE INDEX IF NOT EXISTS measurements_kind ON measurements(kind, accelerator_id);
"""


def default_path() -> Path:
    env = os.environ.get(ENV_DB)
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share"))
    return base / "accelmap" / "measurements.sqlite"


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    created_at: str
    kind: str
    device: str
    accelerator_id: str | None
    count: int
    best: float
    unit: str


class Store:
    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as e:
            raise InputError(f"cannot open the measurement store {self.path} ({e}); set "
                             f"{ENV_DB} to a writable file") from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            yield db
        finally:
            db.close()

    def add(self, measurements: Iterable[Measurement], run_id: str | None = None) -> str:
        """Store a run's measurements in one transaction; returns the run id."""
        rid = run_id or uuid.uuid4().hex[:12]
        now = datetime.now(UTC).isoformat(timespec="seconds")
        rows = [(rid, m.created_at or now, m.kind.value, m.device, m.accelerator_id, m.dtype,
                 m.label, m.value, m.unit, m.median, m.spread, m.repetitions,
                 json.dumps(m.settings, sort_keys=True), json.dumps(m.environment,
                                                                    sort_keys=True))
                for m in measurements]
        with self._connect() as db, db:  # `with db` = one transaction, rolled back on error
            db.executemany(
                "INSERT INTO measurements (run_id, created_at, kind, device, accelerator_id,"
                " dtype, label, value, unit, median, spread, repetitions, settings, environment)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return rid

    def query(self, kind: Kind | str | None = None, accelerator_id: str | None = None,
              run_id: str | None = None) -> list[Measurement]:
        sql = "SELECT * FROM measurements WHERE 1=1"
        args: list[Any] = []
        for col, val in (("kind", kind), ("accelerator_id", accelerator_id), ("run_id", run_id)):
            if val is not None:
                sql += f" AND {col} = ?"
                args.append(str(val))
        with self._connect() as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(sql + " ORDER BY id", args).fetchall()
        return [_row(r) for r in rows]

    def runs(self, kind: Kind | str | None = None) -> list[RunSummary]:
        sql = ("SELECT run_id, MIN(created_at), kind, device, accelerator_id, COUNT(*),"
               " MAX(value), unit FROM measurements")
        args: list[Any] = []
        if kind is not None:
            sql += " WHERE kind = ?"
            args.append(str(kind))
        sql += " GROUP BY run_id, kind ORDER BY MIN(id)"
        with self._connect() as db:
            return [RunSummary(*r) for r in db.execute(sql, args).fetchall()]


def _row(r: sqlite3.Row) -> Measurement:
    return Measurement(kind=Kind(r["kind"]), device=r["device"],
                       accelerator_id=r["accelerator_id"], dtype=r["dtype"], label=r["label"],
                       value=r["value"], unit=r["unit"], median=r["median"],
                       spread=r["spread"], repetitions=r["repetitions"],
                       settings=json.loads(r["settings"]),
                       environment=json.loads(r["environment"]), run_id=r["run_id"],
                       created_at=r["created_at"])


def stamp(m: Measurement, run_id: str) -> Measurement:
    return replace(m, run_id=run_id)
