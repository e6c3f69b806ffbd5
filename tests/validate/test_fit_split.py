"""The fixed split of the InferenceX sweeps (validate/fit_split.py): by configuration, one in
four, and "fitted on" only for the stacks whose profiles are fitted on the file."""

from __future__ import annotations

import hashlib

from accelmap.validate.fit_split import config_key, fitted_on, in_fit_set

REC = {"accelerator": "b200", "precision": "fp8", "moe_precision": None, "input_len": 922,
       "output_len": 922, "tp": 8, "ep": None, "dp_attention": False, "disaggregated": None,
       "mtp": None}


def test_the_rule_by_hand() -> None:
    key = "b200|fp8|None|922|922|8|None|False|None|None"
    assert config_key(REC) == key
    assert in_fit_set(REC) == (hashlib.sha256(key.encode()).digest()[0] % 4 == 0)


def test_pools_read_as_one_dp_attention_flag() -> None:
    pools = {**{k: v for k, v in REC.items() if k != "dp_attention"}, "disaggregated": True,
             "prefill_dp_attention": False, "decode_dp_attention": True}
    assert config_key(pools) == config_key({**REC, "disaggregated": True,
                                            "dp_attention": True})


def test_fitted_on_needs_a_fitted_stack() -> None:
    side = next({**REC, "tp": tp} for tp in range(1, 200) if in_fit_set({**REC, "tp": tp}))
    assert fitted_on({**side, "framework": "sglang 0.5.9"})
    assert fitted_on({**side, "framework": "tensorrt-llm 1.2.0"})
    assert fitted_on({**side, "framework": "dynamo 0.8.1"})  # Dynamo's front end
    assert not fitted_on({**side, "framework": "vllm 0.11"})  # no profile fitted on the file
    other = next({**REC, "tp": tp} for tp in range(1, 200) if not in_fit_set({**REC, "tp": tp}))
    assert not fitted_on({**other, "framework": "sglang"})
