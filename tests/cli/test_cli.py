"""CLI: every command with --json, forgiving names, and bad input as one clear line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hf"

Run = Callable[..., Any]


def j(result: Any) -> Any:
    assert result.code == 0, result.err
    return json.loads(result.out)


def one_line_error(result: Any) -> str:
    assert result.code != 0
    assert "Traceback" not in result.err + result.out
    lines = [ln for ln in result.err.splitlines() if ln.strip()]
    assert len(lines) == 1, result.err
    return lines[0]


def test_hw_list_json(cli: Run) -> None:
    rows = j(cli("hw", "list", "--json"))
    assert len(rows) >= 45
    assert {"id", "class", "vendor"} <= set(rows[0])


def test_hw_list_filters_and_sort(cli: Run) -> None:
    rows = j(cli("hw", "list", "--class", "gpu", "--min-memory", "141GB", "--sort", "bf16",
                 "--desc", "--json"))
    assert rows and all(r["class"] == "gpu" and r["memory_bytes"] >= 141e9 for r in rows)
    peaks = [r["peak_flops"].get("bf16") for r in rows if r["peak_flops"].get("bf16")]
    assert peaks == sorted(peaks, reverse=True)
    assert all(r["vendor"] == "Google" for r in j(cli("hw", "list", "--vendor", "goo",
                                                      "--json")))


def test_hw_list_table(cli: Run) -> None:
    r = cli("hw", "list", "--class", "tpu")
    assert r.code == 0 and "tpu-v5p" in r.out


def test_hw_show_json_has_sources(cli: Run) -> None:
    data = j(cli("hw", "show", "h100-sxm5-80gb", "--json"))
    assert data["matrix"]["bf16"]["value"] == pytest.approx(989.4e12)
    assert data["sources"]["S11"]["title"]
    assert data["derived"]["ridge_flop_per_byte"]["bf16"] == pytest.approx(989.4e12 / 3.35e12)


def test_hw_show_table_lists_sources_and_doubts(cli: Run) -> None:
    r = cli("hw", "show", "h100-sxm5-80gb")
    assert r.code == 0 and "Sources" in r.out and "S11" in r.out


def test_hw_show_system(cli: Run) -> None:
    data = j(cli("hw", "show", "dgx-h100", "--json"))
    assert data["devices"] == 8 and data["tiers"][0]["role"] == "scale-up"


def test_ambiguous_name_lists_variants(cli: Run) -> None:
    line = one_line_error(cli("hw", "show", "h100", "--json"))
    assert "h100-sxm5-80gb" in line and "h100-pcie" in line


def test_typo_did_you_mean(cli: Run) -> None:
    line = one_line_error(cli("hw", "show", "mi300z"))
    assert "did you mean" in line and "mi300x" in line


def test_hw_compare_json_derived(cli: Run) -> None:
    data = j(cli("hw", "compare", "h100-sxm5-80gb", "mi300x", "--json"))
    h100, mi = data["devices"]
    assert h100["ridge_flop_per_byte"]["bf16"] == pytest.approx(295, rel=0.01)
    assert mi["memory_bytes"] > h100["memory_bytes"]
    assert h100["bytes_per_flop"] == pytest.approx(3.35e12 / 989.4e12)
    # 81559 MiB (nvidia-smi) per 2.69 USD/h
    assert h100["memory_bytes_per_usd_hour"] == pytest.approx(81559 * 2**20 / 2.69, rel=0.01)


def test_hw_compare_default_set(cli: Run) -> None:
    r = cli("hw", "compare")
    assert r.code == 0 and "ridge bf16" in r.out


def test_hw_systems(cli: Run) -> None:
    rows = j(cli("hw", "systems", "--json"))
    tpu = [r for r in rows if r["torus"]]
    assert tpu and all(r["devices"] > 1 for r in rows)


def test_models_list_json(cli: Run) -> None:
    rows = j(cli("models", "list", "--json"))
    assert len(rows) >= 25
    by_id = {r["id"]: r for r in rows}
    assert by_id["llama-2-7b"]["params"] == 6_738_415_616
    assert by_id["mixtral-8x7b"]["active_params"] < by_id["mixtral-8x7b"]["params"]


def test_models_show_json(cli: Run) -> None:
    data = j(cli("models", "show", "deepseek-v3", "--seq", "4096", "--json"))
    assert data["params"] > data["active_params"]
    kinds = [g["kind"] for g in data["layers_detail"]]
    assert kinds == ["dense", "moe"]
    assert data["layers_detail"][0]["count"] == 3
    f = data["flops_per_token"]
    assert f["training"] == pytest.approx(3 * f["forward"])
    # forward ~ 2 x active params (Kaplan), plus attention
    assert 2 * data["active_params"] * 0.9 < f["forward"] < 2 * data["active_params"] * 1.3


def test_models_show_forgiving(cli: Run) -> None:
    assert j(cli("models", "show", "Llama 2 7B", "--json"))["id"] == "llama-2-7b"


def test_models_import_and_show_path(cli: Run, tmp_path: Path) -> None:
    config = FIXTURES / "gpt2.json"
    data = j(cli("models", "import", str(config), "--json"))
    assert data["params"] > 0
    out = tmp_path / "m.yaml"
    assert cli("models", "import", str(config), "--out", str(out)).code == 0
    again = j(cli("models", "show", str(out), "--json"))
    assert again["params"] == data["params"]


def test_imported_yaml_works_as_user_catalog(cli: Run, tmp_path: Path) -> None:
    cfg = FIXTURES / "llama-2-7b.json"
    assert cli("models", "import", str(cfg), "--name", "my-llama", "--out",
               str(tmp_path / "my.yaml")).code == 0
    rows = j(cli("models", "list", "--catalog", str(tmp_path), "--json"))
    assert any(r["id"] == "my-llama" and r["params"] == 6_738_415_616 for r in rows)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("hw", "show", "no-such-chip"), "unknown accelerator"),
        (("hw", "list", "--class", "banana"), "unknown class"),
        (("hw", "list", "--min-memory", "80 parsecs"), "unknown unit"),
        (("hw", "list", "--min-memory", "80"), "no unit"),
        (("hw", "list", "--sort", "colour"), "cannot sort"),
        (("models", "show", "no-such-model"), "unknown model"),
        (("models", "import", "/nonexistent/config.json"), "neither a config.json"),
        (("hw", "list", "--catalog", "/nonexistent-dir"), "does not exist"),
    ],
)
def test_bad_input_one_line(cli: Run, args: tuple[str, ...], needle: str) -> None:
    assert needle in one_line_error(cli(*args))


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"model_type": "llama", "num_hidden_layers": 2}', "missing"),  # no hidden_size
        ('{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, '
         '"num_attention_heads": 5, "intermediate_size": 128, "vocab_size": 10, '
         '"max_position_embeddings": 16}', "does not divide"),
        ('{"model_type": "llama", "num_hidden_layers": 0, "hidden_size": 64, '
         '"num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 10, '
         '"max_position_embeddings": 16}', "greater than 0"),
        ('{"model_type": "rwkv"}', "not supported"),
    ],
)
def test_bad_config_files(cli: Run, tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    assert needle in one_line_error(cli("models", "import", str(path)))


def test_bad_user_yaml_names_file_and_field(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("kind: model\nid: x\nname: x\nfamily: x\n")
    line = one_line_error(cli("models", "list", "--catalog", str(tmp_path)))
    assert "x.yaml" in line and "field" in line


def test_help_has_examples(cli: Run) -> None:
    r = cli("hw", "list", "--help")
    assert r.code == 0 and "Examples" in r.out


@pytest.mark.parametrize("args", [("hw", "show", "h100"), ("hw", "compare", "h100", "mi300x")])
def test_ambiguous_name_asks_which_on_a_terminal(cli: Run, monkeypatch: pytest.MonkeyPatch,
                                                 args: tuple[str, ...]) -> None:
    import sys

    import typer

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    asked: list[str] = []

    def fake_prompt(text: str, type: type) -> int:
        asked.append(text)
        return 3  # the candidates are listed by id: h100-nvl, h100-pcie-80gb, h100-sxm5-80gb

    monkeypatch.setattr(typer, "prompt", fake_prompt)
    r = cli(*args)
    assert r.code == 0, r.err
    assert asked == ["'h100' matches several accelerators; which one"]
    assert "  1. h100-nvl  (" in r.out and "  3. h100-sxm5-80gb  (NVIDIA H100 SXM5 80GB)" in r.out
    assert "h100-sxm5-80gb" in r.out.split("3. h100-sxm5-80gb", 1)[1]  # the chosen one is shown


def test_ambiguous_name_choice_out_of_range(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import typer

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(typer, "prompt", lambda text, type: 9)
    line = one_line_error(cli("hw", "show", "h100"))
    assert "choose a number from 1 to 4" in line


def test_ambiguous_name_never_asks_for_json(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import typer

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(typer, "prompt", lambda *a, **k: pytest.fail("asked"))
    line = one_line_error(cli("hw", "show", "h100", "--json"))
    assert "matches 4 accelerators" in line


TOO_GOOD = """\
kind: accelerator
id: too-good
name: Too Good 1
vendor: Example Corp
class: asic
release_year: 2025
matrix:
  fp8: {value: 20 PFLOP/s, source: ex1}
memory:
  - {name: HBM3, kind: HBM3, role: device, capacity: {value: 80 GB, source: ex1},
     bandwidth: {value: 100 TB/s, source: ex1}}
tdp: {value: 700 W, source: ex1}
sources:
  ex1: {title: Example Corp datasheet rev 1}
"""


def test_implausible_user_part_is_warned_not_refused(cli: Run, tmp_path: Path) -> None:
    """100 TB/s of HBM3 and 20 PFLOP/s at 700 W: one stderr line per broken bound, naming the
    file and the field; the part is still listed, shown and estimated."""
    (tmp_path / "too-good.yaml").write_text(TOO_GOOD)
    r = cli("hw", "list", "--catalog", str(tmp_path), "--json")
    assert "too-good" in [row["id"] for row in j(r)]
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 2, r.err
    assert all(ln.startswith("warning: ") and "too-good.yaml" in ln for ln in lines)
    assert any("field 'memory.0.bandwidth'" in ln and "hbm3-bandwidth" in ln
               and "JESD238" in ln for ln in lines)
    assert any("field 'matrix.fp8'" in ln and "fp8-per-watt" in ln for ln in lines)

    shown = cli("hw", "show", "too-good", "--catalog", str(tmp_path))
    assert shown.code == 0 and "Plausibility" in shown.out and "hbm3-bandwidth" in shown.out
    details = j(cli("hw", "show", "too-good", "--catalog", str(tmp_path), "--json"))
    assert {f["bound"] for f in details["plausibility"]} == {"hbm3-bandwidth", "fp8-per-watt"}

    est = j(cli("estimate", "llama-3.1-8b", "--hw", "too-good", "--catalog", str(tmp_path),
                "--json"))
    assert any(a.startswith("warning: implausible too-good") and "hbm3-bandwidth" in a
               for a in est["assumptions"])


def test_bundled_parts_print_no_plausibility_warning(cli: Run) -> None:
    r = cli("hw", "show", "h100-sxm5-80gb")
    assert r.code == 0 and r.err == "" and "Plausibility" not in r.out
