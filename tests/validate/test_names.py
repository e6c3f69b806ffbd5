"""Names through the catalog's own lookup before the explicit tables: the spellings held-out runs
used resolve, numbers must match whole, and the tables never contradict the lookup."""

from __future__ import annotations

import pytest

from accelmap.catalog import Catalog
from accelmap.validate.cases import Arch
from accelmap.validate.names import MEASURED_NAMES, catalog_matches
from accelmap.validate.resolve import MODEL_NAMES, resolve_device, resolve_model

LLAMA_70B = Arch(80, 8192, 64, 8, 28672, 128256)


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA H100-SXM5-80GB", "h100-sxm5-80gb"),
    ("H100-SXM5-80GB", "h100-sxm5-80gb"),
    ("NVIDIA GB200 (per GPU)", "gb200"),
    ("GB200 (per GPU)", "gb200"),
    ("a100-sxm4-40gb", "a100-sxm4-40gb"),
    ("NVIDIA A100", "a100-sxm4-80gb"),  # ambiguous in the catalog: the table's stated choice
    ("AMD MI250X (one GCD)", "mi250x"),  # the table only: half a package
])
def test_accelerator_spellings(catalog: Catalog, name: str, expected: str) -> None:
    dev = resolve_device(name, catalog)
    assert dev.value is not None, dev.reason
    assert dev.value.acc.id == expected


@pytest.mark.parametrize("name", ["LLAMA3_70B", "llama-3-70b", "Llama 3.1 70B", "LLAMA3-70B"])
def test_llama_spellings_are_the_preset_not_a_gpt_build(catalog: Catalog, name: str) -> None:
    # the row's dimensions are there too: before, an unknown name was built GPT style from them
    res = resolve_model(name, LLAMA_70B, catalog, 8192, megatron=True)
    assert res.value is not None and res.value.id == "llama-3.1-70b"
    assert res.notes[0] == "model preset llama-3.1-70b"


def test_numbers_must_match_whole(catalog: Catalog) -> None:
    # the catalog's word lookup alone finds gpt3-175b for 'GPT3-75B' ('75b' inside '175b')
    assert catalog_matches("GPT3-75B", catalog.models) == []
    assert resolve_model("GPT3-75B", Arch(), catalog, None, megatron=True).value is None
    assert [e.id for e in catalog_matches("GPT3-5B", catalog.models)] == ["gpt3-5b"]
    assert [e.id for e in catalog_matches("NVIDIA B200 SXM", catalog.accelerators)] == ["b200"]


def test_unknown_and_ambiguous_names_say_what_to_write(catalog: Catalog) -> None:
    typo = resolve_device("H100-SXM9-80GB", catalog)
    assert "not in the catalog; did you mean" in str(typo.reason)
    several = resolve_device("H100", catalog)
    assert "matches 4 catalog entries" in str(several.reason) and "write one id" in str(
        several.reason)
    model = resolve_model("Llama 70B", Arch(), catalog, None, megatron=False)
    assert "llama-2-70b, llama-3.1-70b" in str(model.reason)


def test_tables_agree_with_the_lookup(catalog: Catalog) -> None:
    """Where the lookup settles a table name alone, it names the same entry: the table only
    adds notes there, so looking up first changes no transcription row."""
    for name, dev in MEASURED_NAMES.items():
        found = catalog_matches(name, catalog.accelerators)
        assert len(found) != 1 or found[0].id == dev.catalog_id, name
    for name, pid in MODEL_NAMES.items():
        found = catalog_matches(name, catalog.models)
        assert len(found) != 1 or found[0].id == pid, name
