"""The trajectory viewer on a real run folder: how long its page takes to write and to use in
headless Chromium, and the README's screenshot of one episode (docs/viewer.png).

Times (median of --repeat), for the run folder given (default: the run folder under runs/ with
the most episodes, e.g. runs/tts-tiny/pool-test after `make eval-tts`):
  write   deepswe.eval.viewer.write_view: read every record and verdict, render the page
  load    file:// navigation until the episode list is drawn
  open    a click on an episode until its view is drawn (one episode's JSON parsed, its DOM built)
Baseline named for the ratios: the same page for an empty run folder (the browser's and the
script's fixed cost); a load ratio near 1 means the page's size is not what a reader waits for.

Needs Chromium (infra/browser/ensure-chromium.sh, or CHROMIUM=path) and playwright (dev extra).
Run: .venv/bin/python bench/viewer_screenshot.py [RUN] [--png docs/viewer.png] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from deepswe.eval.store import RunStore
from deepswe.eval.viewer import write_view

ROOT = Path(__file__).resolve().parents[1]


def default_run() -> Path | None:
    """The folder under runs/ (three levels down at most) holding the most episode files."""
    found = [
        p.parent for p in (ROOT / "runs").glob("**/episodes") if len(p.parts) - len(ROOT.parts) <= 5
    ]
    return max(found, key=lambda p: len(list(p.glob("episodes/*/run-*.json"))), default=None)


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    sys.exit("bench/viewer_screenshot.py: no Chromium; run infra/browser/ensure-chromium.sh")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pick_episode(page) -> None:
    """Open the first resolved episode (else the first one) and scroll its view so that the
    last step and the patch's diff are both in sight."""
    rows = page.locator("#rows tr")
    resolved = page.locator("#rows tr", has=page.locator(".o-resolved"))
    (resolved if resolved.count() else rows).first.click()
    page.evaluate(
        """() => { const pane = document.getElementById("episode");
        const h = [...pane.querySelectorAll("h3")].find((x) => x.textContent === "Patch");
        const box = pane.getBoundingClientRect();
        if (h) pane.scrollTop += h.getBoundingClientRect().top - box.top - 0.45 * box.height; }"""
    )


def measure(browser, page_path: Path, repeat: int) -> tuple[float, float]:
    loads, opens = [], []
    for _ in range(repeat):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        loads.append(
            timed(lambda p=page: (p.goto(page_path.as_uri()), p.wait_for_selector("#count")))
        )
        if page.locator("#rows tr").count():
            opens.append(
                timed(
                    lambda p=page: (
                        p.locator("#rows tr").first.click(),
                        p.wait_for_selector("#episode h2"),
                    )
                )
            )
        page.close()
    return statistics.median(loads), statistics.median(opens) if opens else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "run", nargs="?", type=Path, help="a run folder (default: the largest under runs/)"
    )
    ap.add_argument(
        "--png", type=Path, default=ROOT / "docs" / "viewer.png", help="screenshot path"
    )
    ap.add_argument("--repeat", type=int, default=5, help="measurements per setting")
    args = ap.parse_args()
    run = args.run or default_run()
    if run is None or not (run / "episodes").is_dir():
        print(
            "bench/viewer_screenshot.py: no run folder with episodes/ (see the docstring); skipped"
        )
        return
    from playwright.sync_api import sync_playwright

    n = len(RunStore(run).records())
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "view.html"
        write_s = statistics.median(timed(lambda: write_view(run, out)) for _ in range(args.repeat))
        empty = write_view(Path(tmp) / "empty", Path(tmp) / "empty.html")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium())
            load_s, open_s = measure(browser, out, args.repeat)
            base_load, _ = measure(browser, empty, args.repeat)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(out.as_uri())
            pick_episode(page)
            args.png.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.png))
            browser.close()
        size = out.stat().st_size
    print(f"run: {run} ({n} episodes, page {size / 1e6:.2f} MB)")
    print("| step | median s | vs. empty run |")
    print("|---|---|---|")
    print(f"| write view.html | {write_s:.3f} | |")
    print(f"| load in Chromium | {load_s:.3f} | {load_s / base_load:.2f}x |")
    print(f"| open one episode | {open_s:.3f} | |")
    print(f"screenshot: {args.png}")


if __name__ == "__main__":
    main()
