"""`accelmap serve` and reports without the web extra: one line saying what to install."""

from __future__ import annotations

import pytest

from accelmap import api
from accelmap.cli.app import main


def test_missing_extra_names_the_module_and_the_extra() -> None:
    msg = api.reports.missing_extra("json", "no_such_module_for_accelmap")
    assert msg == ("no_such_module_for_accelmap is not installed: reports and the web app need "
                   "the web extra (pip install 'accelmap[web]')")
    assert api.reports.missing_extra("json") is None


def test_serve_without_the_extra_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(api.reports, "missing_extra", lambda *m: "fastapi is not installed: "
                        "reports and the web app need the web extra (pip install "
                        "'accelmap[web]')")
    with pytest.raises(SystemExit) as e:
        main(["serve"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("error: fastapi is not installed: reports and the web "
                                       "app need the web extra (pip install 'accelmap[web]')\n")


def test_report_without_plotly_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "plotly" else real(name, *a))
    with pytest.raises(SystemExit):
        main(["estimate", "llama-3.1-8b", "--hw", "h100-sxm5-80gb", "--report", "r.html"])
    assert capsys.readouterr().err == ("error: plotly is not installed: reports and the web "
                                       "app need the web extra (pip install 'accelmap[web]')\n")


def test_serve_help_loads_no_web_stack() -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom accelmap.cli.app import main\ntry:\n    main(['serve', '--help'])"
            "\nexcept SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.split('.')[0]"
            " in ('fastapi', 'uvicorn', 'plotly', 'starlette')), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr.strip().endswith("[]"), r.stderr
