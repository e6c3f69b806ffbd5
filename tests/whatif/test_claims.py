"""check-claim: verdicts with the bound that decides, on catalog parts, spec files and claims."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accelmap import api
from accelmap.catalog import Catalog
from accelmap.errors import InputError
from accelmap.hardware import claims as hc

SOHU = Path(__file__).resolve().parents[2] / "data" / "etched-sohu-like.yaml"


def test_parse_claim_forms() -> None:
    c = hc.parse_claim("11,819 tok/s on llama-2-13b at batch 1024 with fp8 prompt 128 output 128")
    assert (c.tokens_per_s, c.model, c.batch, c.precision, c.prompt, c.output) == (
        11819, "llama-2-13b", 1024, api.DType.FP8, 128, 128)
    u = hc.parse_claim("300 tokens/s per user on llama-2-70b on 576 chips")
    assert (u.per, u.batch, u.devices, u.model) == ("user", 1, 576, "llama-2-70b")
    assert hc.parse_claim("1.5k tok/s on x (input+output) speculative").counts == "all"
    with pytest.raises(InputError, match="no rate"):
        hc.parse_claim("fast on llama")


def test_catalog_parts_are_plausible(catalog: Catalog) -> None:
    for hw in ("h100-sxm5-80gb", "a100-sxm4-80gb", "groq-lpu-v1", "wse-3", "l4"):
        r = api.check_claim(hw, catalog=catalog)
        assert r.verdict is hc.Verdict.PLAUSIBLE, (hw, r.reason)


def test_bandwidth_bound_decides_a_batch_one_claim(catalog: Catalog) -> None:
    r = api.check_claim("h100-sxm5-80gb", "1000 tok/s per user on llama-2-70b with fp8 on 8 "
                        "GPUs", catalog, engine=False)
    assert r.verdict is hc.Verdict.IMPOSSIBLE and r.deciding is not None
    assert r.deciding.name == "claim-bandwidth" and r.deciding.ratio == pytest.approx(2.56, 0.02)
    # the same claim with speculative decoding is not refused by the bandwidth bound
    s = api.check_claim("h100-sxm5-80gb", "1000 tok/s per user on llama-2-70b with fp8 on 8 "
                        "GPUs speculative", catalog, engine=False)
    assert s.verdict is hc.Verdict.PLAUSIBLE


def test_a_published_result_is_plausible_and_near_the_engine(catalog: Catalog) -> None:
    r = api.check_claim("h200-sxm", "11,819 tok/s on llama-2-13b at batch 1024 with fp8 prompt "
                        "128 output 128", catalog)
    assert r.verdict is hc.Verdict.PLAUSIBLE
    assert r.engine is not None and 0.6 < r.engine["claim_over_engine"] < 1.5


def test_whatif_past_hbm_stacks_is_impossible(catalog: Catalog) -> None:
    cat = api.whatif.apply_whatif(catalog, api.what_if(["memory_bandwidth=20TB/s"]))
    r = api.check_claim("h100-sxm5-80gb", catalog=cat)
    assert r.verdict is hc.Verdict.IMPOSSIBLE and r.deciding is not None
    assert r.deciding.name == "hbm3-bandwidth"


def test_silicon_bounds_from_the_command_line(catalog: Catalog) -> None:
    # H100's figures on a quarter of its die: 4x the density of anything shipped at 4 nm
    r = api.check_claim("h100-sxm5-80gb", catalog=catalog, node_nm=4, die_area_mm2=200)
    assert r.verdict is hc.Verdict.IMPOSSIBLE and "per-mm2" in (r.deciding.name if r.deciding
                                                                else "")
    with pytest.raises(InputError, match="together"):
        api.check_claim("h100-sxm5-80gb", catalog=catalog, node_nm=4)


def test_sram_past_the_die_is_impossible(catalog: Catalog) -> None:
    cat = api.whatif.apply_whatif(catalog, api.what_if(["sram=10GB"]))
    r = api.check_claim("h100-sxm5-80gb", catalog=cat)
    assert r.verdict is hc.Verdict.IMPOSSIBLE
    assert any(b.name.startswith("sram-density") and b.verdict is hc.Verdict.IMPOSSIBLE
               for b in r.spec)


def test_spec_file_and_vendor_claim(cli: Callable[..., Any]) -> None:
    r = cli("check-claim", "--hw", str(SOHU), "--claim", "500000 tok/s (input+output) on "
            "llama-3.1-70b with fp8 on 8 chips prompt 2048 output 128", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["verdict"] == "impossible" and d["bound"] == "claim-compute"
    assert d["silicon"]["die_area_mm2"] == 858
    r = cli("check-claim", "--hw", "h100", "--claim", "lots on llama")
    assert r.code == 2 and r.err.startswith("error: claim")


def test_three_tiers_with_the_engine_best(catalog: Catalog) -> None:
    """Issue 27: '500000 tok/s on llama-3.1-70b on 8 chips' on B200 sits under the FP4 compute
    peak, so no physical bound breaks, but it needs ~8x the engine's best over every batch that
    fits plus its error band: implausible, with the numbers."""
    r = api.check_claim("b200", "500000 tok/s on llama-3.1-70b on 8 chips", catalog)
    assert r.verdict is hc.Verdict.IMPLAUSIBLE
    assert r.deciding is not None and r.deciding.name == "claim-engine-best"
    assert r.engine is not None and r.engine["best_batch"] > 1
    assert r.deciding.have == pytest.approx(
        r.engine["best_tokens_per_s"] * (1 + r.engine["error_band"]["pct"] / 100))
    assert f"{r.engine['best_tokens_per_s']:,.0f}" in r.deciding.sentence
    # a claim past a physical bound stays impossible
    assert api.check_claim("b200", "5000000 tok/s on llama-3.1-70b on 8 chips",
                           catalog).verdict is hc.Verdict.IMPOSSIBLE
    # at the engine's own best it is plausible
    best = r.engine["best_tokens_per_s"]
    ok = api.check_claim("b200", f"{best:.0f} tok/s on llama-3.1-70b on 8 chips", catalog)
    assert ok.verdict is hc.Verdict.PLAUSIBLE


def test_engine_bound_tiers() -> None:
    b = hc.engine_bound(120.0, 100.0, 8, 10.0, False)
    assert b.verdict is hc.Verdict.IMPLAUSIBLE and b.have == pytest.approx(110.0)
    assert hc.engine_bound(109.0, 100.0, 8, 10.0, False).verdict is hc.Verdict.PLAUSIBLE
    # no band for runs like it: the stated allowance, said in the sentence
    nb = hc.engine_bound(150.0, 100.0, 8, None, False)
    assert nb.verdict is hc.Verdict.PLAUSIBLE and "no error band" in nb.sentence
    assert hc.engine_bound(1e6, 100.0, 8, 10.0, True).verdict is hc.Verdict.PLAUSIBLE
