"""The bad-input corpus: bad and odd inputs across every command, the files they read, and the
verdict rule; tests/cli/test_bad_inputs.py runs every case, and benchmarks/bad_inputs.py prints
the tally (handled clearly / internal errors / silent wrong answers / hangs / unclear messages /
valid inputs refused).

A case expects an error (exit 2, one clear line on stderr), success (exit 0), or either. "Clear"
means: exit 2 with exactly one ``error:`` line of at most ``MAX_LINE`` characters (warnings and
notes may precede it), no traceback, no "internal error"; or exit 0 where the input is valid.
Cases run in-process through the real entry point (``accelmap.cli.app.main``), or in a forked
child (``run_case(..., isolate=True)``) so that an interpreter crash is a finding.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[2]
MAX_LINE = 300  # characters of the one error line
TIMEOUT_S = 20.0  # per case; a case that takes longer counts as a hang

ERR, OK, ANY = "err", "ok", "any"


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    expect: str = ERR  # err: exit 2 with one clear line; ok: exit 0; any: either, clearly
    says: str = ""  # text the output (stdout + stderr) must hold, when given


def C(cid: str, *args: str, expect: str = ERR, says: str = "") -> Case:
    return Case(cid, tuple(args), expect, says)


# --- fixture files -------------------------------------------------------------------------
LLAMA = json.loads((ROOT / "tests/fixtures/hf/llama-2-7b.json").read_text())
SPEC_YAML = """\
id: tiny-test
name: Tiny test model
family: test
n_layers: 4
d_model: 256
n_heads: 4
ffn_dim: 1024
vocab_size: 1000
max_seq_len: 2048
"""
CHIP = """\
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
RUNS_CSV = (ROOT / "tests/fixtures/runs/runs.csv").read_text()
RUNS_HEADER = RUNS_CSV.splitlines()[0]
RUN_ROW = RUNS_CSV.splitlines()[2]  # R2: llama-3-8b on 8 GB200, mfu 41.5
TRACE = "arrival_s,prompt_len,output_len\n0.0,128,32\n0.5,256,16\n1.0,64,64\n"
PLAN_JOB = {"kind": "train", "model": "llama-3.1-8b", "accelerator": "h100-sxm5-80gb",
            "devices_per_node": 8, "nodes": 1, "seq_len": 4096, "global_batch": 1024,
            "dtype": "bf16", "prompt_len": 2048, "output_len": 256, "framework": "megatron"}
PLAN_MAP = {"dp": 8, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero": 2, "micro_batch": 1,
            "vpp": 1, "recompute": "none", "offload": False}


def _cfg(**over: object) -> str:
    return json.dumps({**LLAMA, **over}, ensure_ascii=False)


def _plan(job: dict[str, object] | None = None, mapping: dict[str, object] | None = None
          ) -> str:
    return json.dumps({"job": {**PLAN_JOB, **(job or {})},
                       "plans": [{"mapping": {**PLAN_MAP, **(mapping or {})}}]})


def _runs(**cells: str) -> str:
    """runs.csv with row R2 changed in the named columns."""
    cols = RUNS_HEADER.split(",")
    import csv

    row = next(csv.reader([RUN_ROW]))
    for k, v in cells.items():
        row[cols.index(k)] = v
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([cols, row])
    return buf.getvalue()


def _layout(layout: str, column: str, value: str) -> str:
    """The first data row of tests/fixtures/measurements/LAYOUT.csv with one cell changed."""
    import csv

    rows = list(csv.reader(io.StringIO(
        (ROOT / f"tests/fixtures/measurements/{layout}.csv").read_text())))
    rows[1][rows[0].index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows[:2])
    return buf.getvalue()


def _damaged_results() -> dict[str, object]:
    """A real saved plan result, whole and with one field each removed or mistyped."""
    import copy

    whole = json.loads((ROOT / "tests/fixtures/results/plan.json").read_text())

    def hurt(change: object) -> object:
        x = copy.deepcopy(whole)
        change(x)  # type: ignore[operator]
        return x
    return {
        "ok": whole,
        "no-mapping": hurt(lambda x: [r.pop("mapping") for r in x["plans"]]),
        "mapping-str": hurt(lambda x: x["plans"][0].__setitem__("mapping", "tp=8")),
        "plans-str": hurt(lambda x: x.__setitem__("plans", "hello")),
        "job-list": hurt(lambda x: x.__setitem__("job", [1, 2])),
        "row-empty": hurt(lambda x: x["plans"].__setitem__(0, {})),
        "number-str": hurt(lambda x: x["plans"][0].__setitem__("step_time_s", "fast")),
        "no-job": hurt(lambda x: x.pop("job")),
        "tp-zero": hurt(lambda x: x["plans"][0]["mapping"].__setitem__("tp", 0)),
        "model-unknown": hurt(lambda x: x["job"].__setitem__("model", "no-such-model")),
        "list": [whole],
    }


def make_files(d: Path) -> None:
    """Write every fixture file the cases name under ``d``."""
    def w(name: str, text: str | bytes) -> None:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")

    # model configs (config.json)
    w("cfg/ok.json", _cfg())
    w("cfg/bom.json", "\ufeff" + _cfg())
    w("cfg/utf16.json", _cfg().encode("utf-16"))
    w("cfg/utf16le.json", _cfg().encode("utf-16-le"))
    w("cfg/latin1.json", _cfg(_name_or_path="modèle").encode("latin-1"))
    w("cfg/binary.json", bytes(range(256)) * 40)
    w("cfg/empty.json", "")
    w("cfg/spaces.json", "   \n\t ")
    w("cfg/deep.json", "[" * 100_000 + "]" * 100_000)
    w("cfg/deep-obj.json", '{"a":' * 50_000 + "1" + "}" * 50_000)
    w("cfg/nan.json", _cfg().replace('"hidden_size": 4096', '"hidden_size": NaN'))
    w("cfg/inf.json", _cfg().replace('"vocab_size": 32000', '"vocab_size": Infinity'))
    w("cfg/neginf.json", _cfg().replace('"vocab_size": 32000', '"vocab_size": -Infinity'))
    w("cfg/1e400.json", _cfg().replace('"vocab_size": 32000', '"vocab_size": 1e400'))
    w("cfg/nan-eps.json", _cfg().replace('"rms_norm_eps": 1e-05', '"rms_norm_eps": NaN'))
    w("cfg/vocab.json", _cfg(vocab_size=10**18))
    w("cfg/layers.json", _cfg(num_hidden_layers=10**12))
    w("cfg/layers-1e5.json", _cfg(num_hidden_layers=100_000))
    w("cfg/dmodel.json", _cfg(hidden_size=2**40, num_attention_heads=32))
    w("cfg/ffn.json", _cfg(intermediate_size=10**15))
    no_layers = {k: v for k, v in LLAMA.items() if k != "num_hidden_layers"}
    w("cfg/no-layers.json", json.dumps(no_layers))
    no_heads = {k: v for k, v in LLAMA.items() if k != "num_attention_heads"}
    w("cfg/no-heads.json", json.dumps(no_heads))
    no_ctx = {k: v for k, v in LLAMA.items() if k != "max_position_embeddings"}
    w("cfg/no-context.json", json.dumps(no_ctx))
    w("cfg/heads0.json", _cfg(num_attention_heads=0))
    w("cfg/layers-neg.json", _cfg(num_hidden_layers=-4))
    w("cfg/layers-str.json", _cfg(num_hidden_layers="32"))
    w("cfg/layers-bool.json", _cfg(num_hidden_layers=True))
    w("cfg/layers-float.json", _cfg(num_hidden_layers=32.5))
    w("cfg/layers-list.json", _cfg(num_hidden_layers=[32]))
    w("cfg/seq-huge.json", _cfg(max_position_embeddings=10**30))
    w("cfg/bigint.json", _cfg().replace('"vocab_size": 32000', '"vocab_size": ' + "9" * 5000))
    w("cfg/list.json", "[1, 2, 3]")
    w("cfg/string.json", '"llama"')
    w("cfg/null.json", "null")
    w("cfg/no-type.json", json.dumps({k: v for k, v in LLAMA.items() if k != "model_type"}))
    w("cfg/bad-type.json", _cfg(model_type="totally-new-arch"))
    w("cfg/type-list.json", _cfg(model_type=["llama"]))
    w("cfg/type-long.json", _cfg(model_type="x" * 5000))
    w("cfg/trailing.json", _cfg() + " garbage")
    w("cfg/comment.json", "// a comment\n" + _cfg())
    w("cfg/big.json", '{"model_type": "llama", "pad": "' + "x" * (40 * 2**20) + '"}')
    w("cfg/kv0.json", _cfg(num_key_value_heads=0))
    w("cfg/kv-odd.json", _cfg(num_key_value_heads=5))
    w("cfg/dir/config.json", _cfg())
    w("cfg/nul.json", _cfg().replace("llama", "lla\u0000ma"))
    # spec YAMLs
    w("spec/ok.yaml", SPEC_YAML)
    w("spec/nan.yaml", SPEC_YAML.replace("d_model: 256", "d_model: .nan"))
    w("spec/inf.yaml", SPEC_YAML.replace("vocab_size: 1000", "vocab_size: .inf"))
    w("spec/layers.yaml", SPEC_YAML.replace("n_layers: 4", "n_layers: 1000000000000"))
    w("spec/vocab.yaml", SPEC_YAML.replace("vocab_size: 1000", "vocab_size: 1000000000000000"))
    w("spec/seq.yaml", SPEC_YAML.replace("max_seq_len: 2048", "max_seq_len: 1e30"))
    w("spec/float-layers.yaml", SPEC_YAML.replace("n_layers: 4", "n_layers: 4.5"))
    w("spec/utf16.yaml", SPEC_YAML.encode("utf-16"))
    w("spec/latin1.yaml", (SPEC_YAML + "notes: [modèle]\n").encode("latin-1"))
    w("spec/binary.yaml", bytes(range(256)) * 40)
    w("spec/deep.yaml", "a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    w("spec/deep-map.yaml", "".join("  " * i + f"k{i}:\n" for i in range(3000)) + "  " * 3000
      + "v\n")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    w("spec/bomb.yaml", bomb)
    w("spec/python.yaml", "!!python/object/apply:os.system ['true']\n")
    w("spec/tabs.yaml", SPEC_YAML.replace("n_layers: 4", "\tn_layers: 4"))
    w("spec/list.yaml", "- 1\n- 2\n")
    w("spec/empty.yaml", "")
    w("spec/kind.yaml", "kind: spaceship\n" + SPEC_YAML)
    w("spec/unknown-field.yaml", SPEC_YAML + "n_layer: 4\n")
    w("spec/dup.yaml", SPEC_YAML + "n_layers: 8\n")
    # user catalog folders
    w("cat-ok/chip.yaml", CHIP)
    w("cat-bw/chip.yaml", CHIP.replace("2 TB/s", "1e-300 TB/s"))
    w("cat-flops/chip.yaml", CHIP.replace("400 TFLOP/s", "1e30 TFLOP/s"))
    w("cat-mem/chip.yaml", CHIP.replace("64 GB", "1e30 GB"))
    w("cat-nan/chip.yaml", CHIP.replace("400 TFLOP/s", "nan TFLOP/s"))
    w("cat-inf/chip.yaml", CHIP.replace("400 TFLOP/s", "inf TFLOP/s"))
    w("cat-1e400/chip.yaml", CHIP.replace("400 TFLOP/s", "1e400 TFLOP/s"))
    w("cat-neg/chip.yaml", CHIP.replace("2 TB/s", "-2 TB/s"))
    w("cat-bare/chip.yaml", CHIP.replace("{value: 2 TB/s", "{value: 2000000000000"))
    w("cat-nanbare/chip.yaml", CHIP.replace("{value: 2 TB/s", "{value: .nan"))
    w("cat-year/chip.yaml", CHIP.replace("release_year: 2025", "release_year: 1e400"))
    w("cat-utf16/chip.yaml", CHIP.encode("utf-16"))
    w("cat-binary/chip.yaml", bytes(range(256)) * 40)
    w("cat-deep/chip.yaml", "a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    w("cat-bomb/chip.yaml", "kind: accelerator\n" + bomb)
    w("cat-model/models/m.yaml", SPEC_YAML.replace("tiny-test", "tiny-cat-model"))
    w("cat-model-huge/models/m.yaml",
      SPEC_YAML.replace("n_layers: 4", "n_layers: 1000000000000"))
    w("cat-empty/readme.txt", "nothing here")
    w("cat-long-id/chip.yaml", CHIP.replace("id: my-npu", "id: " + "n" * 5000))
    deep = d / "cat-deepdirs"
    deep.mkdir(exist_ok=True)
    p = deep
    for i in range(60):
        p = p / f"d{i}"
    p.mkdir(parents=True, exist_ok=True)
    loop = d / "cat-loop"
    loop.mkdir(exist_ok=True)
    with contextlib.suppress(OSError):
        (loop / "self").symlink_to(loop, target_is_directory=True)
    w("cat-file", "not a folder")
    # system YAML for --cluster
    w("sys/bad.yaml", "kind: system\nid: x\naccelerator: h100-sxm5-80gb\ndevices_per_node: "
      "1e400\n")
    w("sys/utf16.yaml", "kind: system\nid: x\n".encode("utf-16"))
    w("sys/deep.yaml", "a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    # validate cases
    w("val/ok.csv", RUNS_CSV)
    w("val/neg.csv", _runs(value="-41.5"))
    w("val/1e400.csv", _runs(value="1e400"))
    w("val/nan.csv", _runs(value="nan"))
    w("val/inf.csv", _runs(value="inf"))
    w("val/zero.csv", _runs(value="0"))
    w("val/mfu-big.csv", _runs(value="4150"))
    w("val/dev0.csv", _runs(devices="0"))
    w("val/dev-neg.csv", _runs(devices="-8"))
    w("val/dev-1e400.csv", _runs(devices="1e400"))
    w("val/dev-huge.csv", _runs(devices="99999999999999999999999"))
    w("val/dev-frac.csv", _runs(devices="7.5"))
    w("val/seq-huge.csv", _runs(seq_len="1e30"))
    w("val/batch0.csv", _runs(global_batch="0"))
    w("val/layers-huge.csv", _runs(model="", layers="1000000000000", hidden="4096",
                                   heads="32", kv_heads="8", ffn_hidden="14336",
                                   vocab="128256", family="llama"))
    w("val/hidden-nan.csv", _runs(model="", layers="32", hidden="nan", heads="32",
                                  kv_heads="8", ffn_hidden="14336", vocab="128256",
                                  family="llama"))
    w("val/tp-huge.csv", _runs(tp="1e400"))
    w("val/empty.csv", "")
    w("val/header.csv", RUNS_HEADER + "\n")
    w("val/utf16.csv", RUNS_CSV.encode("utf-16"))
    w("val/latin1.csv", (RUNS_CSV.replace("test", "tést")).encode("latin-1"))
    w("val/binary.csv", bytes(range(256)) * 40)
    w("val/unknown-header.csv", "a,b,c\n1,2,3\n")
    w("val/ragged.csv", RUNS_HEADER + "\nR9,test,h100\n")
    w("val/quote.csv", RUNS_HEADER + '\nR9,"unterminated\n')
    w("val/huge-cell.csv", _runs(notes="x" * 2_000_000))
    w("val/nul.csv", RUNS_CSV.replace("test", "te\x00st"))
    w("val/ok.yaml", (ROOT / "tests/fixtures/runs/runs.yaml").read_text())
    w("val/deep.yaml", "- " + "[" * 50_000 + "]" * 50_000 + "\n")
    w("val/nan.yaml", "- {id: R1, source: t, accelerator: h100-sxm5-80gb, model: llama-3-8b, "
      "devices: .nan, precision: bf16, seq_len: 4096, global_batch: 8, metric: mfu, "
      "value: 40}\n")
    w("val/txt.txt", "hello\n")
    # issue 22: a disaggregated run without its pools (one clear skip naming the fields)
    w("val/disagg-no-pools.yaml", "- {id: R1, source: t, accelerator: h100-sxm5-80gb, model: "
      "llama-3.1-8b, devices: 8, precision: bf16, scenario: offline, input_len: 100, "
      "output_len: 10, disaggregated: true, metric: output_tokens_per_s, value: 100}\n")
    # measurement layouts (the published-case CSVs): one row changed in one column
    for layout, column, values in (("inference", "metric_value", ("-5", "1e400", "nan", "0")),
                                   ("inference", "num_devices", ("0", "-1", "1e400", "2.5")),
                                   ("training", "num_devices", ("0", "1e400")),
                                   ("matmul", "measured_value", ("-1", "1e400", "inf"))):
        for v in values:
            w(f"val/{layout}-{column}-{v}.csv", _layout(layout, column, v))
    # serving traces
    w("trace/ok.csv", TRACE)
    w("trace/nan.csv", TRACE.replace("0.5,256", "nan,256"))
    w("trace/inf.csv", TRACE.replace("0.5,256", "inf,256"))
    w("trace/neg.csv", TRACE.replace("0.5,256", "-0.5,256"))
    w("trace/huge-len.csv", TRACE.replace("256,16", "99999999999999999999,16"))
    w("trace/1e400.csv", TRACE.replace("256,16", "1e400,16"))
    w("trace/empty.csv", "")
    w("trace/header.csv", "arrival_s,prompt_len,output_len\n")
    w("trace/utf16.csv", TRACE.encode("utf-16"))
    w("trace/binary.csv", bytes(range(256)) * 40)
    w("trace/deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n")
    w("trace/nan.jsonl", '{"arrival_s": NaN, "prompt_len": 10, "output_len": 10}\n')
    w("trace/list.jsonl", "[1, 2, 3]\n")
    w("trace/ok.jsonl", '{"arrival_s": 0, "prompt_len": 10, "output_len": 10}\n')
    # plan files for export
    w("plan/ok.json", _plan())
    w("plan/serve.json", json.dumps({
        "job": {**PLAN_JOB, "kind": "serve", "framework": "vllm"},
        "plans": [{"mapping": {"tp": 1, "pp": 1, "ep": 1, "replicas": 8, "batch": 16,
                               "weight_dtype": "bf16", "kv_dtype": "bf16"}}]}))
    w("plan/nan.json", _plan(mapping={"tp": 1}).replace('"tp": 1', '"tp": NaN'))
    w("plan/inf.json", _plan().replace('"global_batch": 1024', '"global_batch": Infinity'))
    w("plan/1e400.json", _plan().replace('"seq_len": 4096', '"seq_len": 1e400'))
    w("plan/tp-neg.json", _plan(mapping={"tp": -1, "dp": 8}))
    w("plan/tp-huge.json", _plan(mapping={"tp": 10**30}))
    w("plan/tp-str.json", _plan(mapping={"tp": "two"}))
    w("plan/tp-float.json", _plan(mapping={"tp": 1.5}))
    w("plan/nodes-huge.json", _plan(job={"nodes": 10**15}))
    w("plan/model-unknown.json", _plan(job={"model": "no-such-model"}))
    w("plan/acc-unknown.json", _plan(job={"accelerator": "no-such-chip"}))
    w("plan/kind.json", _plan(job={"kind": "dance"}))
    w("plan/job-list.json", json.dumps({"job": [1], "plans": [{"mapping": PLAN_MAP}]}))
    w("plan/plans-empty.json", json.dumps({"job": PLAN_JOB, "plans": []}))
    w("plan/deep.json", "[" * 100_000 + "]" * 100_000)
    w("plan/utf16.json", _plan().encode("utf-16"))
    w("plan/binary.json", bytes(range(256)) * 40)
    w("plan/empty.json", "")
    # saved --json results for `report`, damaged one field at a time
    for name, result in _damaged_results().items():
        w(f"result/{name}.json", json.dumps(result))
    w("plan/list.json", "[]")
    w("plan/recompute.json", _plan(mapping={"recompute": "sometimes"}))
    # measurement stores
    w("db/text.sqlite", "this is not a database\n" * 10)
    w("db/empty.sqlite", "")
    _make_dbs(d / "db")


def _make_dbs(d: Path) -> None:
    """A store with one corrupt profile row and one corrupt measurement row."""
    from accelmap.measure.store import SCHEMA

    for name, profile, env in (("corrupt-profile.sqlite", "{not json", "{}"),
                               ("nan-profile.sqlite", '{"name": "p", "accelerator_id": '
                                '"h100-sxm5-80gb", "matmul": NaN}', "{}"),
                               ("list-profile.sqlite", "[1, 2]", "{}"),
                               ("corrupt-env.sqlite", None, "{broken")):
        path = d / name
        if path.exists():
            path.unlink()
        db = sqlite3.connect(path)
        db.executescript(SCHEMA)
        if profile is not None:
            db.execute("INSERT INTO profiles VALUES (?, ?, ?, ?)",
                       ("bad", "h100-sxm5-80gb", profile, "2025-01-01T00:00:00+00:00"))
        db.execute("INSERT INTO measurements (run_id, created_at, kind, device, accelerator_id, "
                   "dtype, label, value, unit, median, spread, repetitions, settings, "
                   "environment) VALUES ('r1', '2025-01-01', 'matmul', 'cpu', 'h100-sxm5-80gb',"
                   " 'bf16', '4096x4096x4096', 1e12, 'FLOP/s', 1e12, 0.01, 5, '{}', ?)", (env,))
        db.commit()
        db.close()


# --- the corpus ------------------------------------------------------------------------------
LONG = "h" * 40_000
LONG_MODEL = "llama" * 20_000


def _numbers() -> list[Case]:
    """Options that take a number, each with a table of bad values."""
    cases: list[Case] = []
    est = ("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb")
    ints = {"--batch": est, "--seq": (*est, "--train"), "--prompt": est, "--output": est,
            "--group": (*est, "--weights", "int4"), "--tp": est, "--replicas": est,
            "--devices": est, "--lora-rank": (*est, "--train", "--finetune", "lora"),
            "--vpp": (*est, "--train"), "--micro-batch": (*est, "--train"),
            "--max-seqs": (*est, "--scenario", "offline")}
    for opt, base in ints.items():
        for bad in ("99999999999999999999999", "0", "-1", "1e3", "abc", "", "nan", "١٢"):
            if bad == "0" and opt == "--output":
                continue
            cases.append(C(f"int{opt}={bad[:12]}", *base, opt, bad))
    floats = {"--moe-imbalance": ("estimate", "mixtral-8x7b", "--hw", "h100-sxm5-80gb"),
              "--rate": (*est, "--scenario", "server", "--requests", "50"),
              "--spread": (*est, "--scenario", "offline", "--lengths", "uniform",
                           "--requests", "50"),
              "--prefix-hit": (*est, "--scenario", "offline", "--requests", "50")}
    for opt, base in floats.items():
        for bad in ("inf", "-inf", "nan", "1e400", "-1", "abc", "Infinity"):
            cases.append(C(f"float{opt}={bad}", *base, opt, bad))
    for bad in ("inf", "nan", "-1", "0", "1e400", "15X", "", "1.2.3", "T", "-2T"):
        cases.append(C(f"tokens={bad}", *est, "--train", "--tokens", bad))
    cases.append(C("tokens=15T-ok", *est, "--train", "--tokens", "15T", expect=OK))
    plan = ("plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb", "--train", "--top", "1")
    for bad in ("1", "0", "-4M", "abc", "inf", "nan", "1e400", "4Q", "4.5.6M", ""):
        cases.append(C(f"gbt={bad}", *plan, "--global-batch-tokens", bad))
    for bad in (".", "1.2.3s", "-1s", "inf", "nan", "0", "1e400s", "2 parsecs", "", "s",
                "5 m s", "1e3ms"):
        cases.append(C(f"ttft={bad}", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
                       "--serve", "--ttft", bad, "--top", "1"))
    for bad in (".", "-50ms", "inf", "nan", "50 lightyears"):
        cases.append(C(f"tpot={bad}", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
                       "--serve", "--tpot", bad, "--top", "1"))
    for bad in (".", "-1d", "inf", "0", "1e400d", "60 days later"):
        cases.append(C(f"deadline={bad}", "plan", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
                       "--train", "--tokens", "1T", "--deadline", bad))
    for bad in ("inf", "nan", "-1", "0", "1e400"):
        cases.append(C(f"slo-ttft={bad}", *est, "--scenario", "server", "--rate", "1",
                       "--requests", "20", "--slo-ttft", bad))
    for bad in ("inf", "nan", "-5", "0", "1e400", "abc"):
        cases.append(C(f"budget-usd={bad}", "compare", "llama-3.1-8b", "--hw",
                       "h100-sxm5-80gb", "--budget-usd-h", bad))
    for bad in ("1", "1.5", "nan", "-0.1", "abc", "inf", ""):
        cases.append(C(f"accept={bad}", *est, "--draft", "llama-3.2-1b", "--accept", bad))
    for bad in ("0", "-1", "1000000", "abc", "nan", "1e400"):
        cases.append(C(f"draft-len={bad}", *est, "--draft", "llama-3.2-1b", "--accept", "0.7",
                       "--draft-len", bad))
    for bad in ("0", "-1", "1000000000000", "abc"):
        cases.append(C(f"mtp={bad}", *est, "--mtp", bad, "--accept", "0.7"))
    for bad in ("2:", "x:y", "0:1", "1000000000:1", "1:1:1", "-1:1", "inf:1", ":"):
        cases.append(C(f"disagg={bad}", *est, "--scenario", "server", "--rate", "1",
                       "--requests", "20", "--disaggregate", bad))
    for bad in ("inf", "nan", "-1", "80", "80XB", "1e400 GB", "", "80 GB/s"):
        cases.append(C(f"min-memory={bad}", "hw", "list", "--min-memory", bad))
    for bad in ("inf", "nan", "0", "-1", "1e400", "30 parsecs", "2d", "forever"):
        cases.append(C(f"budget={bad}", "measure", "matmul", "--budget", bad, "--db",
                       "{d}/db/m.sqlite"))
        cases.append(C(f"bw-budget={bad}", "measure", "bandwidth", "--budget", bad, "--db",
                       "{d}/db/m.sqlite"))
    for bad in ("inf", "nan", "-1 GiB", "0 GiB", "1e400 GiB", "2 GB/s", "huge", "1 EiB"):
        cases.append(C(f"bw-size={bad}", "measure", "bandwidth", "--size", bad, "--db",
                       "{d}/db/m.sqlite", "--budget", "0.2"))
    for bad in ("999999999999", "0"):
        cases.append(C(f"reps={bad}", "measure", "matmul", "--reps", bad, "--budget", "0.2",
                       "--db", "{d}/db/m.sqlite"))
        cases.append(C(f"nproc={bad}", "measure", "collectives", "--nproc", bad, "--db",
                       "{d}/db/m.sqlite"))
    for bad in ("1Q", "abc", "-1K", "0", "1e400", "99999999999999999999G", ""):
        cases.append(C(f"coll-sizes={bad}", "measure", "collectives", "--sizes", bad, "--db",
                       "{d}/db/m.sqlite"))
    for bad in ("inf", "nan", "0"):
        cases.append(C(f"coll-timeout={bad}", "measure", "collectives", "--timeout", bad,
                       "--db", "{d}/db/m.sqlite"))
    for bad in ("99999999999999999999999", "-1"):
        cases.append(C(f"export-index={bad}", "export", "megatron", "--from",
                       "{d}/plan/ok.json", "--index", bad, "--out", "{d}/out"))
        cases.append(C(f"models-seq={bad}", "models", "show", "llama-3.1-8b", "--seq", bad))
        cases.append(C(f"top={bad}", "compare", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
                       "--top", bad, expect=ANY if bad[0] == "9" else ERR))
        cases.append(C(f"val-steps={bad}", "validate", "--local", "gpt3-125m", "--steps", bad))
    return cases


def _files() -> list[Case]:
    cases: list[Case] = []
    for f in ("utf16", "utf16le", "latin1", "binary", "empty", "spaces", "deep", "deep-obj",
              "nan", "inf", "neginf", "1e400", "vocab", "layers", "layers-1e5", "dmodel", "ffn",
              "heads0", "layers-neg", "layers-str", "layers-bool", "layers-float",
              "layers-list", "seq-huge", "bigint", "list", "string", "null", "no-type",
              "bad-type", "type-list", "type-long", "trailing", "comment", "big", "kv0",
              "kv-odd", "nul"):
        cases.append(C(f"import:{f}", "models", "import", f"{{d}}/cfg/{f}.json"))
    for f in ("utf16", "latin1", "deep", "nan", "inf", "vocab", "layers", "dmodel", "ffn",
              "big"):
        cases.append(C(f"show-cfg:{f}", "models", "show", f"{{d}}/cfg/{f}.json"))
        cases.append(C(f"est-cfg:{f}", "estimate", f"{{d}}/cfg/{f}.json", "--hw",
                       "h100-sxm5-80gb"))
    cases.append(C("est-cfg:nan-eps", "estimate", "{d}/cfg/nan-eps.json", "--hw",
                   "h100-sxm5-80gb", expect=ANY))
    cases.append(C("import:ok", "models", "import", "{d}/cfg/ok.json", expect=OK))
    cases.append(C("import:bom", "models", "import", "{d}/cfg/bom.json", expect=OK))
    cases.append(C("import:dir", "models", "import", "{d}/cfg/dir", expect=OK))
    cases.append(C("import:missing", "models", "import", "{d}/cfg/none.json"))
    cases.append(C("import:devnull", "models", "import", "/dev/null"))
    cases.append(C("import:devzero", "models", "import", "/dev/zero"))
    cases.append(C("import:folder-without", "models", "import", "{d}/spec"))
    cases.append(C("import:hub-offline", "models", "import", "no-such-owner/no-such-model",
                   expect=ANY))
    for f in ("nan", "inf", "layers", "vocab", "seq", "float-layers", "utf16", "latin1",
              "binary", "deep", "deep-map", "bomb", "python", "tabs", "list", "empty", "kind",
              "unknown-field", "dup"):
        cases.append(C(f"spec:{f}", "models", "show", f"{{d}}/spec/{f}.yaml"))
    cases.append(C("spec:ok", "models", "show", "{d}/spec/ok.yaml", expect=OK))
    cases.append(C("spec:est-bomb", "estimate", "{d}/spec/bomb.yaml", "--hw", "h100-sxm5-80gb"))
    for f in ("bw", "flops", "mem", "nan", "inf", "1e400", "neg", "bare", "nanbare", "year",
              "utf16", "binary", "deep", "bomb", "model-huge", "long-id"):
        cases.append(C(f"catalog:{f}", "hw", "list", "--catalog", f"{{d}}/cat-{f}"))
    cases.append(C("catalog:deepdirs", "hw", "list", "--catalog", "{d}/cat-deepdirs",
                   expect=ANY))
    cases.append(C("catalog:loop-ok", "hw", "list", "--catalog", "{d}/cat-loop", expect=ANY))
    cases.append(C("catalog:ok", "hw", "show", "my-npu", "--catalog", "{d}/cat-ok", expect=OK))
    cases.append(C("catalog:model", "models", "show", "tiny-cat-model", "--catalog",
                   "{d}/cat-model", expect=OK))
    cases.append(C("catalog:empty", "hw", "list", "--catalog", "{d}/cat-empty", expect=OK))
    cases.append(C("catalog:file", "hw", "list", "--catalog", "{d}/cat-file"))
    cases.append(C("catalog:missing", "hw", "list", "--catalog", "{d}/nope"))
    cases.append(C("catalog:root", "hw", "list", "--catalog", "/"))
    cases.append(C("catalog:proc", "hw", "list", "--catalog", "/proc", expect=ANY))
    cases.append(C("catalog:est-bw", "estimate", "llama-3.1-8b", "--hw", "my-npu",
                   "--catalog", "{d}/cat-bw"))
    for f in ("bad", "utf16", "deep"):
        cases.append(C(f"cluster-yaml:{f}", "estimate", "llama-3.1-8b", "--cluster",
                       f"{{d}}/sys/{f}.yaml"))
    cases.append(C("cluster-yaml:missing", "estimate", "llama-3.1-8b", "--cluster",
                   "{d}/sys/none.yaml"))
    # a bad row of a run file is skipped with its reason; the file as a whole still scores
    for f in ("neg", "1e400", "nan", "inf", "zero", "mfu-big", "dev0", "dev-neg", "dev-1e400",
              "dev-huge", "dev-frac", "seq-huge", "batch0", "layers-huge", "hidden-nan",
              "tp-huge"):
        cases.append(C(f"validate:{f}", "validate", "--cases", f"{{d}}/val/{f}.csv",
                       expect=ANY, says="1 skipped"))
    for f in ("empty", "header", "utf16", "latin1", "binary", "unknown-header", "ragged",
              "quote", "huge-cell", "nul"):
        cases.append(C(f"validate:{f}", "validate", "--cases", f"{{d}}/val/{f}.csv"))
    cases.append(C("validate:deep.yaml", "validate", "--cases", "{d}/val/deep.yaml"))
    cases.append(C("validate:nan.yaml", "validate", "--cases", "{d}/val/nan.yaml", expect=ANY,
                   says="1 skipped"))
    for layout, column, values in (("inference", "metric_value", ("-5", "1e400", "nan", "0")),
                                   ("inference", "num_devices", ("0", "-1", "1e400", "2.5")),
                                   ("training", "num_devices", ("0", "1e400")),
                                   ("matmul", "measured_value", ("-1", "1e400", "inf"))):
        for v in values:
            cases.append(C(f"validate:{layout}:{column}={v}", "validate", "--cases",
                           f"{{d}}/val/{layout}-{column}-{v}.csv", expect=ANY,
                           says="1 skipped"))
    cases.append(C("validate:disagg-no-pools", "validate", "--cases",
                   "{d}/val/disagg-no-pools.yaml", expect=ANY, says="1 skipped"))
    cases.append(C("validate:ok", "validate", "--cases", "{d}/val/ok.csv", expect=OK))
    cases.append(C("validate:ok.yaml", "validate", "--cases", "{d}/val/ok.yaml", expect=OK))
    cases.append(C("validate:txt", "validate", "--cases", "{d}/val/txt.txt"))
    cases.append(C("validate:missing", "validate", "--cases", "{d}/val/none.csv"))
    cases.append(C("validate:dir", "validate", "--cases", "{d}/val"))
    cases.append(C("validate:none", "validate"))
    cases.append(C("validate:devnull", "validate", "--cases", "/dev/null"))
    trace = ("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--scenario", "server")
    for f in ("nan.csv", "inf.csv", "neg.csv", "huge-len.csv", "1e400.csv", "empty.csv",
              "header.csv", "utf16.csv", "binary.csv", "deep.jsonl", "nan.jsonl", "list.jsonl",
              "none.csv"):
        cases.append(C(f"trace:{f}", *trace, "--trace", f"{{d}}/trace/{f}"))
    cases.append(C("trace:ok", *trace, "--trace", "{d}/trace/ok.csv", expect=OK))
    cases.append(C("trace:ok.jsonl", *trace, "--trace", "{d}/trace/ok.jsonl", expect=OK))
    for f in ("nan", "inf", "1e400", "tp-neg", "tp-huge", "tp-str", "tp-float", "nodes-huge",
              "model-unknown", "acc-unknown", "kind", "job-list", "plans-empty", "deep",
              "utf16", "binary", "empty", "list", "recompute", "none"):
        cases.append(C(f"export:{f}", "export", "megatron", "--from", f"{{d}}/plan/{f}.json",
                       "--out", "{d}/out"))
    cases.append(C("export:ok", "export", "megatron", "--from", "{d}/plan/ok.json", "--out",
                   "{d}/out", expect=OK))
    cases.append(C("export:bad-format", "export", "nosuch", "--from", "{d}/plan/ok.json",
                   "--out", "{d}/out"))
    cases.append(C("export:out-is-file", "export", "megatron", "--from", "{d}/plan/ok.json",
                   "--out", "{d}/cfg/ok.json"))
    cases.append(C("export:no-from", "export", "megatron"))
    cases.append(C("export:--list", "export", "--list", expect=OK))
    for f in ("corrupt-profile", "nan-profile", "list-profile"):
        cases.append(C(f"db:{f}:list", "measure", "list", "--db", f"{{d}}/db/{f}.sqlite",
                       expect=ANY))
        cases.append(C(f"db:{f}:use", "estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
                       "--profile", "bad", "--db", f"{{d}}/db/{f}.sqlite"))
        cases.append(C(f"db:{f}:export", "measure", "export", "--out", "{d}/out/m.json",
                       "--db", f"{{d}}/db/{f}.sqlite", expect=ANY))
    cases.append(C("db:corrupt-env:show", "measure", "show", "r1", "--db",
                   "{d}/db/corrupt-env.sqlite"))
    cases.append(C("db:corrupt-env:calibrate", "calibrate", "--hw", "h100-sxm5-80gb", "--db",
                   "{d}/db/corrupt-env.sqlite"))
    for f in ("text", "empty"):
        cases.append(C(f"db:{f}", "measure", "list", "--db", f"{{d}}/db/{f}.sqlite",
                       expect=ANY if f == "empty" else ERR))
    cases.append(C("db:dir", "measure", "list", "--db", "{d}/db"))
    cases.append(C("db:devnull", "measure", "list", "--db", "/dev/null"))
    cases.append(C("db:profile-missing", "estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
                   "--profile", "nope", "--db", "{d}/db/m.sqlite"))
    cases.append(C("db:show-missing", "measure", "show", "nope", "--db", "{d}/db/m.sqlite"))
    cases.append(C("db:export-fmt", "measure", "export", "--out", "{d}/out/m.x", "--format",
                   "xml", "--db", "{d}/db/m.sqlite"))
    cases.append(C("db:export-dir", "measure", "export", "--out", "{d}/out", "--db",
                   "{d}/db/m.sqlite"))
    cases.append(C("db:list-kind", "measure", "list", "--kind", "bogus", "--db",
                   "{d}/db/m.sqlite"))
    cases.append(C("db:calibrate-empty", "calibrate", "--hw", "h100-sxm5-80gb", "--db",
                   "{d}/db/m.sqlite"))
    return cases


def _lookups() -> list[Case]:
    cases: list[Case] = []
    for q in ("", " ", ".*", "*", "%", "?", "h", "x", "64x", "nvidia", "\x00", "🚀", "h100\n",
              "h10O", "-h100", "--", "../../etc/passwd", LONG, "h100" * 60):
        cases.append(C(f"hw-show={q[:10]!r}", "hw", "show", q))
    cases.append(C("hw-show=cyrillic", "hw", "show", "\u041d100"))  # Cyrillic Н
    cases.append(C("hw-show=cyr-a100", "hw", "show", "\u0430100-sxm4-80gb"))  # Cyrillic а
    cases.append(C("hw-show=fullwidth", "hw", "show", "ｈ１００－ｓｘｍ５－８０ｇｂ", expect=ANY))
    cases.append(C("hw-show=ok", "hw", "show", "h100-sxm5-80gb", expect=OK))
    cases.append(C("hw-show=upper", "hw", "show", "H100-SXM5-80GB", expect=OK,
                   says="h100-sxm5-80gb"))
    cases.append(C("hw-show=words", "hw", "show", "mi300x", expect=OK))
    cases.append(C("hw-show=system", "hw", "show", "dgx-h100", expect=OK))
    cases.append(C("hw-show=h100", "hw", "show", "h100"))
    cases.append(C("hw-compare=bad", "hw", "compare", "h100-sxm5-80gb", "nosuchchip"))
    cases.append(C("hw-compare=long", "hw", "compare", LONG))
    cases.append(C("hw-compare=dup", "hw", "compare", "mi300x", "mi300x", expect=ANY))
    for opt, val in (("--class", "bogus"), ("--class", ""), ("--sort", "bogus"),
                     ("--sort", LONG), ("--class", LONG)):
        cases.append(C(f"hw-list{opt}={val[:8]}", "hw", "list", opt, val))
    cases.append(C("hw-list-vendor=nomatch", "hw", "list", "--vendor", "zzzz", expect=ANY))
    cases.append(C("hw-list-vendor=long", "hw", "list", "--vendor", LONG, expect=ANY))
    cases.append(C("hw-list=ok", "hw", "list", expect=OK))
    for q in ("", " ", ".*", "llama", "lIama-3.1-8b", "x", LONG_MODEL, "\x00",
              "gpt", "ll\u0430ma-3.1-8b", "../../etc/passwd", "a/b/c", "🦙"):
        cases.append(C(f"models-show={q[:10]!r}", "models", "show", q))
    cases.append(C("models-show=ok", "models", "show", "llama-3.1-8b", expect=OK))
    cases.append(C("models-show=alias", "models", "show", "llama3.1-8b", expect=OK))
    cases.append(C("models-list=family", "models", "list", "--family", LONG, expect=ANY))
    cases.append(C("models-list=ok", "models", "list", expect=OK))
    cases.append(C("cluster=64xdgx-h100", "estimate", "llama-3.1-8b", "--cluster",
                   "64xdgx-h100", "--tp", "8", expect=OK))
    cases.append(C("cluster=4-slices", "estimate", "llama-3.1-8b", "--cluster",
                   "4xtpu-v5p-12288", expect=OK, says="4 x Google TPU v5p"))
    for q in ("64x", "x64", "0xH100", "-1xH100", "99999999999999xH100", "64xH1OO",
              "8x8x8xh100", "dgx", "1e3xH100", "64xH100xH100", "", "x",
              "64 x", "64x" + LONG, "2x\u041d100", "1000000000xh100-sxm5-80gb"):
        cases.append(C(f"cluster={q[:14]!r}", "estimate", "llama-3.1-8b", "--cluster", q))
    cases.append(C("cluster=ok", "estimate", "llama-3.1-8b", "--cluster", "dgx-h100", "--tp",
                   "8", expect=OK))
    cases.append(C("cluster=64xH100", "estimate", "llama-3.1-8b", "--cluster", "64xH100",
                   "--tp", "8", expect=OK, says="h100-sxm5-80gb"))
    for q in ("", ".*", LONG, "\u041d100-sxm5-80gb", "tpu"):
        cases.append(C(f"est-hw={q[:10]!r}", "estimate", "llama-3.1-8b", "--hw", q))
    # a model number's variants: the one systems are built of, said (as compare and clusters)
    cases.append(C("est-hw='h100'", "estimate", "llama-3.1-8b", "--hw", "h100", expect=OK,
                   says="→ h100-sxm5-80gb"))
    cases.append(C("est-hw=amd-mi300x", "estimate", "llama-3.1-8b", "--hw", "AMD MI300X",
                   expect=OK, says="→ mi300x"))
    cases.append(C("models-show=prefix", "models", "show", "llama-3.1-8", expect=ANY,
                   says="→ llama-3.1-8b"))
    cases.append(C("plan-hw=trailing-comma", "plan", "llama-3.1-8b", "--hw", "h100-sxm5-80gb,",
                   "--train", "--top", "1", expect=ANY))
    for q in ("", ".*", ",,", "h100-sxm5-80gb,nosuch", LONG):
        cases.append(C(f"plan-hw={q[:10]!r}", "plan", "llama-3.1-8b", "--hw", q, "--train"))
    for q in ("nosuch", "", ".*", "h100-sxm5-80gb,nosuch"):
        cases.append(C(f"compare-hw={q[:10]!r}", "compare", "llama-3.1-8b", "--hw", q))
    cases.append(C("compare-class=bogus", "compare", "llama-3.1-8b", "--class", "bogus"))
    cases.append(C("measure-hw=nosuch", "measure", "matmul", "--hw", "nosuch", "--db",
                   "{d}/db/m.sqlite"))
    cases.append(C("calibrate-hw=nosuch", "calibrate", "--hw", "nosuch", "--db",
                   "{d}/db/m.sqlite"))
    cases.append(C("calibrate-hw=long", "calibrate", "--hw", LONG, "--db", "{d}/db/m.sqlite"))
    return cases


def _choices() -> list[Case]:
    """Closed vocabularies and combinations that make no sense."""
    est = ("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb")
    cases = [
        C("tp-one-device", *est, "--tp", "2"),
        C("pp-one-device", *est, "--pp", "2"),
        C("tp-train-one-device", *est, "--train", "--tp", "2"),
        C("ep-dense", *est, "--ep", "2", expect=ANY, says="experts"),
        C("train-framework-vllm", *est, "--train", "--framework", "vllm"),
        C("serve-framework-megatron", *est, "--framework", "megatron", expect=ANY),
        C("framework-bogus", *est, "--framework", "bogus"),
        C("framework-long", *est, "--framework", LONG),
        C("dtype-bogus", *est, "--dtype", "fp7"),
        C("weights-bogus", *est, "--weights", "int3"),
        C("weights-long", *est, "--weights", LONG),
        C("kv-bogus", *est, "--kv", "int2"),
        C("optimizer-bogus", *est, "--train", "--optimizer", "sgdd"),
        C("recompute-bogus", *est, "--train", "--recompute", "partial"),
        C("schedule-bogus", *est, "--train", "--schedule", "zigzag"),
        C("scenario-bogus", *est, "--scenario", "party"),
        C("lengths-bogus", *est, "--scenario", "offline", "--lengths", "gaussian"),
        C("finetune-bogus", *est, "--train", "--finetune", "prefix"),
        C("finetune-serve", *est, "--finetune", "lora"),
        C("lora-targets-bogus", *est, "--train", "--finetune", "lora", "--lora-targets", "xyz"),
        C("zero-4", *est, "--train", "--zero", "4"),
        C("rate-train", *est, "--train", "--rate", "5"),
        C("draft-train", *est, "--train", "--draft", "llama-3.2-1b", "--accept", "0.7"),
        C("draft-no-accept", *est, "--draft", "llama-3.2-1b"),
        C("draft-unknown", *est, "--draft", "nosuch", "--accept", "0.7"),
        C("disagg-batch", *est, "--disaggregate", "1:1"),
        C("prefill-tp-alone", *est, "--prefill-tp", "2"),
        C("first-stage-no-pp", *est, "--train", "--first-stage-layers", "1000", expect=ANY,
          says="first stage"),
        C("micro-gt-batch", *est, "--train", "--batch", "2", "--micro-batch", "4",
          expect=ANY),
        C("roofline-phase", "roofline", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--phase",
          "sing"),
        C("roofline-nohw", "roofline", "llama-3.1-8b"),
        C("roofline-ok", "roofline", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", expect=OK),
        C("estimate-ok", *est, expect=OK),
        C("estimate-hw-and-cluster", *est, "--cluster", "dgx-h100"),
        C("estimate-nohw", "estimate", "llama-3.1-8b"),
        C("estimate-train-ok", *est, "--train", "--batch", "4", expect=OK),
        C("estimate-devices-ok", *est, "--devices", "8", "--tp", "8", expect=OK),
        C("estimate-devices-no-hw", "estimate", "llama-3.1-8b", "--devices", "8"),
        C("estimate-huge-devices", *est, "--devices", "1000000000000"),
        C("estimate-moe-imbalance-inf", "estimate", "mixtral-8x7b", "--hw", "h100-sxm5-80gb",
          "--moe-imbalance", "inf"),
        C("requests-huge", *est, "--scenario", "offline", "--requests", "1000000000000"),
        C("prompt-huge", *est, "--prompt", "1000000000000"),
        C("batch-huge", *est, "--batch", "1000000000000"),
        C("output-huge", *est, "--output", "1000000000000"),
        C("seq-huge-train", *est, "--train", "--seq", "1000000000000"),
        C("seed-huge", *est, "--scenario", "offline", "--requests", "20", "--seed",
          "99999999999999999999999", expect=ANY),
        C("plan-objective-latency-train", "plan", "llama-3.1-8b", "--cluster",
          "8xh100-sxm5-80gb", "--train", "--objective", "latency"),
        C("plan-framework-vllm-train", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
          "--train", "--framework", "vllm"),
        C("plan-framework-megatron-serve", "plan", "llama-3.1-8b", "--cluster",
          "8xh100-sxm5-80gb", "--serve", "--framework", "megatron"),
        C("plan-objective-bogus", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
          "--objective", "fun"),
        C("plan-export-bogus", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
          "--train", "--top", "1", "--export", "nosuch"),
        C("plan-no-cluster", "plan", "llama-3.1-8b"),
        C("plan-hw-and-cluster", "plan", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--cluster",
          "dgx-h100"),
        C("plan-devices-huge", "plan", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--devices",
          "1000000000000", "--train"),
        C("plan-deadline-no-tokens", "plan", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
          "--train", "--deadline", "30d"),
        C("plan-ok", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb", "--train",
          "--top", "1", expect=OK),
        C("plan-gbt-small-seq", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
          "--train", "--top", "1", "--global-batch-tokens", "4K", "--seq", "8192"),
        C("compare-objective-bogus", "compare", "llama-3.1-8b", "--objective", "fun"),
        C("compare-train-framework-vllm", "compare", "llama-3.1-8b", "--train", "--framework",
          "vllm", "--hw", "h100-sxm5-80gb"),
        C("compare-serve-objective-mfu", "compare", "llama-3.1-8b", "--objective", "mfu",
          "--hw", "h100-sxm5-80gb", expect=ANY),
        C("compare-precision-bogus", "compare", "llama-3.1-8b", "--precision", "fp7"),
        C("compare-precision-and-best", "compare", "llama-3.1-8b", "--precision", "fp8",
          "--best-precision", expect=ANY),
        C("compare-devices-and-budget", "compare", "llama-3.1-8b", "--devices", "8",
          "--budget-usd-h", "100", expect=ANY),
        C("compare-ok", "compare", "llama-3.1-8b", "--hw", "h100-sxm5-80gb,mi300x", expect=OK),
        C("compare-gbt-bad", "compare", "llama-3.1-8b", "--train", "--global-batch-tokens",
          "1", "--hw", "h100-sxm5-80gb"),
        C("measure-matmul-as-h100", "measure", "matmul", "--hw", "h100-sxm5-80gb", "--budget",
          "0.2", "--db", "{d}/db/m.sqlite"),
        C("measure-bw-as-h100", "measure", "bandwidth", "--hw", "h100-sxm5-80gb", "--budget",
          "0.2", "--db", "{d}/db/m.sqlite"),
        C("measure-overhead-as-h100", "measure", "overhead", "--hw", "h100-sxm5-80gb", "--db",
          "{d}/db/m.sqlite"),
        C("measure-dtype-bogus", "measure", "matmul", "--dtype", "fp7", "--db",
          "{d}/db/m.sqlite"),
        C("measure-device-bogus", "measure", "matmul", "--device", "quantum", "--db",
          "{d}/db/m.sqlite"),
        C("measure-device-cuda", "measure", "matmul", "--device", "cuda:99", "--db",
          "{d}/db/m.sqlite"),
        C("measure-backend-bogus", "measure", "matmul", "--backend", "jax", "--db",
          "{d}/db/m.sqlite"),
        C("measure-kernel-bogus", "measure", "bandwidth", "--kernel", "scatter", "--db",
          "{d}/db/m.sqlite"),
        C("measure-coll-ops", "measure", "collectives", "--ops", "broadcast_all", "--db",
          "{d}/db/m.sqlite"),
        C("measure-matmul-ok", "measure", "matmul", "--budget", "0.2", "--dtype", "fp32",
          "--reps", "1", "--db", "{d}/db/ok.sqlite", expect=OK),
        C("calibrate-name-long", "calibrate", "--name", LONG, "--db", "{d}/db/m.sqlite"),
        C("measure-list-ok", "measure", "list", "--db", "{d}/db/m.sqlite", expect=OK),
        C("validate-local-bogus-model", "validate", "--local", "nosuch"),
        C("validate-local-scale", "validate", "--local", "gpt3-125m", "--scale", "huge"),
        C("validate-local-dtype", "validate", "--local", "gpt3-125m", "--dtype", "fp7"),
        C("validate-local-device", "validate", "--local", "gpt3-125m", "--device", "quantum"),
        C("validate-local-and-cases", "validate", "--local", "gpt3-125m", "--cases",
          "{d}/val/ok.csv"),
        C("validate-local-huge-model", "validate", "--local", "{d}/cfg/layers.json"),
        C("validate-local-405b-full", "validate", "--local", "llama-3.1-405b", "--scale",
          "full", "--hw", "epyc-9654", "--device", "cpu"),
        C("measure-coll-nproc-64", "measure", "collectives", "--nproc", "64", "--db",
          "{d}/db/m.sqlite"),
        C("disagg-auto-too-many-requests", "estimate", "llama-3.1-8b", "--cluster", "dgx-h100",
          "--scenario", "server", "--rate", "4", "--slo-ttft", "2s", "--requests", "100000",
          "--disaggregate", "auto"),
        C("unknown-command", "frobnicate"),
        C("unknown-option", "hw", "list", "--frob"),
        C("no-args", expect=OK),
        C("version", "version", expect=OK),
    ]
    return cases


def _more() -> list[Case]:
    """A second wave: options and combinations the first tables do not reach."""
    est = ("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb")
    srv = (*est, "--scenario", "server", "--requests", "50")
    db = ("--db", "{d}/db/m.sqlite")
    return [
        C("hw-compare=many", "hw", "compare", *(["h100-sxm5-80gb"] * 30), expect=ANY),
        C("hw-compare=system", "hw", "compare", "dgx-h100", expect=ANY),
        C("hw-compare=empty", "hw", "compare", ""),
        C("hw-systems=extra-arg", "hw", "systems", "x"),
        C("hw-list=json", "hw", "list", "--json", expect=OK),
        C("models-import=name-long", "models", "import", "{d}/cfg/ok.json", "--name", LONG,
          expect=ANY),
        C("models-import=name-empty", "models", "import", "{d}/cfg/ok.json", "--name", "",
          expect=ANY),
        C("models-import=out-dir", "models", "import", "{d}/cfg/ok.json", "--out", "{d}/cfg"),
        C("models-import=out-proc", "models", "import", "{d}/cfg/ok.json", "--out",
          "/proc/accelmap.yaml"),
        C("models-import=out-ok", "models", "import", "{d}/cfg/ok.json", "--out",
          "{d}/out/m.yaml", expect=OK),
        C("export=serve-plan-to-megatron", "export", "megatron", "--from",
          "{d}/plan/serve.json", "--out", "{d}/out"),
        C("export=train-plan-to-vllm", "export", "vllm", "--from", "{d}/plan/ok.json", "--out",
          "{d}/out"),
        C("export=index-out-of-range", "export", "megatron", "--from", "{d}/plan/ok.json",
          "--index", "5", "--out", "{d}/out"),
        C("export=out-proc", "export", "megatron", "--from", "{d}/plan/ok.json", "--out",
          "/proc/accelmap"),
        C("export=deepspeed-ok", "export", "deepspeed", "--from", "{d}/plan/ok.json", "--out",
          "{d}/out/ds", expect=OK),
        C("plan=export-out-file", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
          "--train", "--top", "1", "--export", "megatron", "--out", "{d}/cfg/ok.json"),
        C("compare=class-empty", "compare", "llama-3.1-8b", "--class", ""),
        C("compare=int4-train", "compare", "llama-3.1-8b", "--train", "--precision", "int4"),
        C("compare=tiny-budget", "compare", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
          "--budget-usd-h", "1e-9", expect=ANY),
        C("compare=huge-budget", "compare", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
          "--budget-usd-h", "1e12", expect=ANY),
        C("estimate=group-3", *est, "--weights", "int4", "--group", "3", expect=ANY),
        C("estimate=fp4-on-h100", *est, "--weights", "fp4", expect=ANY),
        C("estimate=kv-int4", *est, "--kv", "int4", expect=ANY),
        C("estimate=qlora-huge-rank", *est, "--train", "--finetune", "qlora", "--lora-rank",
          "1000000", expect=ANY),
        C("estimate=seq-1e9-train", *est, "--train", "--seq", "1000000000", expect=ANY),
        C("estimate=rate-tiny", *srv, "--rate", "1e-9", expect=ANY),
        C("estimate=rate-zero", *srv, "--rate", "0"),
        C("estimate=rate-neg", *srv, "--rate", "-3"),
        C("estimate=spread-100", *est, "--scenario", "offline", "--requests", "50",
          "--lengths", "lognormal", "--spread", "100", expect=ANY),
        C("estimate=max-tokens-1", *est, "--scenario", "offline", "--requests", "50",
          "--max-tokens", "1", expect=ANY),
        C("estimate=draft-bigger", *est, "--draft", "llama-3.1-70b", "--accept", "0.7",
          expect=ANY),
        C("estimate=draft-nan-config", *est, "--draft", "{d}/cfg/nan.json", "--accept", "0.7"),
        C("estimate=accept-0.999999", *est, "--draft", "llama-3.2-1b", "--accept", "0.999999",
          expect=ANY),
        C("estimate=disagg-odd-tp", "estimate", "llama-3.1-8b", "--cluster", "dgx-h100",
          "--scenario", "server", "--rate", "2", "--requests", "50", "--disaggregate", "1:1",
          "--prefill-tp", "3", "--decode-tp", "3", expect=ANY),
        C("estimate=disagg-ep-not-dividing-experts", "estimate", "deepseek-v3", "--cluster",
          "2xdgx-h100", "--weights", "fp8", "--scenario", "server", "--rate", "2",
          "--requests", "20", "--disaggregate", "1:1", "--prefill-tp", "8", "--decode-tp", "8",
          "--prefill-ep", "3"),
        C("estimate=decode-ep-alone", "estimate", "qwen3-30b-a3b", "--hw", "h100-sxm5-80gb",
          "--serve", "--decode-ep", "2"),
        C("estimate=disagg-too-big", "estimate", "llama-3.1-8b", "--cluster", "dgx-h100",
          "--scenario", "server", "--rate", "2", "--requests", "50", "--disaggregate", "8:8",
          "--prefill-tp", "8", "--decode-tp", "8", expect=ANY),
        C("estimate=trace-and-rate", *est, "--scenario", "server", "--rate", "2", "--trace",
          "{d}/trace/ok.csv", expect=ANY),
        C("estimate=trace-offline", *est, "--scenario", "offline", "--trace",
          "{d}/trace/ok.csv", expect=ANY),
        C("estimate=zero-3-serve", *est, "--zero", "3", expect=ANY),
        C("estimate=vpp-no-pp", "estimate", "llama-3.1-8b", "--cluster", "dgx-h100", "--train",
          "--vpp", "4", expect=ANY),
        C("estimate=dp-mismatch", "estimate", "llama-3.1-8b", "--cluster", "dgx-h100",
          "--train", "--dp", "3", expect=ANY),
        C("estimate=tp-across", "estimate", "llama-3.1-70b", "--cluster", "2xdgx-h100",
          "--train", "--tp", "16", "--batch", "64", expect=ANY),
        C("roofline=train-huge-batch", "roofline", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
          "--phase", "train", "--batch", "1000000000", expect=ANY),
        C("roofline=output-0-decode", "roofline", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
          "--phase", "decode", "--output", "0", expect=ANY),
        C("measure-show=empty", "measure", "show", "", *db),
        C("measure-show=percent", "measure", "show", "%", *db),
        C("measure-show=long", "measure", "show", LONG, *db),
        C("measure-export=proc", "measure", "export", "--out", "/proc/accelmap.json",
          "--db", "{d}/db/ok.sqlite"),
        C("measure-export=upper-csv", "measure", "export", "--out", "{d}/out/m.csv",
          "--format", "CSV", "--db", "{d}/db/ok.sqlite", expect=ANY),
        C("measure-list=db-empty-path", "measure", "list", "--db", ""),
        C("measure-list=db-in-missing-dir", "measure", "list", "--db",
          "{d}/no/such/dir/m.sqlite", expect=ANY),
        C("calibrate=local-empty", "calibrate", "--hw", "local", "--db", "{d}/db/empty2.sqlite"),
        C("calibrate=no-hw-empty", "calibrate", "--db", "{d}/db/empty3.sqlite"),
        C("models-show=seq-over-max", "models", "show", "gpt3-125m", "--seq", "1000000",
          expect=ANY),
        C("models-list=family-empty", "models", "list", "--family", "", expect=ANY),
        C("validate=cases-twice", "validate", "--cases", "{d}/val/ok.csv", "--cases",
          "{d}/val/ok.csv", expect=ANY),
        C("validate=show-skipped", "validate", "--cases", "{d}/val/neg.csv", "--show-skipped",
          expect=ANY),
        C("plan=deadline-long", "plan", "llama-3.2-1b", "--hw", "h100-sxm5-80gb",
          "--train", "--tokens", "1T", "--deadline", "520w", "--top", "1", expect=ANY),
        C("plan=serve-gbt", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb", "--serve",
          "--top", "1", "--global-batch-tokens", "1", expect=ANY),
        C("plan=include-tight-offload", "plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb",
          "--train", "--top", "1", "--include-tight", "--offload", expect=OK),
        C("plan=list-serve", "plan", "llama-3.1-8b", "--hw", "h100-sxm5-80gb,MI300X", "--serve",
          "--top", "1", expect=ANY),
        C("help=estimate", "estimate", "--help", expect=OK),
        C("help=unknown-sub", "measure", "nonsense"),
        C("args=double-dash", "estimate", "--", "llama-3.1-8b", "--hw", "h100-sxm5-80gb",
          expect=ANY),
        C("args=option-twice", *est, "--batch", "2", "--batch", "3", expect=ANY),
        C("args=bool-with-value", *est, "--flash=maybe"),
        *_held_out(),
        *_reports(),
    ]


def _reports() -> list[Case]:
    """`report FILE` on damaged saved results (issue 27: internal errors on the CLI's path)."""
    out = ("--out", "{d}/report.html")
    ok = {"ok", "no-job", "model-unknown"}  # drawn, with what could not be re-estimated said
    cases = [C(f"report=result-{n}", "report", f"{{d}}/result/{n}.json", *out,
               expect=OK if n in ok else ANY if n == "tp-zero" else ERR)
             for n in _damaged_results()]
    cases += [C(f"report=plan-file-{n}", "report", f"{{d}}/plan/{n}.json", *out)
              for n in ("deep", "binary", "utf16", "nan", "1e400", "ok")]
    return [*cases, C("report=folder", "report", "{d}/plan", *out),
            C("report=out-not-html", "report", "{d}/result/ok.json", "--out", "{d}/report.txt")]


def _held_out() -> list[Case]:
    """Issue 27's held-out cases: impossible deadlines, sequences past the model's context,
    configs missing a size key (a closed stdout is tests/cli/test_bad_inputs.py's)."""
    h100 = ("--cluster", "8xh100-sxm5-80gb")
    return [
        C("plan=deadline-impossible", "plan", "llama-3.1-8b", *h100, "--train", "--tokens",
          "1T", "--deadline", "1s"),
        C("plan=deadline-impossible-70b", "plan", "llama-3.1-70b", "--hw", "h100-sxm5-80gb",
          "--train", "--tokens", "15T", "--deadline", "1h"),
        C("plan=serve-prompt-over-context", "plan", "llama-3.1-8b", *h100, "--serve",
          "--prompt", "1000000"),
        C("plan=batch-prompt-over-context", "plan", "llama-3.1-8b", *h100, "--serve",
          "--scenario", "batch", "--prompt", "131000", "--output", "1000"),
        C("plan=server-prompt-over-context", "plan", "llama-3.1-8b", *h100, "--serve",
          "--rate", "1", "--prompt", "200000"),
        C("estimate=serve-prompt-over-context", "estimate", "llama-3.1-8b", "--hw",
          "h100-sxm5-80gb", "--serve", "--prompt", "300000"),
        C("estimate=serve-context-extended", "estimate", "llama-3.1-8b", "--hw",
          "h100-sxm5-80gb", "--serve", "--prompt", "140000", "--set", "context=140128",
          expect=OK),
        C("estimate=train-seq-over-context", "estimate", "gpt3-125m", "--hw",
          "h100-sxm5-80gb", "--train", "--seq", "4096", expect=OK, says="context of 2,048"),
        C("plan=train-seq-over-context", "plan", "gpt3-125m", *h100, "--train", "--seq",
          "4096", "--top", "1", expect=OK, says="context of 2,048"),
        C("models-show=seq-over-context-warns", "models", "show", "llama-3.1-8b", "--seq",
          "300000", expect=OK, says="context of 131,072"),
        C("models-import=no-layers", "models", "import", "{d}/cfg/no-layers.json"),
        C("models-show=no-heads", "models", "show", "{d}/cfg/no-heads.json"),
        C("estimate=cfg-no-layers", "estimate", "{d}/cfg/no-layers.json", "--hw",
          "h100-sxm5-80gb"),
        C("models-show=default-said", "models", "show", "{d}/cfg/no-context.json",
          expect=OK, says="max_position_embeddings=2048"),
        C("plan=quantization-needs-serve", "plan", "llama-3.1-8b", *h100, "--train",
          "--allow-quantization"),
        C("plan=serve-16-bit-said", "plan", "llama-3.1-8b", *h100, "--serve", "--scenario",
          "batch", "--top", "1", expect=OK, says="--allow-quantization adds"),
    ]


# --- a generated table: every option of every command, fed each of a set of odd values ----------
# Valid or not, each must get exit 0 or one clear error line: expect ANY (the hand-written
# cases above say which inputs must be refused).
TABLE_BASE = {
    "estimate": ("estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb"),
    "roofline": ("roofline", "llama-3.1-8b", "--hw", "h100-sxm5-80gb"),
    "plan": ("plan", "llama-3.1-8b", "--cluster", "8xh100-sxm5-80gb", "--top", "1"),
    "compare": ("compare", "llama-3.1-8b", "--hw", "h100-sxm5-80gb,mi300x"),
    "export": ("export", "megatron", "--from", "{d}/plan/ok.json", "--out", "{d}/out/e"),
    "validate": ("validate", "--cases", "{d}/val/ok.csv"),
    "calibrate": ("calibrate", "--db", "{d}/db/ok.sqlite"),
    "hw list": ("hw", "list"), "hw show": ("hw", "show", "h100-sxm5-80gb"),
    "hw compare": ("hw", "compare", "h100-sxm5-80gb"), "hw systems": ("hw", "systems"),
    "models list": ("models", "list"), "models show": ("models", "show", "llama-3.1-8b"),
    "models import": ("models", "import", "{d}/cfg/ok.json"),
    "measure list": ("measure", "list", "--db", "{d}/db/ok.sqlite"),
    "measure show": ("measure", "show", "x", "--db", "{d}/db/ok.sqlite"),
    "measure export": ("measure", "export", "--out", "{d}/out/x.json", "--db",
                       "{d}/db/ok.sqlite"),
    "measure matmul": ("measure", "matmul", "--budget", "0.2", "--dtype", "fp32", "--reps", "1",
                       "--db", "{d}/db/x.sqlite"),
    "measure bandwidth": ("measure", "bandwidth", "--budget", "0.2", "--kernel", "copy", "--size",
                          "8 MiB", "--reps", "1", "--db", "{d}/db/x.sqlite"),
    "measure overhead": ("measure", "overhead", "--reps", "1", "--db", "{d}/db/x.sqlite"),
}
TABLE_VALUES = ("", " ", "-1", "0", "nan", "inf", "1e400", "99999999999999999999", "abc",
                "x" * 3000, "ü", "../../etc/passwd", "/dev/zero", "1.5")
TABLE_SKIP = {"--help", "--json", "--db", "--catalog", "--out"}


def option_table(values: tuple[str, ...] = TABLE_VALUES) -> list[Case]:
    """Every non-flag option of the commands in TABLE_BASE (read from the live CLI) with each
    of ``values``."""
    import typer

    from accelmap.cli.app import app

    root = typer.main.get_command(app)
    cases = []
    for key, base in TABLE_BASE.items():
        cmd = root
        for word in key.split():
            cmd = cmd.commands[word]  # type: ignore[attr-defined]
        for p in cmd.params:
            opts = [o for o in getattr(p, "opts", []) if o.startswith("--")]
            if not opts or opts[0] in TABLE_SKIP or getattr(p, "is_flag", False):
                continue
            cases += [Case(f"table {key} {opts[0]}={v[:12]!r}", (*base, opts[0], v), ANY)
                      for v in values]
    return cases


def corpus() -> list[Case]:
    cases = _numbers() + _files() + _lookups() + _choices() + _more()
    ids = Counter(c.id for c in cases)
    dup = [i for i, n in ids.items() if n > 1]
    assert not dup, f"duplicate case ids: {dup[:5]}"
    return cases


# --- running ---------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised in the main thread when a case runs past its time."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    case: Case
    verdict: str  # clear, internal, silent, hang, unclear, refused
    code: int | None
    out: str
    err: str
    seconds: float


VERDICTS = ("clear", "internal", "silent", "hang", "unclear", "refused")


def run(args: list[str], timeout: float = TIMEOUT_S) -> tuple[int | None, str, str, float]:
    """Run ``accelmap ARGS`` in-process; (exit code or None on a hang, stdout, stderr, s)."""
    from accelmap.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    code: int | None = 0
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with _deadline(timeout):
                main(args)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Hang:
            code = None
        except Exception as e:
            err.write(f"Traceback (escaped main): {type(e).__name__}: {e}\n")
            code = 1
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


# a figure that is not a number: 'TPOT nan s', 'inf tokens/s', '"tpot_s": NaN' (a name that
# happens to be 'nan', a file nan.csv or "Infinity Cache" in a description is not one)
_NOT_A_NUMBER = re.compile(
    r"(?<![\w.-])(nan|-?inf)\s?(%|[kMGTPEmuµn]?(s|B|B/s|FLOP/s|OP/s|W|J|Hz)(?![\w])|"
    r"days|tokens|x\b)|\":\s*-?(NaN|Infinity)\b")


def judge(case: Case, code: int | None, out: str, err: str) -> str:
    if code is None:
        return "hang"
    if "internal error" in err or "Traceback" in err or code not in (0, 2):
        return "internal"
    if code == 0:
        if case.expect == ERR or _NOT_A_NUMBER.search(out):
            return "silent"  # refused input accepted, or an answer of NaN/inf ('TPOT nan s')
        if case.says and case.says.lower() not in (out + err).lower():
            return "unclear"
        return "clear"
    if case.expect == OK:
        return "refused"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if len(errors) != 1 or any(len(ln) > MAX_LINE for ln in lines) or len(lines) > 4:
        return "unclear"
    return "clear"


def expand(case: Case, d: Path) -> list[str]:
    return [a.replace("{d}", str(d)) for a in case.args]


@contextlib.contextmanager
def environment(d: Path) -> Iterator[None]:
    """The variables the cases run under: a fresh store, no user catalog, no network."""
    keep = {k: os.environ.get(k) for k in ("ACCELMAP_DB", "ACCELMAP_CATALOG", "COLUMNS",
                                           "HF_HUB_OFFLINE", "ACCELMAP_DEBUG")}
    os.environ.update({"ACCELMAP_DB": str(d / "db" / "default.sqlite"), "COLUMNS": "200",
                       "HF_HUB_OFFLINE": "1"})
    os.environ.pop("ACCELMAP_CATALOG", None)
    os.environ.pop("ACCELMAP_DEBUG", None)
    try:
        yield
    finally:
        for k, v in keep.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_forked(args: list[str], timeout: float = TIMEOUT_S) -> tuple[int | None, str, str, float]:
    """``run`` in a forked child, so that a crash of the interpreter (a C stack overflow in a
    parser) is a finding rather than the end of the tally; a crash reads as exit 139 (internal)."""
    rfd, wfd = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        try:
            res = run(args, timeout)
            data = json.dumps(res).encode()
        except BaseException as e:
            data = json.dumps([1, "", f"Traceback (child): {e!r}", 0.0]).encode()
        with os.fdopen(wfd, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        return 139, "", f"Traceback: the interpreter died (signal {sig})", time.perf_counter() - t0
    code, out, err, s = json.loads(data)
    return code, out, err, s


def run_case(case: Case, d: Path, timeout: float = TIMEOUT_S, isolate: bool = False) -> Outcome:
    code, out, err, s = (run_forked if isolate else run)(expand(case, d), timeout)
    # the fixture folder is the user's path: judged as '{d}', whatever its length here
    out, err = out.replace(str(d), "{d}"), err.replace(str(d), "{d}")
    return Outcome(case, judge(case, code, out, err), code, out, err, s)
