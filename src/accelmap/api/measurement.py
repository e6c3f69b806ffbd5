"""Measurement: what this hardware really achieves (matmul, memory bandwidth, per-op overhead,
collectives), the measurement store that keeps every run, and calibration profiles made from it.

Every ``measure_*`` function opens the store before measuring (a bad ``db`` fails before minutes
of work), stores its measurements as one run and returns them with the run id. ``db`` left out
is ``$ACCELMAP_DB``, else the user's data directory.

    from accelmap import api
    run = api.measure_matmul(dtypes=["fp32"], budget=3)
    print(run.run_id, run.results[0].best_flops_per_s)
    cal = api.calibrate(api.open_store(must_exist=True))
    est = api.estimate(spec, api.load_system(hw=cal.accelerator.id, profile=cal.profile), ...)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelmap.catalog import Catalog, load_catalog
from accelmap.cost.calibration import CalibrationProfile
from accelmap.errors import InputError, NotFoundError
from accelmap.files import exists
from accelmap.hardware.schema import Accelerator
from accelmap.measure.attention import AttentionResult
from accelmap.measure.bandwidth import BandwidthResult
from accelmap.measure.calibrate import Best
from accelmap.measure.matmul import SweepResult
from accelmap.measure.overhead import OverheadResult
from accelmap.measure.records import Kind
from accelmap.measure.store import Store
from accelmap.units import DType

__all__ = ["AttentionRun", "BandwidthRun", "Calibration", "MatmulRun", "MeasuredDevice",
           "OverheadRun", "Store", "calibrate", "calibration_accelerator", "find_run",
           "human_bytes", "is_local_name", "load_profile", "local_accelerator",
           "measure_attention", "measure_bandwidth", "measure_collectives", "measure_matmul",
           "measure_overhead", "measured_device", "measurement_kind", "open_store",
           "profile_device"]


# -- the store ----------------------------------------------------------------------------------

def open_store(db: str | Path | None = None, must_exist: bool = False) -> Store:
    """The measurement store at ``db`` (else ``$ACCELMAP_DB``, else the user's data directory);
    with ``must_exist``, a missing file is an InputError that says how to fill one."""
    from accelmap.measure.store import ENV_DB, default_path

    path = Path(db).expanduser() if db is not None else default_path()
    if must_exist and not exists(path):
        raise InputError(f"no measurement store at {path}: run 'accelmap measure ...' and "
                         f"'accelmap calibrate' first, or give --db PATH (or set {ENV_DB})")
    return Store(path)


def load_profile(name: str | None, db: str | Path | None = None) -> CalibrationProfile | None:
    """The calibration profile ``name`` from the store (None when no name is given)."""
    if name is None:
        return None
    return open_store(db, must_exist=True).load_profile(name)


def measurement_kind(text: str | Kind | None) -> Kind | None:
    """matmul, bandwidth, collective, local_run, overhead (None stays None)."""
    if text is None or isinstance(text, Kind):
        return text
    try:
        return Kind(text.lower())
    except ValueError:
        raise InputError(f"unknown measurement kind {text!r}; use one of "
                         f"{', '.join(k.value for k in Kind)}") from None


def find_run(store: Store, run_id: str) -> str:
    """The stored run id that is ``run_id`` or that ``run_id`` uniquely begins."""
    ids = [r.run_id for r in store.runs()]
    if run_id in ids:
        return run_id
    hits = sorted({i for i in ids if i.startswith(run_id)})
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise InputError(f"run id {run_id!r} matches {len(hits)} runs ({', '.join(hits[:5])}); "
                         "give more characters")
    recent = ", ".join(ids[-5:]) or "none stored yet"
    raise InputError(f"no run {run_id!r} in {store.path}; recent runs: {recent} "
                     "('accelmap measure list' lists them all)")


# -- measuring ----------------------------------------------------------------------------------

def _catalog(catalog: Catalog | None) -> Catalog:
    return catalog if catalog is not None else load_catalog()


@dataclass(frozen=True)
class MatmulRun:
    """One ``measure_matmul`` run: a sweep per dtype, the accelerator compared with (None where
    nothing matched) and how it was chosen, and where the measurements were stored."""

    results: tuple[SweepResult, ...]
    accelerator: Accelerator | None
    compared_with: str
    run_id: str
    db: str
    warnings: tuple[str, ...] = ()  # e.g. --hw forced onto another device

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "db": self.db,
                "accelerator_id": self.accelerator.id if self.accelerator else None,
                "compared_with": self.compared_with,
                "results": [r.to_dict() for r in self.results]}


@dataclass(frozen=True)
class BandwidthRun:
    """One ``measure_bandwidth`` run (see MatmulRun)."""

    result: BandwidthResult
    accelerator: Accelerator | None
    compared_with: str
    run_id: str
    db: str
    warnings: tuple[str, ...] = ()  # e.g. --hw forced onto another device

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "db": self.db, "compared_with": self.compared_with,
                **self.result.to_dict()}


@dataclass(frozen=True)
class OverheadRun:
    """One ``measure_overhead`` run (see MatmulRun)."""

    result: OverheadResult
    accelerator: Accelerator | None
    compared_with: str
    run_id: str
    db: str
    warnings: tuple[str, ...] = ()  # e.g. --hw forced onto another device

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "db": self.db, "compared_with": self.compared_with,
                **self.result.to_dict()}


def _store(results: Sequence[Any], store: Store) -> tuple[str, str]:
    return store.add([m for r in results for m in r.measurements]), str(store.path)


MAX_BUDGET_S = 86_400.0  # one day of sweeping
MAX_BUFFER_BYTES = 2.0**40  # 1 TiB: no device holds a bigger bandwidth buffer


def _budget(budget: float | str) -> float:
    """Seconds from a number or a duration ('30s', '2min'): finite, 0.1 s .. one day."""
    from accelmap.api.parse import duration

    s = duration(budget) if isinstance(budget, str) else float(budget)
    if not (math.isfinite(s) and 0.1 <= s <= MAX_BUDGET_S):
        raise InputError(f"--budget {budget} is not a time between 0.1 s and "
                         f"{MAX_BUDGET_S:,.0f} s (one day); write e.g. 30s or 5min")
    return s


def _same_device(acc: Accelerator | None, env: Any, hw: str | None, catalog: Catalog,
                 force: bool) -> str | None:
    """Refuse (or, with ``force``, warn) when ``--hw`` names another accelerator than the
    device measured: the run would be stored, and later calibrated, as that accelerator's.
    Returns the warning line, if any."""
    from accelmap.hardware.schema import DeviceClass
    from accelmap.measure.catalog_match import match_gpu

    if hw is None or acc is None:
        return None
    on_cpu = env.device_type == "cpu"
    other = None
    if on_cpu != (acc.device_class is DeviceClass.CPU):
        other = "a CPU" if on_cpu else "not a CPU"
    elif not on_cpu:
        seen = match_gpu(env.device_name or env.device, env.memory_bytes or 0.0, catalog)
        if seen is not None and seen.id != acc.id:
            other = f"recognised as {seen.id}"
    if other is None:
        return None
    what = f"the device measured, {env.label}, is {other}, not {acc.id}"
    if not force:
        raise InputError(f"--hw {acc.id}: {what}; the run would be stored as {acc.id}'s. Leave "
                         "--hw out, or add --force to compare with it anyway")
    return f"warning: {what}; stored as {acc.id}'s because of --force"


def measure_matmul(device: str = "cpu", dtypes: Sequence[str | DType] = ("bf16",),
                   hw: str | None = None, budget: float | str = 30.0,
                   backend: str | None = None, reps: int = 5, flush: bool | None = None,
                   db: str | Path | None = None, catalog: Catalog | None = None,
                   force: bool = False) -> MatmulRun:
    """Maximum achievable matmul FLOP/s: sweep GEMM shapes per dtype for ``budget`` seconds
    (or a duration such as '30s') each on ``device`` (torch, or numpy on the CPU), compared
    with ``hw`` (a catalog accelerator; 'local' = this CPU's description; default: guessed
    from the device). An ``hw`` that is not the device measured is refused unless ``force``
    (the run is stored as that accelerator's)."""
    from accelmap.measure.backends import get_backend
    from accelmap.measure.catalog_match import match_accelerator
    from accelmap.measure.matmul import parse_dtype, sweep

    dts = [parse_dtype(d) for d in dtypes]  # bad input fails before any work
    seconds = _budget(budget)
    store = open_store(db)
    be = get_backend(device, backend)
    cat = _catalog(catalog)
    acc, how = match_accelerator(hw, be.environment(), cat)
    warning = _same_device(acc, be.environment(), hw, cat, force)
    results = tuple(sweep(device, d, acc, seconds, backend=be, reps=reps, flush=flush)
                    for d in dts)
    run_id, path = _store(results, store)
    return MatmulRun(results, acc, how, run_id, path, (warning,) if warning else ())


def measure_bandwidth(device: str = "cpu", kernels: Sequence[str] = ("copy", "read", "write"),
                      hw: str | None = None, budget: float | str = 20.0,
                      backend: str | None = None, sizes: Sequence[str | int] | None = None,
                      reps: int = 5, flush: bool | None = None, db: str | Path | None = None,
                      catalog: Catalog | None = None, force: bool = False) -> BandwidthRun:
    """Achievable memory bandwidth: copy/read/write over buffers far above the caches
    (``sizes`` such as '2 GiB'; default 4x and 8x the on-chip memory) within ``budget``
    seconds; the cache flush is on unless ``flush`` is False."""
    from accelmap.measure.backends import get_backend
    from accelmap.measure.bandwidth import measure_bandwidth as _measure
    from accelmap.measure.catalog_match import match_accelerator

    nbytes = [_buffer(s) for s in sizes] if sizes else None
    seconds = _budget(budget)
    store = open_store(db)
    be = get_backend(device, backend)
    cat = _catalog(catalog)
    acc, how = match_accelerator(hw, be.environment(), cat)
    warning = _same_device(acc, be.environment(), hw, cat, force)
    result = _measure(device, acc, seconds, kinds=list(kernels), sizes=nbytes, backend=be,
                      reps=reps, flush=flush is not False)
    run_id, path = _store([result], store)
    return BandwidthRun(result, acc, how, run_id, path, (warning,) if warning else ())


def _buffer(size: str | int) -> int:
    """A bandwidth buffer in bytes ('2 GiB'): at least 1 KiB, at most MAX_BUFFER_BYTES."""
    from accelmap.units import Dimension, parse_quantity

    n = parse_quantity(size, Dimension.BYTES) if isinstance(size, str) else float(size)
    if not 1024 <= n <= MAX_BUFFER_BYTES:
        raise InputError(f"--size {size}: a buffer is between 1 KiB and 1 TiB; write e.g. "
                         "'2 GiB'")
    return int(n)


def measure_overhead(device: str = "cpu", hw: str | None = None, reps: int = 7,
                     db: str | Path | None = None, catalog: Catalog | None = None,
                     force: bool = False) -> OverheadRun:
    """Per-operation overhead of eager PyTorch on ``device``: the fixed cost of one tiny op."""
    from accelmap.measure.backends import get_backend
    from accelmap.measure.catalog_match import match_accelerator
    from accelmap.measure.overhead import measure_overhead as _measure

    store = open_store(db)
    be = get_backend(device, "torch")
    cat = _catalog(catalog)
    acc, how = match_accelerator(hw, be.environment(), cat)
    warning = _same_device(acc, be.environment(), hw, cat, force)
    result = _measure(be, acc.id if acc else None, reps=reps)
    run_id, path = _store([result], store)
    return OverheadRun(result, acc, how, run_id, path, (warning,) if warning else ())


@dataclass(frozen=True)
class AttentionRun:
    """One ``measure_attention`` run (see MatmulRun)."""

    result: AttentionResult
    accelerator: Accelerator | None
    compared_with: str
    run_id: str
    db: str

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "db": self.db, "compared_with": self.compared_with,
                **self.result.to_dict()}


def measure_attention(device: str = "cpu", dtype: str | DType | None = None,
                      hw: str | None = None, budget: float = 10.0, reps: int = 5,
                      db: str | Path | None = None, catalog: Catalog | None = None
                      ) -> AttentionRun:
    """Fused causal attention (PyTorch SDPA), forward and backward, on ``device`` for
    ``budget`` seconds: the kernel PyTorch picks and its efficiency by sequence length. Without
    a dtype, the device's own: bf16 on a GPU (where SDPA picks the flash kernel), fp32 on a
    CPU (``measure.attention.device_dtype``)."""
    from accelmap.measure.attention import device_dtype
    from accelmap.measure.attention import measure_attention as _measure
    from accelmap.measure.backends import get_backend
    from accelmap.measure.catalog_match import match_accelerator
    from accelmap.measure.matmul import parse_dtype

    store = open_store(db)
    be = get_backend(device, "torch")
    dt = parse_dtype(dtype) if dtype is not None else device_dtype(be.environment().device_type)
    acc, how = match_accelerator(hw, be.environment(), _catalog(catalog))
    result = _measure(be, acc, dt, budget, reps)
    run_id, path = _store([result], store)
    return AttentionRun(result, acc, how, run_id, path)


def measure_collectives(nproc: int = 2, sizes: str = "1K,64K,1M,16M", ops: str = "all",
                        db: str | Path | None = None, timeout: float = 600.0
                        ) -> dict[str, Any]:
    """Collectives measured with torch.distributed (torchrun on this machine) as nccl-tests
    does; rank 0's report ``{"run_id", "db", "backend", "device", "rows": [...]}``."""
    from accelmap.measure.collectives import run_collectives

    return run_collectives(nproc=nproc, sizes=sizes, ops=ops, db=db, timeout=timeout)


def human_bytes(n: float) -> str:
    """A message size as nccl-tests writes it: 1024 -> '1K', 64 MiB -> '64M'."""
    from accelmap.measure.collectives import human_bytes as _human_bytes

    return _human_bytes(n)


# -- calibration --------------------------------------------------------------------------------

def local_accelerator() -> Accelerator | None:
    """This machine's CPU as an accelerator (``hardware/local.py``); None where that cannot be
    described (the module missing or the OS saying too little)."""
    try:
        from accelmap.hardware.local import local_cpu
    except ImportError:
        return None
    try:
        return local_cpu()
    except (OSError, ValueError):
        return None


def profile_device(profile: CalibrationProfile) -> Accelerator | None:
    """The device a profile carries (a local CPU's facts, ``hardware/local.py``), described
    again, with the alias 'local'; None where the profile carries none (a catalog device)."""
    from accelmap.hardware.local import describe, facts_from_dict

    cpu = (profile.device or {}).get("cpu")
    if not cpu:
        return None
    try:
        acc = describe(facts_from_dict(cpu))
    except ValueError:
        return None
    if acc.id != profile.accelerator_id:  # made by another version's id rule: keep the id
        acc = acc.model_copy(update={"id": profile.accelerator_id})
    return acc.model_copy(update={"aliases": (*acc.aliases, "local")})


@dataclass(frozen=True)
class MeasuredDevice:
    """What ``--hw`` and ``--profile`` resolve to: the catalog (with the measured local device
    added where the catalog lacks it), the calibration profile to predict with, and a sentence
    on how it was chosen (empty where nothing was chosen for the user)."""

    catalog: Catalog
    profile: CalibrationProfile | None
    how: str = ""


def is_local_name(hw: str | None) -> bool:
    """'local', 'cpu' or a 'local-...' id: a device described by measurement, not the catalog."""
    from accelmap.hardware.local import is_local_id

    return hw is not None and (hw.strip().lower() in ("local", "cpu")
                               or is_local_id(hw.strip().lower()))


def measured_device(hw: str | None, profile: str | None = None,
                    db: str | Path | None = None, catalog: Catalog | None = None
                    ) -> MeasuredDevice:
    """``--hw`` / ``--profile`` as a catalog and a profile. ``profile`` names a saved profile;
    without it, ``hw`` 'local' is the local device of the newest local profile in the store and
    a 'local-...' id the newest profile of that device (a local CPU has no datasheet: its
    measurements are its description). The profile's device joins the catalog (under its id
    and the alias 'local') when the catalog lacks it, so every command resolves it by name."""
    cat = _catalog(catalog)
    cal: CalibrationProfile | None = None
    how = ""
    if profile is not None:
        cal = open_store(db, must_exist=True).load_profile(profile)
    elif is_local_name(hw):
        assert hw is not None
        store = open_store(db, must_exist=True)
        key = hw.strip().lower()
        want = None if key in ("local", "cpu") else key
        saved = store.latest_profile(want, local=want is None)
        if saved is None:
            local = local_accelerator()
            target = want or (local.id if local else "this machine's CPU")
            raise InputError(f"no calibration profile of {target} in {store.path}: measure it "
                             "(accelmap measure matmul --dtype fp32; accelmap measure bandwidth;"
                             " accelmap measure overhead; accelmap measure attention) and run "
                             "'accelmap calibrate'")
        cal = saved.profile
        how = (f"--hw {hw}: the newest profile of {saved.accelerator_id}, {saved.name!r} "
               f"(made {saved.created_at}); --profile NAME picks another")
    if cal is not None:
        acc = profile_device(cal)
        if acc is not None and acc.id not in cat.accelerators:
            from dataclasses import replace

            cat = replace(cat, accelerators={**cat.accelerators, acc.id: acc})
    return MeasuredDevice(cat, cal, how)


def calibration_accelerator(hw: str | None, store: Store,
                            catalog: Catalog | None = None) -> Accelerator:
    """The accelerator whose stored measurements to calibrate from: ``hw`` (a catalog id or
    name; 'local' or 'cpu' = this CPU), else this CPU if the store has its measurements, else
    the only accelerator in the store."""
    from accelmap.lookup import resolve

    local = local_accelerator()
    stored = store.accelerators()
    if hw is None:
        if local is not None and local.id in stored:
            return local
        if len(stored) != 1:
            raise InputError("give --hw ACCELERATOR (stored measurements are of: "
                             f"{', '.join(stored) or 'none yet'})")
        hw = stored[0]
    if local is not None and hw.lower() in ("local", "cpu", local.id):
        return local
    try:
        return resolve(hw, _catalog(catalog).accelerators, "accelerator", "accelmap hw list")
    except NotFoundError:
        if hw in stored:
            raise InputError(f"{hw} has measurements but no catalog entry to compare them "
                             "with; add it to a --catalog folder") from None
        raise


@dataclass(frozen=True)
class Calibration:
    """A calibration profile just saved, the accelerator it is for, and the best measured
    matmul per dtype and bandwidth it came from (measured vs the peak used)."""

    profile: CalibrationProfile
    accelerator: Accelerator
    matmul: dict[DType, Best]
    bandwidth: Best | None
    store: str

    def to_dict(self) -> dict[str, Any]:
        bw = self.bandwidth
        return {"store": self.store, "profile": self.profile.to_dict(),
                "matmul": {d.value: {"best_flops": b.value, "label": b.label,
                                     "run_id": b.run_id, "peak_flops": b.peak,
                                     "peak_source": b.peak_source,
                                     "efficiency": b.efficiency}
                           for d, b in self.matmul.items()},
                "bandwidth": None if bw is None else {
                    "best_bytes_per_s": bw.value, "label": bw.label, "run_id": bw.run_id,
                    "catalog_bytes_per_s": bw.peak, "efficiency": bw.efficiency}}


def calibrate(store: Store, hw: str | None = None, name: str | None = None,
              catalog: Catalog | None = None) -> Calibration:
    """Turn the stored matmul and bandwidth measurements of one accelerator
    (``calibration_accelerator``) into a calibration profile named ``name`` (default: the
    accelerator id) and save it in the store, replacing one of that name."""
    from accelmap.measure.calibrate import best_bandwidth, best_matmul
    from accelmap.measure.calibrate import calibrate as _calibrate

    acc = calibration_accelerator(hw, store, _catalog(catalog))
    if name is not None:
        _profile_name(name)
    ms = _measured_on(store.query(accelerator_id=acc.id), acc)
    profile = _calibrate(ms, acc, name)
    store.save_profile(profile)
    return Calibration(profile, acc, best_matmul(ms, acc), best_bandwidth(ms, acc),
                       str(store.path))


def _measured_on(ms: list[Any], acc: Accelerator) -> list[Any]:
    """The measurements stored as ``acc``'s that ran on that kind of device: a CPU run stored
    as an H100's (``measure --hw ... --force``) never calibrates an H100 profile."""
    from accelmap.hardware.schema import DeviceClass

    cpu_part = acc.device_class is DeviceClass.CPU
    own = [m for m in ms if (m.environment.device_type == "cpu") == cpu_part]
    if ms and not own:
        where = ms[0].environment.label
        raise InputError(f"the measurements stored as {acc.id}'s ran on {where}, not on a "
                         f"{acc.name}: measure on that device (without --force) to calibrate it")
    return own


MAX_PROFILE_NAME = 100


def _profile_name(name: str) -> str:
    """A profile name: 1..100 printable characters."""
    if not name.strip() or len(name) > MAX_PROFILE_NAME or not name.isprintable():
        raise InputError(f"profile name {name[:40]!r}{'...' if len(name) > 40 else ''} is not "
                         f"1 to {MAX_PROFILE_NAME} printable characters; choose a short name "
                         "such as my-h100")
    return name
