"""HTML reports: which pictures each result gets, the page is self-contained, the CLI's
--report and `accelmap report` write it, and bad paths fail before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("plotly", reason="the web extra is not installed")

from accelmap import api
from accelmap.cli.app import main
from accelmap.errors import InputError
from accelmap.report import kind_of
from accelmap.report.figures import figures, step_groups

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "measurements"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    main([*args, "--json"])
    return json.loads(capsys.readouterr().out)


def ids(rep: api.reports.Report) -> list[str]:
    return [name for name, _ in figures(rep)]


def self_contained(text: str) -> None:
    """No remote script or stylesheet: the file opens from disk with no network."""
    assert not re.search(r"<script[^>]+src=", text)
    assert not re.search(r"<link[^>]+href=\"?https?:", text)
    assert "Plotly.newPlot" in text and len(text) > 1_000_000  # plotly.js inline


@pytest.fixture(scope="module")
def pipelined() -> api.reports.Report:
    spec = api.load_model("llama-3.1-70b")
    system = api.load_system(cluster="64xH100")
    wl = api.training(256, 4096, recompute="full")
    m = api.mapping(system, wl, tp=8, pp=4, vpp=2)
    return api.report_estimate(api.estimate(spec, system, wl, m), system, m,
                               inputs={"tp": 8, "pp": 4})


def test_a_pipelined_estimate_has_every_step_picture(pipelined: api.reports.Report) -> None:
    assert ids(pipelined) == ["roofline", "step-time", "memory", "pipeline"]
    pipe = pipelined.detail["pipeline"]
    assert pipe["schedule"] == "interleaved-1f1b" and pipe["pp"] == 4
    # 2 micro-batches per stage drawn of the step's 256 / dp=2 = 128, each pass per chunk
    assert pipe["micro_batches"] == 8 and pipe["step_micro_batches"] == 128
    assert pipelined.result["micro_batches"] == 128
    assert len(pipe["passes"]) == 4 * 8 * 2 * 2
    roof = pipelined.detail["roofline"]
    assert roof["ridge_flop_per_byte"] == pytest.approx(
        roof["peak_flops"] / roof["bandwidth_bytes_per_s"])


def test_step_groups_sum_to_the_step(pipelined: api.reports.Report) -> None:
    r = pipelined.result
    groups = step_groups(r["time_breakdown_s"])
    assert sum(t for t, _ in groups.values()) == pytest.approx(r["step_time_s"])
    assert {"compute: forward", "compute: backward", "pipeline bubble", "optimizer step",
            "exposed tp communication"} <= set(groups)


def test_html_is_one_offline_file(pipelined: api.reports.Report, tmp_path: Path) -> None:
    out = api.write_report(pipelined, tmp_path / "r.html")
    text = out.read_text(encoding="utf-8")
    self_contained(text)
    assert pipelined.title in text and f"accelmap {api.reports.accelmap_version()}" in text
    for title in ("Roofline", "Step time", "Memory per device", "Pipeline timeline"):
        assert title in text


def test_kinds_are_recognised() -> None:
    assert kind_of({"plans": [], "objective": "throughput"}) == "plan"
    assert kind_of({"rows": [], "summary": {}}) == "validate"
    assert kind_of({"rows": [], "job": {}}) == "compare"
    assert kind_of({"phase": "train", "memory": {}}) == "estimate"
    assert kind_of({"hardware": [], "pareto": {}}) == "hardware"
    assert kind_of({"tried": [], "deadline_s": 1.0}) == "deadline"
    with pytest.raises(InputError, match="not a result accelmap can report"):
        kind_of({"x": 1})


def test_plan_report_marks_the_chosen_plan(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    out = tmp_path / "plan.html"
    main(["plan", "llama-3.1-8b", "--cluster", "8xH100", "--train", "--global-batch-tokens",
          "1M", "--report", str(out), "--json"])
    cap = capsys.readouterr()
    saved = json.loads(cap.out)  # --json stdout stays clean
    assert f"report: {out}" in cap.err
    text = out.read_text(encoding="utf-8")
    self_contained(text)
    assert "chosen plan" in text and "Pareto front" in text and "Ranked plans" in text
    # a saved plan draws the same, its chosen plan re-estimated from job and mapping
    rep = api.report_from_json(saved)
    assert rep.detail["estimate"]["step_time_s"] == pytest.approx(
        saved["plans"][0]["step_time_s"], rel=1e-9)
    assert {"roofline", "step-time", "memory", "pareto"} <= set(ids(rep))


def test_compare_and_validate_reports(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    main(["compare", "llama-3.1-8b", "--hw", "H100,MI300X,L4", "--report",
          str(tmp_path / "c.html")])
    capsys.readouterr()
    assert "Accelerators ranked by" in (tmp_path / "c.html").read_text(encoding="utf-8")
    main(["validate", "--cases", str(CASES / "inference.csv"), "--report",
          str(tmp_path / "v.html")])
    capsys.readouterr()
    text = (tmp_path / "v.html").read_text(encoding="utf-8")
    assert "Predicted vs measured" in text and "p90 abs error" in text


def test_report_command_from_saved_json(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    saved = tmp_path / "est.json"
    saved.write_text(json.dumps(run_json(capsys, "estimate", "llama-3.1-8b", "--hw",
                                         "h100-sxm5-80gb", "--batch", "8")), encoding="utf-8")
    main(["report", str(saved)])
    assert "report: " in capsys.readouterr().err
    text = saved.with_suffix(".html").read_text(encoding="utf-8")
    assert "Serving step time" in text and "Memory per device" in text


@pytest.mark.parametrize(("args", "message"), [
    (["report", "missing.json"], "no such saved --json result: missing.json"),
    (["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--report", "r.txt"],
     "--report r.txt: give a file name ending in .html"),
    (["compare", "llama-3.1-8b", "--report", "no/such/dir/r.html"],
     "--report no/such/dir/r.html: no such folder no/such/dir"),
])
def test_bad_report_input_is_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                      message: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("<html>", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["report", str(bad)])
    assert "not valid JSON" in capsys.readouterr().err
