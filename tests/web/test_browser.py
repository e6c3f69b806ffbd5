"""End to end in a real browser: headless Chromium (the Debian package, driven by Playwright;
no browser download) loads the page, runs a plan, and sees the plan table and a chart. The
screenshot is kept under tests/artifacts/ (its path is printed).

CI installs chromium (.ci/run); with CI set, a missing browser fails the test rather than
skipping it."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("ACCELMAP_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def _need_browser() -> None:
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "the playwright package is not installed (pip install -e '.[test]')"
    if missing is None and not Path(CHROMIUM).exists():
        missing = f"no chromium at {CHROMIUM} (apt-get install -y chromium)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium from the system package, never a downloaded browser; one per module."""
    _need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def _ready_page(browser: Any, live_server: str) -> tuple[Any, list[str]]:
    """A page at the app, its catalog loaded, and the list its script errors go to."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(live_server + "/")
    page.wait_for_selector("body[data-state=ready]", timeout=15_000)
    return page, errors


def test_plan_in_the_page(live_server: str, browser: Any,
                          capsys: pytest.CaptureFixture[str]) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web-plan.png"
    page, errors = _ready_page(browser, live_server)
    page.fill("#model", "llama-3.1-8b")
    page.fill("#cluster", "8xH100")
    page.fill("#global_batch_tokens", "1M")
    page.click("#run-plan")
    page.wait_for_selector("body[data-state=done]", timeout=30_000)
    rows = page.locator("#plan-table tr")
    assert rows.count() >= 2  # a header and at least one plan
    assert "dp=" in page.inner_text("#plan-table")
    speed = page.inner_text("#plan-table tr:nth-child(2) td:nth-child(3)")
    assert re.fullmatch(r"\d{1,3}(,\d{3})*", speed), speed  # tokens/s, as a count
    page.wait_for_selector("#charts .chart .main-svg", timeout=15_000)
    assert page.locator("#charts .chart").count() >= 3
    assert page.is_hidden("#error")
    # the report downloads as a file
    with page.expect_download() as dl:
        page.click("#download-report")
    assert dl.value.suggested_filename == "plan-report.html"
    page.screenshot(path=str(shot), full_page=True)
    assert not errors, errors
    with capsys.disabled():
        print(f"\nscreenshot: {shot}")
    assert shot.stat().st_size > 10_000


def test_frontier_in_the_page(live_server: str, browser: Any) -> None:
    page, errors = _ready_page(browser, live_server)
    page.fill("#model", "llama-3.1-8b")
    page.fill("#cluster", "2xH100")
    page.select_option("#mode", "serve")
    page.fill("#prompt", "256")
    page.fill("#output", "32")
    page.click("#run-frontier")
    page.wait_for_selector("body[data-state=done]", timeout=60_000)
    assert "points on the front" in page.inner_text("#summary")
    page.wait_for_selector("#charts .chart .main-svg", timeout=15_000)
    assert page.is_hidden("#error") and not errors, errors


def test_bad_input_shows_the_cli_sentence(live_server: str, browser: Any) -> None:
    page = browser.new_page()
    page.goto(live_server + "/")
    page.wait_for_selector("body[data-state=ready]", timeout=15_000)
    page.fill("#model", "llama-9")
    page.click("#run-plan")
    page.wait_for_selector("body[data-state=error]", timeout=15_000)
    assert "unknown model 'llama-9'" in page.inner_text("#error")


def test_an_error_clears_the_previous_result(live_server: str, browser: Any) -> None:
    page = browser.new_page()
    page.goto(live_server + "/")
    page.wait_for_selector("body[data-state=ready]", timeout=15_000)
    page.fill("#model", "llama-3.1-8b")
    page.fill("#cluster", "8xH100")
    page.fill("#global_batch_tokens", "1M")
    page.click("#run-plan")
    page.wait_for_selector("body[data-state=done]", timeout=60_000)
    assert page.is_visible("#results")
    page.fill("#cluster", "8xNOPE")
    page.click("#run-plan")
    page.wait_for_selector("body[data-state=error]", timeout=30_000)
    assert page.is_visible("#error")
    assert page.is_hidden("#results")  # no stale plan under the banner
    assert page.inner_text("#plan-table") == ""


def test_zero_feasible_says_why(live_server: str, browser: Any) -> None:
    page = browser.new_page()
    page.goto(live_server + "/")
    page.wait_for_selector("body[data-state=ready]", timeout=15_000)
    page.fill("#model", "llama-3.1-405b")
    page.fill("#cluster", "2xH100")
    page.click("#run-plan")
    page.wait_for_selector("body[data-state=done]", timeout=60_000)
    text = page.inner_text("#summary")
    assert "0 feasible" in text and "does not fit in device memory" in text


def test_docs_render_offline(live_server: str, browser: Any) -> None:
    """Swagger UI from the installed package under the app's CSP: no CDN, no script error."""
    pytest.importorskip("fastapi_offline", reason="the web extra's fastapi-offline")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(live_server)
            else outside.append(r.url))
    page.goto(live_server + "/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
    assert "/api/plan" in page.inner_text(".swagger-ui")
    assert not errors, errors
    assert not [u for u in outside if u.startswith("http")], outside
