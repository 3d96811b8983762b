"""The trajectory viewer (view.html) in a real headless Chromium: a run folder of real records
is rendered, loaded from file:// with no server, filtered, and an episode opened.

The browser is the system Chromium (infra/browser/ensure-chromium.sh installs Debian's
`chromium`), driven by Playwright over its executable path: no browser download. Outside CI a
missing browser skips with the reason; under CI (CI=true) it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deepswe.env.agent import prompts
from deepswe.env.agent.parser import parse_action
from deepswe.env.grading.outcomes import GradeResult, Outcome, TestStatus
from deepswe.env.policies import PolicySpec
from deepswe.env.trajectory import Action, Ending, Step, Trajectory
from deepswe.eval.card import RunCard, prompt_sha256
from deepswe.eval.config import EvalConfig
from deepswe.eval.report import build_report
from deepswe.eval.store import EpisodeRecord, EpisodeStatus, RunStore, atomic_write_json
from deepswe.eval.viewer import json_block, write_view

INJECTED = (
    '</pre></script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'
)
PATCH = """diff --git a/src/calc.py b/src/calc.py
index 1111111..2222222 100644
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,3 +1,3 @@
 def add(a, b):
-    return a - b
+    return a + b  # fixed
"""


def chromium_path() -> str | None:
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


def _browser_or_skip():
    why = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        why = "playwright is not installed (pip install -e 'evaluation[dev]')"
    exe = chromium_path()
    if why is None and exe is None:
        why = "no Chromium (run infra/browser/ensure-chromium.sh, or set CHROMIUM=path)"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the viewer test: {why}")
        pytest.skip(why)
    return sync_playwright, exe


def _step(i: int, reply: str, observation: str, exit_code: int = 0) -> Step:
    parsed = parse_action(reply)
    action = Action(name=parsed.function_name, parameters=parsed.parameters)
    return Step(
        index=i,
        assistant=reply,
        action=action if parsed.has_call else None,
        observation=observation,
        exit_code=exit_code,
        model_seconds=0.4,
        tool_seconds=0.1,
    )


def _episode(iid: str, run: int, outcome: Outcome, observation: str, patch: str) -> EpisodeRecord:
    look = "I should look at add().\n<function=execute_bash>\n<parameter=command>cat src/calc.py</parameter>\n</function>"
    done = (
        "Fixed; submitting.\n<function=finish>\n<parameter=command>submit</parameter>\n</function>"
    )
    grade = GradeResult(
        outcome=outcome,
        parser="pytest",
        reason=f"{outcome.value} by the hidden tests",
        statuses={
            "tests/test_calc.py::test_add": TestStatus.PASSED
            if outcome is Outcome.RESOLVED
            else TestStatus.FAILED
        },
        f2p_failed=[] if outcome is Outcome.RESOLVED else ["tests/test_calc.py::test_add"],
    )
    traj = Trajectory(
        instance_id=iid,
        policy="scripted",
        ending=Ending.SUBMITTED,
        patch=patch,
        messages=prompts.build_messages(f"add() of {iid} subtracts"),
        steps=[_step(0, look, observation), _step(1, done, "<<< submitted >>>")],
        outcome=outcome,
        reward=grade.reward,
        grade=grade,
        wall_seconds=3.0,
        grade_seconds=2.0,
    )
    return EpisodeRecord(
        instance_id=iid,
        run=run,
        repo="acme/calc",
        status=EpisodeStatus.GRADED,
        outcome=outcome,
        started_at=100.0,
        finished_at=106.0,
        trajectory=traj,
    )


def make_run(root: Path) -> Path:
    """A run folder: 3 tasks x 2 runs (one episode infra_error, one observation holding
    markup), its run card, and ef verdicts for task b."""
    store = RunStore(root)
    ids = ["acme__calc-a", "acme__calc-b", "acme__calc-c"]
    cfg = EvalConfig(dataset="swe-mini:test", runs=2, policy=PolicySpec(name="gold"))
    card = RunCard(
        dataset=cfg.dataset,
        dataset_sha256="0" * 64,
        instance_ids=ids,
        eval=cfg,
        prompt_sha256=prompt_sha256("eval"),
    )
    atomic_write_json(store.config_path, card.model_dump(mode="json"))
    cat = "Execution output of [execute_bash]:\ndef add(a, b):\n    return a - b\n"
    for run in (0, 1):
        store.save(_episode("acme__calc-a", run, Outcome.RESOLVED, cat, PATCH))
        store.save(
            _episode("acme__calc-b", run, Outcome.UNRESOLVED, INJECTED if run else cat, PATCH)
        )
    store.save(_episode("acme__calc-c", 0, Outcome.UNRESOLVED, cat, ""))
    store.save(
        EpisodeRecord(
            instance_id="acme__calc-c",
            run=1,
            repo="acme/calc",
            attempts=3,
            status=EpisodeStatus.INFRA_ERROR,
            reason="sandbox died: OOM",
        )
    )
    for run, score in ((0, 0.91), (1, 0.12)):
        verdict = {
            "verifier": "ef",
            "instance_id": "acme__calc-b",
            "run": run,
            "status": "scored",
            "score": score,
            "detail": "",
        }
        atomic_write_json(root / "verdicts" / "ef" / "acme__calc-b" / f"run-{run}.json", verdict)
    return root


def test_json_block_cannot_be_closed_by_the_data():
    block = json_block("x", {"obs": INJECTED, "amp": "&lt;"})
    inner = block[block.index(">") + 1 : block.rindex("</script>")]
    assert "<" not in inner and ">" not in inner and "&" not in inner
    assert json.loads(inner) == {"obs": INJECTED, "amp": "&lt;"}


def test_viewer_in_headless_chromium(tmp_path):
    sync_playwright, exe = _browser_or_skip()
    page_path = write_view(make_run(tmp_path / "run"))
    assert page_path == tmp_path / "run" / "view.html"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.goto(page_path.as_uri())

        assert page.inner_text("#count") == "6 of 6 episodes"
        assert page.locator("#rows tr").count() == 6
        page.select_option("#f-outcome", "infra_error")
        assert page.inner_text("#count") == "1 of 6 episodes"
        page.select_option("#f-outcome", "")
        page.fill("#f-min", "0.5")  # ef >= 0.5: only acme__calc-b run 0
        assert page.inner_text("#count") == "1 of 6 episodes"
        page.fill("#f-min", "")
        page.fill("#f-task", "calc-b")
        assert page.locator("#rows tr").count() == 2

        page.click("#rows tr:nth-child(2)")  # acme__calc-b, run 1: the injected observation
        assert page.inner_text("#episode h2") == "acme__calc-b · run 1"
        added = page.locator("#episode .diff .add")
        assert added.count() == 1 and added.inner_text() == "+    return a + b  # fixed"
        assert page.locator("#episode .diff .del").inner_text() == "-    return a - b"
        assert INJECTED in page.locator("#episode pre.observation").first.inner_text()
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#episode img, #episode script").count() == 0
        assert "ef: 0.120" in page.inner_text("#episode dl.meta")
        assert "f2p_failed (1)" in page.inner_text("#episode")
        page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)

        page.fill("#f-task", "")
        page.select_option("#f-outcome", "infra_error")
        page.click("#rows tr:nth-child(1)")
        assert "sandbox died: OOM" in page.inner_text("#episode")
        browser.close()
    assert errors == []
    assert (tmp_path / "viewer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_view_cli_and_report_write_the_page(tmp_path):
    run = make_run(tmp_path / "run")
    build_report(run)  # what `deepswe-eval run` and `report` call
    assert "acme__calc-c" in (run / "view.html").read_text(encoding="utf-8")
    cli = str(Path(sys.executable).with_name("deepswe-eval"))
    done = subprocess.run(
        [cli, "view", str(run), "--out", str(tmp_path / "v.html")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "v.html").read_text(encoding="utf-8")
    assert "<title>run: swe-mini:test, policy gold</title>" in html
    assert "window.__pwned" in html and "<script>window.__pwned" not in html
