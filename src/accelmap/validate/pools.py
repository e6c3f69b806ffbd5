"""Disaggregated runs of the run format (``disaggregated: true`` with ``prefill_devices``,
``decode_devices``, ``prefill_tp``, ``decode_tp``, ``prefill_ep``, ``decode_ep``,
``prefill_dp_attention``, ``decode_dp_attention``), predicted through the disaggregated
simulator (``serving/disagg.py``): ``prefill_devices / prefill_tp`` prefill instances of
``prefill_tp`` devices with expert parallelism ``prefill_ep`` inside each (1 when not stated,
as the colocated rows read a missing ``ep``) and attention data-parallel over the instance
when ``prefill_dp_attention`` (default: the run's ``dp_attention``), the same for decode, the
KV of each prompt sent between them over the cluster's real tier.

What the simulator runs: the offline scenario (every request queued at once), the server
scenario at a stated rate or at the highest rate meeting its latency limits
(``serving.capacity.max_rate_split``) and closed-loop concurrency (N clients over both pools,
``serving.disagg.closed_loop``), with MTP on both pools when the run states it
(``serving.disagg_spec``).
"""

from __future__ import annotations

from accelmap.errors import InputError
from accelmap.serving.disagg import Disaggregation
from accelmap.validate.runs import ServingRun

POOL_FIELDS = ("prefill_devices", "decode_devices", "prefill_tp", "decode_tp")


def split_of(run: ServingRun) -> Disaggregation | list[str]:
    """The pools of a ``disaggregated: true`` run, or the reasons it has none (each naming the
    field to add or fix)."""
    missing = [k for k in POOL_FIELDS if getattr(run, k) is None]
    if missing:
        return [f"a disaggregated run needs its pools: {', '.join(missing)} not stated "
                "(prefill_devices = prefill instances x prefill_tp, the same for decode)"]
    assert run.prefill_devices and run.decode_devices and run.prefill_tp and run.decode_tp
    try:
        both = bool(run.dp_attention)
        split = Disaggregation.of_pools(
            run.prefill_devices, run.decode_devices, run.prefill_tp, run.decode_tp,
            run.prefill_ep or 1, run.decode_ep or 1,
            both if run.prefill_dp_attention is None else run.prefill_dp_attention,
            both if run.decode_dp_attention is None else run.decode_dp_attention)
    except InputError as e:
        return [str(e)]
    out: list[str] = []
    if run.devices is not None and run.devices != split.devices:
        out.append(f"prefill_devices + decode_devices = {split.devices} but the run used "
                   f"{run.devices} devices")
    if (run.pp or 1) > 1:
        out.append("pipeline stages in disaggregated pools are not modelled")
    return out or split


__all__ = ["POOL_FIELDS", "split_of"]
