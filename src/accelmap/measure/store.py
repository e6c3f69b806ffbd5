"""The measurement store: one SQLite file in the user's data directory.

Path: ``$ACCELMAP_DB`` if set, else ``$XDG_DATA_HOME/accelmap/measurements.sqlite`` (default
``~/.local/share/accelmap``), or the path given.

Safety (SQLite's own guarantees, https://www.sqlite.org/atomiccommit.html and /wal.html):

- WAL mode with a busy timeout makes concurrent writers from several processes (one per rank of
  a torchrun collectives run) wait for each other rather than fail, and readers never block;
- each run is written in one ``BEGIN IMMEDIATE`` transaction (the write lock is taken before
  the first row), so an interrupted run - an exception, Ctrl-C, a killed process, a power cut -
  leaves either all of its rows or none;
- a path that cannot be opened or is not a SQLite database gives one ``InputError`` that names
  the file and says how to point accelmap elsewhere.

Two tables: ``measurements`` (one row per measured point, grouped by ``run_id``) and
``profiles`` (calibration profiles made by ``accelmap calibrate``, by name, as JSON). A row's
:class:`~accelmap.measure.environment.Environment` is its ``device`` (the label),
``accelerator_id`` and ``environment`` (JSON) columns; the columns are those of the first
version, so files written before the record read as they are (``read_environment``).
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError
from accelmap.measure.environment import read_environment
from accelmap.measure.records import Kind, Measurement

ENV_DB = "ACCELMAP_DB"
BUSY_TIMEOUT_S = 30.0  # how long a writer waits for another process's transaction
EXPORT_FORMATS = ("json", "csv")

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
CREATE TABLE IF NOT EXISTS profiles (
    name TEXT PRIMARY KEY,
    accelerator_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""

COLUMNS = ("run_id", "created_at", "kind", "device", "accelerator_id", "dtype", "label", "value",
           "unit", "median", "spread", "repetitions", "settings", "environment")


def default_path() -> Path:
    env = os.environ.get(ENV_DB)
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share"))
    return base / "accelmap" / "measurements.sqlite"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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


@dataclass(frozen=True)
class SavedProfile:
    name: str
    accelerator_id: str
    created_at: str
    profile: CalibrationProfile


class Store:
    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        with self._guard("open"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.execute("PRAGMA journal_mode=WAL")  # persistent: recorded in the file
                db.executescript(SCHEMA)

    # --- plumbing ------------------------------------------------------------------------
    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Storage failures (unwritable folder, not a database, disk full) as one sentence."""
        try:
            yield
        except sqlite3.IntegrityError:
            raise  # a malformed record is a bug in the caller, not the user's input
        except (OSError, sqlite3.Error) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise InputError(f"cannot {action} the measurement store {self.path} ({msg}); "
                             f"give --db PATH or set {ENV_DB} to a writable file") from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # autocommit: transactions are explicit (BEGIN IMMEDIATE in _write)
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: the write lock is taken first; any exception rolls back."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._guard("read"), self._connect() as db:
            db.row_factory = sqlite3.Row
            return db.execute(sql, list(args)).fetchall()

    # --- measurements --------------------------------------------------------------------
    def add(self, measurements: Iterable[Measurement], run_id: str | None = None) -> str:
        """Store a run's measurements in one transaction; returns the run id."""
        rid = run_id or uuid.uuid4().hex[:12]
        now = now_iso()
        rows = [(rid, m.created_at or now, m.kind.value, m.device, m.accelerator_id, m.dtype,
                 m.label, m.value, m.unit, m.median, m.spread, m.repetitions,
                 json.dumps(m.settings, sort_keys=True),
                 json.dumps(m.environment.to_dict(), sort_keys=True))
                for m in measurements]
        with self._guard("write to"), self._write() as db:
            db.executemany(f"INSERT INTO measurements ({', '.join(COLUMNS)})"
                           f" VALUES ({', '.join('?' * len(COLUMNS))})", rows)
        return rid

    def query(self, kind: Kind | str | None = None, accelerator_id: str | None = None,
              run_id: str | None = None) -> list[Measurement]:
        sql = "SELECT * FROM measurements WHERE 1=1"
        args: list[Any] = []
        for col, val in (("kind", kind), ("accelerator_id", accelerator_id), ("run_id", run_id)):
            if val is not None:
                sql += f" AND {col} = ?"
                args.append(str(val))
        return [_row(r) for r in self._read(sql + " ORDER BY id", args)]

    def runs(self, kind: Kind | str | None = None) -> list[RunSummary]:
        sql = ("SELECT run_id, MIN(created_at), kind, device, accelerator_id, COUNT(*),"
               " MAX(value), unit FROM measurements")
        args: list[Any] = []
        if kind is not None:
            sql += " WHERE kind = ?"
            args.append(str(kind))
        sql += " GROUP BY run_id, kind ORDER BY MIN(id)"
        return [RunSummary(*r) for r in self._read(sql, args)]

    def accelerators(self) -> list[str]:
        """Catalog ids that have stored measurements."""
        rows = self._read("SELECT DISTINCT accelerator_id FROM measurements"
                          " WHERE accelerator_id IS NOT NULL ORDER BY accelerator_id")
        return [r[0] for r in rows]

    # --- calibration profiles ------------------------------------------------------------
    def save_profile(self, profile: CalibrationProfile) -> None:
        """Store (or replace) a profile under its name."""
        payload = json.dumps(profile.to_dict(), sort_keys=True)
        with self._guard("write to"), self._write() as db:
            db.execute("INSERT OR REPLACE INTO profiles (name, accelerator_id, payload,"
                       " created_at) VALUES (?, ?, ?, ?)",
                       (profile.name, profile.accelerator_id, payload, now_iso()))

    def list_profiles(self) -> list[SavedProfile]:
        """The readable profiles; a damaged row (see ``damaged_profiles``) is left out, so one
        bad row never hides the others."""
        out = []
        for r in self._read("SELECT * FROM profiles ORDER BY name"):
            try:
                profile = self._profile(r["name"], r["payload"])
            except InputError:
                continue
            out.append(SavedProfile(r["name"], r["accelerator_id"], r["created_at"], profile))
        return out

    def damaged_profiles(self) -> list[str]:
        """One sentence per profile row that cannot be read (hand-edited, truncated, NaN)."""
        out = []
        for r in self._read("SELECT name, payload FROM profiles ORDER BY name"):
            try:
                self._profile(r["name"], r["payload"])
            except InputError as e:
                out.append(str(e))
        return out

    def _profile(self, name: str, payload: str) -> CalibrationProfile:
        """A stored profile, or an InputError that names it and says how to replace it."""
        from accelmap.files import parse_json

        try:
            data = parse_json(str(payload), f"profile {name!r}")
            if not isinstance(data, dict):
                raise InputError("not a JSON object")
            return CalibrationProfile.from_dict(data)
        except (InputError, KeyError, TypeError, ValueError, AttributeError) as e:
            why = str(e).removeprefix(f"profile {name!r}: ")[:100] or type(e).__name__
            raise InputError(f"calibration profile {name!r} in {self.path} is damaged ({why}); "
                             f"make it again with 'accelmap calibrate --name {name}'") from None

    def latest_profile(self, accelerator_id: str | None = None,
                       local: bool = False) -> SavedProfile | None:
        """The most recently made (or remade) profile of ``accelerator_id``, or of any local
        device (``local``: ids 'local-...'), or of any device; None when there is none."""
        found = [p for p in self.list_profiles()
                 if (accelerator_id is None or p.accelerator_id == accelerator_id)
                 and (not local or p.accelerator_id.startswith("local-"))]
        return max(found, key=lambda p: (p.created_at, p.name)) if found else None

    def load_profile(self, name: str) -> CalibrationProfile:
        rows = self._read("SELECT payload FROM profiles WHERE name = ?", [name])
        if rows:
            return self._profile(name, rows[0]["payload"])
        names = [p.name for p in self.list_profiles()]
        saved = (f"saved profiles: {', '.join(names)}" if names else
                 "no profiles are saved yet (make one with 'accelmap calibrate')")
        raise InputError(f"unknown calibration profile {name!r} in {self.path}; {saved}")

    # --- export --------------------------------------------------------------------------
    def export(self, path: Path | str, format: str = "json", kind: Kind | str | None = None,
               run_id: str | None = None) -> int:
        """Write measurements (JSON also carries the profiles) to ``path``; returns the number
        of measurements. The file is replaced atomically."""
        fmt = format.lower()
        if fmt not in EXPORT_FORMATS:
            raise InputError(f"unknown export format {format!r}; use one of "
                             f"{', '.join(EXPORT_FORMATS)}")
        ms = self.query(kind=kind, run_id=run_id)
        profiles = self.list_profiles() if fmt == "json" else []
        out = Path(path).expanduser()
        if out.is_symlink() or (out.exists() and not out.is_file()):
            # the atomic replace below would swap out a device node, a link or a directory
            what = ("a symbolic link" if out.is_symlink() else "a directory" if out.is_dir()
                    else "not a regular file")
            raise InputError(f"{out} exists and is {what}: --out writes regular files only; "
                             "choose a file path")
        tmp: str | None = None
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
            with os.fdopen(fd, "w", newline="") as f:
                if fmt == "json":
                    json.dump({"store": str(self.path),
                               "measurements": [m.to_dict() for m in ms],
                               "profiles": [{"created_at": p.created_at, **p.profile.to_dict()}
                                            for p in profiles]}, f, indent=2)
                    f.write("\n")
                else:
                    _write_csv(f, ms)
            os.replace(tmp, out)
        except OSError as e:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            raise InputError(f"cannot write {out} ({e.strerror or e}); choose another --out "
                             "path") from None
        return len(ms)


def _write_csv(f: Any, ms: list[Measurement]) -> None:
    """One row per measurement; settings and environment as JSON text."""
    w = csv.writer(f)
    w.writerow(COLUMNS)
    for m in ms:
        d = m.to_dict()
        w.writerow([json.dumps(d[c], sort_keys=True) if c in ("settings", "environment")
                    else d[c] for c in COLUMNS])


def _row(r: sqlite3.Row) -> Measurement:
    """A stored measurement; a row that cannot be read (hand-edited, from another tool) is an
    InputError naming its run."""
    from accelmap.files import parse_json

    try:
        env = read_environment(parse_json(r["environment"], "environment"), r["device"],
                               r["accelerator_id"])
        settings = parse_json(r["settings"], "settings")
        if not isinstance(settings, dict):
            raise InputError("settings is not a JSON object")
        return Measurement(kind=Kind(r["kind"]), environment=env, dtype=r["dtype"],
                           label=r["label"], value=r["value"], unit=r["unit"],
                           median=r["median"], spread=r["spread"],
                           repetitions=r["repetitions"], settings=settings,
                           run_id=r["run_id"], created_at=r["created_at"])
    except (InputError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise InputError(f"a stored measurement of run {r['run_id']!r} is damaged "
                         f"({str(e)[:100] or type(e).__name__}); delete the run or use "
                         "another --db") from None


def stamp(m: Measurement, run_id: str) -> Measurement:
    return replace(m, run_id=run_id)
