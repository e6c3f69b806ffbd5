"""Make the README's pictures with the system's headless Chromium (Playwright drives it; no
browser is downloaded): the web app after a plan (docs/web-app.png) and the HTML report of a
pipelined training estimate (docs/report-estimate.png, from docs/report-estimate.html, which
is not kept: it is 5 MB of embedded plotly).

    python3 docs/screenshots.py            # needs the test extra and `apt-get install chromium`
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "web"))

from test_browser import ARGS, CHROMIUM  # noqa: E402  (the browser test's launch settings)

DOCS = ROOT / "docs"


def serve() -> tuple[object, str]:
    import uvicorn

    from accelmap.web.app import create_app
    from conftest import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port,
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def report_file(folder: Path) -> Path:
    from accelmap import api

    spec = api.load_model("llama-3.1-70b")
    system = api.load_system(cluster="64xH100")
    wl = api.training(512, 8192, recompute="full")
    m = api.mapping(system, wl, tp=8, pp=4, vpp=2)
    rep = api.report_estimate(api.estimate(spec, system, wl, m), system, m,
                              inputs={"model": "llama-3.1-70b", "cluster": "64xH100",
                                      "train": True, "tp": 8, "pp": 4, "vpp": 2, "batch": 512,
                                      "seq": 8192, "recompute": "full"},
                              command="accelmap estimate")
    return api.write_report(rep, folder / "report-estimate.html")


def main() -> None:
    from playwright.sync_api import sync_playwright

    server, base = serve()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 1500})
        page.goto(base + "/")
        page.wait_for_selector("body[data-state=ready]")
        page.fill("#model", "llama-3.1-70b")
        page.fill("#cluster", "64xH100")
        page.fill("#seq", "8192")
        page.fill("#global_batch_tokens", "4M")
        page.click("#run-plan")
        page.wait_for_selector("body[data-state=done]", timeout=60_000)
        page.wait_for_timeout(500)
        page.screenshot(path=str(DOCS / "web-app.png"))
        html = report_file(Path(tmp))
        page = browser.new_page(viewport={"width": 1280, "height": 2300})
        page.goto(html.as_uri())
        page.wait_for_selector(".main-svg")
        page.wait_for_timeout(500)
        page.screenshot(path=str(DOCS / "report-estimate.png"))
        browser.close()
    server.should_exit = True  # type: ignore[attr-defined]
    for name in ("web-app.png", "report-estimate.png"):
        print(DOCS / name, f"{(DOCS / name).stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
