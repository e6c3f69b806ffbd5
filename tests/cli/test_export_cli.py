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
        "serve": ["plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--scenario",
                  "batch", "--prompt", "512", "--output", "64", "--top", "3", "--json"],
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
    assert set(TRAIN_FORMATS + SERVE_FORMATS + ["torchtune"]) <= names
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


@pytest.mark.parametrize(("fmt", "seqs", "tokens"), [
    ("vllm", "--max-num-seqs", "--max-num-batched-tokens"),
    ("sglang", "--max-running-requests", "--chunked-prefill-size")])
def test_scenario_plan_exports_its_scheduler_caps(cli: Run, tmp_path: Path, fmt: str,
                                                  seqs: str, tokens: str) -> None:
    """An offline/server plan carries the scheduler caps it was simulated under; the serving
    exporters write them (the batch scenario's plans carry only the batch)."""
    r = cli("plan", "llama-2-7b", "--cluster", "dgx-h100", "--serve", "--prompt", "512",
            "--output", "64", "--slo-tpot", "20ms", "--requests", "200", "--top", "1",
            "--json")
    assert r.code == 0, r.err
    plan = json.loads(r.out)["plans"][0]
    (tmp_path / "plan.json").write_text(r.out)
    r = cli("export", fmt, "--from", str(tmp_path / "plan.json"), "--out", str(tmp_path / "o"))
    assert r.code == 0, r.err
    script = (tmp_path / "o" / "serve.sh").read_text()
    assert f"{seqs} {plan['mapping']['batch']} " in script
    assert f"{tokens} {plan['mapping']['max_batched_tokens']} " in script
    assert plan["mapping"]["batch"] == plan["max_seqs"]


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


# --- plan files: typed on load, the same JSON back ----------------------------------------

@pytest.mark.parametrize("kind", ["train", "serve"])
def test_plan_file_loads_to_the_typed_plan_and_same_json(plans: dict[str, Path],
                                                         kind: str) -> None:
    """Every plan of an `accelmap plan --json` file loads to the typed PlanJob of the search's
    own Plan (Mapping, ServingChoice), and writes the file's JSON back unchanged."""
    from accelmap.catalog import load_catalog
    from accelmap.export.base import Job, PlanJob, PlanKind, load_plan_file
    from accelmap.hardware.cluster import parse_cluster
    from accelmap.search.planner import plan_training
    from accelmap.search.serve import plan_serving
    from accelmap.units import DType

    cat = load_catalog()
    if kind == "train":  # the fixture's search, in process: 2M tokens / 4096 = 512 sequences
        res = plan_training(cat.models["llama-2-13b"], parse_cluster("64xH100", cat), 4096, 512,
                            top=3, explain=False)
    else:
        res = plan_serving(cat.models["llama-2-7b"], parse_cluster("dgx-h100", cat), 512, 64,
                           top=3)
    data = json.loads(plans[kind].read_text())
    assert len(data["plans"]) == len(res.plans) == 3
    head = ("kind", "model", "accelerator", "devices_per_node", "nodes")
    for i, plan in enumerate(res.plans):
        job = load_plan_file(plans[kind], i)
        assert job == PlanJob.of(Job.from_dict(data["job"]), plan)
        assert job.kind is PlanKind(kind) and job.dtype is DType.BF16
        assert job.mapping == plan.mapping and job.serving == plan.serving
        assert (job.serving is None) == (kind == "train")
        if kind == "train":
            assert job.mapping.world == job.devices
        else:
            assert job.mapping.world <= job.devices and job.serving is not None
            assert job.serving.batch == data["plans"][i]["batch"]
        # the same JSON, key order included: the job block, the mapping, and PlanJob.to_dict
        # as the previous version wrote it (job keys with the mapping after `nodes`)
        assert json.dumps(job.job.to_dict()) == json.dumps(data["job"])
        assert json.dumps(job.mapping_dict()) == json.dumps(data["plans"][i]["mapping"])
        old = {**{k: data["job"][k] for k in head}, "mapping": data["plans"][i]["mapping"],
               **{k: v for k, v in data["job"].items() if k not in head}}
        assert json.dumps(job.to_dict()) == json.dumps(old)
        assert PlanJob.from_dict(job.to_dict()) == job


def test_plan_export_matches_export_from_the_file(cli: Run, tmp_path: Path) -> None:
    """`plan --export` (the search's typed Plan) and `export --from` (the file) write the same
    files."""
    args = ["plan", "llama-2-7b", "--cluster", "dgx-h100", "--train", "--seq", "2048",
            "--global-batch-tokens", "512K", "--top", "1", "--json"]
    r = cli(*args, "--export", "torchtitan", "--out", str(tmp_path / "direct"))
    assert r.code == 0, r.err
    (tmp_path / "plan.json").write_text(r.out)
    r = cli("export", "torchtitan", "--from", str(tmp_path / "plan.json"), "--out",
            str(tmp_path / "file"), "--json")
    assert r.code == 0, r.err
    direct = sorted(p.name for p in (tmp_path / "direct").iterdir())
    assert direct == json.loads(r.out)["files"]
    for name in direct:
        assert (tmp_path / "direct" / name).read_text() == (tmp_path / "file" / name).read_text()


@pytest.mark.parametrize(("kind", "change", "message"), [
    ("train", {"tp": "eight"}, "plan 0: the train plan's mapping: tp='eight' is not a whole "
                               "number >= 1"),
    ("serve", {"replicas": None}, "plan 0: the serve plan's mapping has no replicas"),
    ("serve", {"kv_dtype": "fp7"}, "kv_dtype='fp7' is not one of"),
])
def test_malformed_plan_file_is_one_error_line(cli: Run, plans: dict[str, Path],
                                               tmp_path: Path, kind: str,
                                               change: dict[str, Any], message: str) -> None:
    data = json.loads(plans[kind].read_text())
    mapping = {**data["plans"][0]["mapping"], **change}
    data["plans"][0]["mapping"] = {k: v for k, v in mapping.items() if v is not None}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    fmt = "megatron" if kind == "train" else "vllm"
    r = cli("export", fmt, "--from", str(bad), "--out", str(tmp_path / "out"))
    assert r.code == 2 and not (tmp_path / "out").exists()
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(bad) in lines[0], r.err


# --- LoRA/QLoRA plans ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def qlora_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import contextlib
    import io

    from accelmap.cli.app import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        main(["plan", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--finetune", "qlora",
              "--lora-rank", "16", "--lora-targets", "q,v", "--seq", "4096",
              "--global-batch-tokens", "256K", "--top", "1", "--json"])
    path = tmp_path_factory.mktemp("qlora") / "plan.json"
    path.write_text(buf.getvalue())
    return path


@pytest.mark.parametrize(("fmt", "adapter_file"), [
    ("deepspeed", "bnb_config.json"), ("megatron", "nemo_peft.yaml"),
    ("maxtext", "maxtext_overrides.yml"), ("torchtune", "torchtune_overrides.yaml"),
    ("slurm", None)])
def test_export_qlora_plan(cli: Run, qlora_plan: Path, tmp_path: Path, fmt: str,
                           adapter_file: str | None) -> None:
    job = json.loads(qlora_plan.read_text())["job"]
    assert (job["finetune"], job["lora_rank"], job["lora_targets"]) == ("qlora", 16, ["q", "v"])
    r = cli("export", fmt, "--from", str(qlora_plan), "--out", str(tmp_path), "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert all((tmp_path / f).is_file() for f in d["files"])
    if adapter_file:
        assert adapter_file in d["files"] and d["notes"]
        assert any("lora_alpha = 8" in n or "alpha = 8" in n for n in d["notes"])
    if fmt in ("megatron", "slurm"):  # their own files do not train the adapters: said
        assert any(s.startswith("finetune=qlora, lora_rank=16, lora_targets=q,v: ")
                   for s in d["unsupported"])
    r = cli("export", fmt, "--from", str(qlora_plan), "--out", str(tmp_path / "text"))
    assert r.code == 0 and ("note: " in r.out) == bool(adapter_file)


def test_torchtitan_refuses_a_lora_plan(cli: Run, qlora_plan: Path, tmp_path: Path) -> None:
    r = cli("export", "torchtitan", "--from", str(qlora_plan), "--out", str(tmp_path / "out"))
    assert r.code == 2 and not (tmp_path / "out").exists()
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "finetune=qlora" in lines[0] and "torchtune" in lines[0], r.err
