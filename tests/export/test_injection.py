"""A plan file from someone else must not smuggle a command into a launch script or a config:
every field of the plan job and mapping, for every exporter, is tried with shell, TOML, YAML
and JSON breakers. Each is either refused with one InputError line or written so that the
payload stays data: no shell line runs `touch INJECTED`, and every config parses with its own
library to the same structure as a clean export."""

from __future__ import annotations

import copy
import json
import os
import shlex
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelmap import api
from accelmap.errors import InputError
from accelmap.export.base import PlanJob
from accelmap.export.write import write_files

TRAIN = {"kind": "train", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
         "devices_per_node": 8, "nodes": 2,
         "mapping": {"dp": 4, "tp": 2, "pp": 2, "cp": 1, "ep": 1, "zero": 1, "micro_batch": 1,
                     "vpp": 1, "recompute": "selective", "offload": False},
         "seq_len": 4096, "global_batch": 64, "dtype": "bf16", "prompt_len": 2048,
         "output_len": 256, "framework": "megatron", "finetune": "lora", "lora_rank": 8,
         "lora_targets": ["q", "v"]}
SERVE = {"kind": "serve", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
         "devices_per_node": 8, "nodes": 1,
         "mapping": {"tp": 2, "pp": 1, "ep": 1, "replicas": 4, "batch": 64,
                     "weight_dtype": "bf16", "kv_dtype": "bf16"},
         "seq_len": 2304, "global_batch": 64, "dtype": "bf16", "prompt_len": 2048,
         "output_len": 256, "framework": "vllm"}

PAYLOADS = ["h100\ntouch INJECTED\n#", "$(touch INJECTED)", "`touch INJECTED`",
            "'; touch INJECTED; '", '"; touch INJECTED; "', "x\" = 1\n[evil]\nk = \"",
            "a: b\n- touch INJECTED", "\x00touch INJECTED"]


def _fields(plan: dict[str, Any]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [(k,) for k in plan if k != "mapping"]
    out += [("mapping", k) for k in plan["mapping"]]
    return out


def _set(plan: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    p = copy.deepcopy(plan)
    node = p
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return p


def _shell_runs_injected(text: str) -> bool:
    for line in text.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            return True  # an unbalanced quote: the payload broke the quoting
        for i, w in enumerate(words):
            if w.endswith(("touch", ";touch", "(touch")) and i + 1 < len(words) \
                    and words[i + 1].startswith("INJECTED"):
                return True
    return False


def _parse(name: str, text: str) -> Any:
    if name.endswith(".json"):
        return json.loads(text)
    if name.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    if name.endswith(".toml"):
        return tomllib.loads(text)
    return None


def _exporters(kind: str) -> list[str]:
    return [str(e.name) for e in api.list_exporters()
            if kind in api.exports.exporter_row(e)["plans"]]


CASES = [(name, plan, field) for plan in (TRAIN, SERVE) for name in _exporters(plan["kind"])
         for field in _fields(plan)]


@pytest.mark.parametrize(("fmt", "plan", "field"), CASES,
                         ids=[f"{c[0]}-{'.'.join(c[2])}" for c in CASES])
def test_no_field_smuggles_a_command(fmt: str, plan: dict[str, Any], field: tuple[str, ...],
                                     tmp_path: Path, catalog: Any) -> None:
    for payload in PAYLOADS:
        bad = _set(plan, field, payload)
        try:
            job = PlanJob.from_dict(bad)
            done = api.export_plan(fmt, job, tmp_path / "out", catalog, force=True)
        except InputError as e:
            assert "\n" not in str(e).strip() and len(str(e)) < 400
            continue
        for path in done.paths:
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".sh" or "torchrun" in text or "#!/" in text[:3]:
                assert not _shell_runs_injected(text), (fmt, field, payload, path.name)
            parsed = _parse(path.name, text)
            if parsed is not None:
                assert "evil" not in json.dumps(parsed), (fmt, field, payload, path.name)


def test_every_exporter_writes_a_clean_plan(tmp_path: Path, catalog: Any) -> None:
    for plan in (TRAIN, SERVE):
        for fmt in _exporters(plan["kind"]):
            try:
                done = api.export_plan(fmt, PlanJob.from_dict(plan), tmp_path / fmt, catalog)
            except InputError:
                continue  # a format that refuses this plan (e.g. LoRA on torchtitan)
            for path in done.paths:
                _parse(path.name, path.read_text(encoding="utf-8"))  # parses


def test_writes_never_replace_links_devices_or_other_content(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    assert [p.name for p in write_files(folder, {"a.sh": "echo 1\n"})] == ["a.sh"]
    assert stat.S_IMODE((folder / "a.sh").stat().st_mode) & 0o100  # runnable
    # the same content again is fine; other content needs --force
    write_files(folder, {"a.sh": "echo 1\n"})
    with pytest.raises(InputError, match="--force"):
        write_files(folder, {"a.sh": "echo 2\n"})
    write_files(folder, {"a.sh": "echo 2\n"}, force=True)
    assert (folder / "a.sh").read_text() == "echo 2\n"
    # a link, a directory and a FIFO in a file's place are never replaced, --force or not
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (folder / "link.json").symlink_to(target)
    (folder / "dir.json").mkdir()
    os.mkfifo(folder / "fifo.json")
    for name in ("link.json", "dir.json", "fifo.json"):
        with pytest.raises(InputError, match="not replaced"):
            write_files(folder, {name: "{}"}, force=True)
    assert target.read_text() == "keep"
    # a folder that is a file or a link is refused; nothing is half written
    with pytest.raises(InputError, match="not a folder"):
        write_files(target, {"x.json": "{}"})
    with pytest.raises(InputError, match="not a folder"):
        write_files(folder / "link.json", {"x.json": "{}"})
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_cli_export_refuses_to_overwrite_without_force(cli: Any, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({k: v for k, v in TRAIN.items()
                                if k not in ("finetune", "lora_rank", "lora_targets")}))
    out = tmp_path / "launch"
    assert cli("export", "megatron", "--from", str(plan), "--out", str(out)).code == 0
    script = next(out.glob("*.sh"))
    script.write_text("# my edits\n")
    r = cli("export", "megatron", "--from", str(plan), "--out", str(out))
    assert r.code == 2 and "--force" in r.err and "Traceback" not in r.err
    assert script.read_text() == "# my edits\n"
    assert cli("export", "megatron", "--from", str(plan), "--out", str(out), "--force").code == 0
    r = cli("export", "megatron", "--from", str(plan), "--out", "/dev/null")
    assert r.code == 2 and "not a folder" in r.err


@pytest.mark.parametrize(("field", "value", "says"), [
    (("nodes",), True, "nodes"), (("mapping", "dp"), 4.0, "mapping.dp"),
    (("lora_rank",), 10**9, "lora_rank"), (("surprise",), 1, "surprise"),
    (("mapping", "zero"), "2", "mapping.zero")])
def test_plan_schema_names_the_field(field: tuple[str, ...], value: Any, says: str) -> None:
    from accelmap.export.schema import check_plan_job

    with pytest.raises(InputError, match=says.replace(".", r"\.")):
        check_plan_job(_set(TRAIN, field, value))
    check_plan_job(TRAIN)  # the clean plan passes
