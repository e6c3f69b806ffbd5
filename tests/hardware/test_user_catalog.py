"""User catalog folders: same schema, errors that name the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelmap.catalog import load_catalog
from accelmap.errors import CatalogError

MY_CHIP = """\
kind: accelerator
id: my-npu
name: Example NPU 1
vendor: Example Corp
class: asic
release_year: 2025
matrix:
  bf16: {value: 400 TFLOP/s, source: ex1}
memory:
  - {name: HBM3, kind: HBM3, role: device, capacity: {value: 64 GB, source: ex1},
     bandwidth: {value: 2 TB/s, source: ex1}}
sources:
  ex1: {title: Example Corp datasheet rev 1, url: "https://example.com/npu1.pdf"}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_user_folder_adds_entries(tmp_path: Path) -> None:
    write(tmp_path, "npu.yaml", MY_CHIP)
    cat = load_catalog([tmp_path])
    assert cat.accelerators["my-npu"].peak("bf16") == 400e12  # type: ignore[arg-type]
    assert "h100-sxm5-80gb" in cat.accelerators  # bundled entries are still there


def test_env_var_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "npu.yaml", MY_CHIP)
    monkeypatch.setenv("ACCELMAP_CATALOG", str(tmp_path))
    assert "my-npu" in load_catalog().accelerators


def test_kind_from_folder_name(tmp_path: Path) -> None:
    (tmp_path / "accelerators").mkdir()
    write(tmp_path / "accelerators", "npu.yaml", MY_CHIP.replace("kind: accelerator\n", ""))
    assert "my-npu" in load_catalog([tmp_path]).accelerators


@pytest.mark.parametrize(
    ("mutation", "expected"),
    [
        (("400 TFLOP/s", "400"), "field 'matrix.bf16'.*no unit"),
        (("400 TFLOP/s", "400 GB"), "field 'matrix.bf16'.*bytes quantity"),
        (("400 TFLOP/s", "-4 TFLOP/s"), "field 'matrix.bf16'.*positive"),
        (("class: asic", "class: quantum"), "field 'class'"),
        (("vendor: Example Corp\n", ""), "field 'vendor'.*required"),
        (("source: ex1}\nmemory", "source: nope}\nmemory"), "source id 'nope'"),
        (("kind: accelerator", "kind: toaster"), "field 'kind'"),
        (("release_year: 2025", "release_year: [2025"), "not valid YAML"),
    ],
)
def test_errors_name_file_and_field(tmp_path: Path, mutation: tuple[str, str],
                                    expected: str) -> None:
    old, new = mutation
    assert old in MY_CHIP
    write(tmp_path, "npu.yaml", MY_CHIP.replace(old, new, 1))
    with pytest.raises(CatalogError, match=expected) as info:
        load_catalog([tmp_path])
    assert "npu.yaml" in str(info.value)


def test_duplicate_id_fails_loudly(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", MY_CHIP)
    write(tmp_path, "b.yaml", MY_CHIP)
    with pytest.raises(CatalogError, match="already defined"):
        load_catalog([tmp_path])


def test_shadowing_a_bundled_id_fails(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", MY_CHIP.replace("id: my-npu", "id: h100-sxm5-80gb"))
    with pytest.raises(CatalogError, match="already defined"):
        load_catalog([tmp_path])


def test_unknown_kind_needs_a_hint(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", MY_CHIP.replace("kind: accelerator\n", ""))
    with pytest.raises(CatalogError, match="kind: accelerator"):
        load_catalog([tmp_path])


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog([tmp_path / "nope"])
