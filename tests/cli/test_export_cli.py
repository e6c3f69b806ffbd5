"""`accelmap export` and `plan --export`: every exporter from a real plan file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Run = Callable[..., Any]

TRAIN_FORMATS = ["deepspeed", "megatron", "torchtitan", "maxtext", "slurm"]
SERVE_FORMATS = ["vllm", "sglang"]


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from accelmap.cli.app import main

    out = tmp_path_factory.mktemp("plans")
    files = {}
    for kind, args in {
        "train": ["plan", "llama-2-13b", "--cluster", "64xH100", "--train", "--seq", "4096",
                  "--global-batch-tokens", "2M", "--top", "3", "--json"],
        "serve": ["plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--prompt", "512",
                  "--output", "64", "--top", "3", "--json"],
    }.items():
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            main(args)
        path = out / f"{kind}.json"
        path.write_text(buf.getvalue())
        files[kind] = path
    return files


def test_list(cli: Run) -> None:
    r = cli("export", "--list", "--json")
    assert r.code == 0
    names = {e["name"] for e in json.loads(r.out)}
    assert set(TRAIN_FORMATS + SERVE_FORMATS) <= names
    assert all(e["version"] and e["url"].startswith("http") for e in json.loads(r.out))


@pytest.mark.parametrize("fmt", TRAIN_FORMATS)
def test_export_training_plan(cli: Run, plans: dict[str, Path], tmp_path: Path,
                              fmt: str) -> None:
    r = cli("export", fmt, "--from", str(plans["train"]), "--out", str(tmp_path), "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["files"] and all((tmp_path / f).is_file() for f in d["files"])
    assert d["launch"]


@pytest.mark.parametrize("fmt", SERVE_FORMATS)
def test_export_serving_plan(cli: Run, plans: dict[str, Path], tmp_path: Path,
                             fmt: str) -> None:
    r = cli("export", fmt, "--from", str(plans["serve"]), "--out", str(tmp_path), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["files"]


def test_wrong_kind_and_bad_inputs(cli: Run, plans: dict[str, Path], tmp_path: Path) -> None:
    r = cli("export", "vllm", "--from", str(plans["train"]), "--out", str(tmp_path))
    assert r.code == 2 and "serve" in r.err
    r = cli("export", "nonesuch", "--from", str(plans["train"]))
    assert r.code == 2 and "unknown export format" in r.err
    r = cli("export", "megatron", "--from", str(tmp_path / "missing.json"))
    assert r.code == 2 and "no such plan file" in r.err


def test_plan_export_option(cli: Run, tmp_path: Path) -> None:
    r = cli("plan", "llama-2-7b", "--cluster", "dgx-h100", "--train", "--seq", "2048",
            "--global-batch-tokens", "512K", "--top", "1", "--export", "megatron", "--out",
            str(tmp_path))
    assert r.code == 0, r.err
    assert any(tmp_path.iterdir())
