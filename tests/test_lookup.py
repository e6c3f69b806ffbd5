"""Forgiving name matching."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from accelmap.errors import AmbiguousNameError, NotFoundError
from accelmap.lookup import find, resolve


@dataclass(frozen=True)
class E:
    id: str
    name: str
    aliases: tuple[str, ...] = field(default=())


TABLE = {e.id: e for e in [
    E("h100-sxm5-80gb", "NVIDIA H100 SXM5 80GB", ("h100-sxm",)),
    E("h100-pcie-80gb", "NVIDIA H100 PCIe 80GB"),
    E("h100-nvl", "NVIDIA H100 NVL"),
    E("a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB"),
    E("a100-sxm4-40gb", "NVIDIA A100 SXM4 40GB"),
    E("mi300x", "AMD Instinct MI300X", ("mi300",)),
]}


def test_exact_id_and_alias() -> None:
    assert resolve("h100-nvl", TABLE, "accelerator", "ls").id == "h100-nvl"
    assert resolve("H100 SXM", TABLE, "accelerator", "ls").id == "h100-sxm5-80gb"
    assert resolve("MI-300", TABLE, "accelerator", "ls").id == "mi300x"


def test_family_name_is_ambiguous_and_lists_variants() -> None:
    with pytest.raises(AmbiguousNameError) as info:
        resolve("h100", TABLE, "accelerator", "ls")
    assert info.value.candidates == ["h100-nvl", "h100-pcie-80gb", "h100-sxm5-80gb"]


def test_words_narrow_the_match() -> None:
    assert [e.id for e in find("a100 40gb", TABLE)] == ["a100-sxm4-40gb"]


def test_typo_gets_did_you_mean() -> None:
    with pytest.raises(NotFoundError, match=r"did you mean.*mi300x"):
        resolve("mi300z", TABLE, "accelerator", "ls")


def test_nothing_close() -> None:
    with pytest.raises(NotFoundError, match="'ls' lists them all"):
        resolve("zzzz", TABLE, "accelerator", "ls")


def test_names_are_ascii_nfkc_and_bounded() -> None:
    from accelmap.errors import InputError
    from accelmap.lookup import on_resolve

    with pytest.raises(InputError, match="CYRILLIC CAPITAL LETTER EN"):
        resolve("\u041d100 SXM", TABLE, "accelerator", "ls")  # a look-alike is not guessed
    with pytest.raises(InputError, match="at most 200"):
        resolve("h" * 40_000, TABLE, "accelerator", "ls")
    assert find("h" * 40_000, TABLE) == []  # bounded work
    seen: list[tuple[str, str, str]] = []
    with on_resolve(lambda *a: seen.append(a)):
        assert resolve("ｈ１００　ｓｘｍ", TABLE, "accelerator", "ls").id == "h100-sxm5-80gb"
        assert resolve("h100-nvl", TABLE, "accelerator", "ls").id == "h100-nvl"  # exact: quiet
    assert seen == [("accelerator", "ｈ１００　ｓｘｍ", "h100-sxm5-80gb")]


def test_no_guess_from_symbols_or_inner_fragments() -> None:
    assert find(".*", TABLE) == [] and find("*", TABLE) == [] and find("--", TABLE) == []
    assert find("00", TABLE) == []  # '00' is inside 'h100', not where a word starts
    assert find("80", TABLE) == [] and find("64x", TABLE) == []  # counts, not names
    assert [e.id for e in find("sxm 40", TABLE)] == ["a100-sxm4-40gb"]
