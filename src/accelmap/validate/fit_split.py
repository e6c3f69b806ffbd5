"""The fixed split of the InferenceX sweeps (data/inferencex_published.yaml) into the records
the serving profiles are fitted on and the records they are only scored on.

Fixed before any fit, from the configuration alone, never from an error: a record's
configuration key is ``accelerator|precision|moe_precision|input_len|output_len|tp|ep|
dp_attention|disaggregated|mtp`` (every concurrency and metric of a configuration share it), and
the record is fitted on iff the first byte of ``sha256(key)`` is divisible by 4: one
configuration in four. The fitters that use it (fitters/fit_sglang_profile.py, fit_atom_profile.py,
fit_server_latency.py) fit the stacks of ``FITTED_STACKS``; benchmarks/inferencex_error.py
prints the error on the records not fitted on apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

KEY_FIELDS = ("accelerator", "precision", "moe_precision", "input_len", "output_len", "tp", "ep",
              "dp_attention", "disaggregated", "mtp")
FIT_ONE_IN = 4
RULE = ("one configuration in four: sha256('accelerator|precision|moe_precision|input_len|"
        "output_len|tp|ep|dp_attention|disaggregated|mtp')[0] % 4 == 0 (fitters/"
        "fit_sglang_profile.py)")
# the run format's framework words whose profiles are fitted on the file's fit set: SGLang's
# host figures, ATOM's, TensorRT-LLM's served latency (trtllm-serve) and Dynamo's front end
# (its fit leaves out the pools with DP attention; they count as fitted here all the same, so
# that "not fitted on" never holds a record of a fitted configuration)
FITTED_STACKS = ("sglang", "atom", "tensorrt-llm", "dynamo")


def config_key(rec: Mapping[str, Any]) -> str:
    """The configuration a record belongs to. A disaggregated record states DP attention per
    pool (``prefill_/decode_dp_attention``); its key reads them as the one ``dp_attention`` the
    file wrote before it did (either pool), so that no configuration changed sides when the
    pools' flags were split."""
    def value(k: str) -> Any:
        if k == "dp_attention" and "dp_attention" not in rec and rec.get("disaggregated"):
            return bool(rec.get("prefill_dp_attention") or rec.get("decode_dp_attention"))
        return rec.get(k)

    return "|".join(str(value(k)) for k in KEY_FIELDS)


def in_fit_set(rec: Mapping[str, Any]) -> bool:
    """The split rule (module doc): one configuration in four, by hash, fixed in advance."""
    return hashlib.sha256(config_key(rec).encode()).digest()[0] % FIT_ONE_IN == 0


def stack_word(rec: Mapping[str, Any]) -> str:
    """The record's framework word without its version (``sglang 0.5.9`` -> ``sglang``)."""
    return str(rec.get("framework", "")).split(" ")[0]


def fitted_on(rec: Mapping[str, Any]) -> bool:
    """Whether a fitted serving profile saw this record (its stack is fitted on the file and
    the record is in the fit set)."""
    return stack_word(rec) in FITTED_STACKS and in_fit_set(rec)
