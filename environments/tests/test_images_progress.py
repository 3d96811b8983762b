"""A line at least every 30 s while an image build works silently (images/progress.py)."""

from __future__ import annotations

import threading
import time

import pytest

from deepswe.env.images import progress
from deepswe.env.images.progress import Heartbeat


def test_a_silent_part_is_named_until_it_ends_and_a_callers_line_resets_the_clock():
    lines: list[str] = []
    with Heartbeat(lines.append, "deepswe/env:abc (env)", every=0.2) as beat:
        beat.doing("Step 3/5 : RUN pip install ...")
        beat.output("Building wheel for numpy (setup.py): started")
        beat.output("\x1b[0m")  # a colour reset alone is no output
        time.sleep(0.75)
        n = len(lines)
        beat.logged()  # the caller said something: the next beat waits a whole period
        time.sleep(0.1)
        assert len(lines) == n
    after = len(lines)
    time.sleep(0.3)
    assert len(lines) == after  # nothing once the part ended
    assert n >= 2 and all(x.startswith("  deepswe/env:abc (env): Step 3/5") for x in lines)
    assert "s so far; last output: Building wheel for numpy" in lines[0]


@pytest.mark.docker
def test_a_docker_build_step_that_prints_nothing_still_shows_progress(monkeypatch, tmp_path):
    from deepswe.env.images.base import ensure_base_image
    from deepswe.env.images.engine import docker_build
    from deepswe.env.sandbox.docker import client

    monkeypatch.setattr(progress, "EVERY_S", 0.5)
    base = ensure_base_image("bookworm")
    lines: list[str] = []
    failed = docker_build(
        tmp_path,
        f"FROM {base}\nRUN echo compiling {time.time_ns()} && sleep 2.5\n",  # never cached
        "deepswe-test/heartbeat:1",
        {"deepswe.kind": "task", "deepswe.instance": "demo__demo-1"},
        lines.append,
    )
    assert failed is None
    beats = [x for x in lines if "s so far" in x]
    assert len(beats) >= 2, lines
    step = "  deepswe-test/heartbeat:1 (task of demo__demo-1): Step 2/4 : RUN"
    assert any(x.startswith(step) for x in beats), beats
    assert any("last output: compiling" in x for x in beats)
    client().images.remove("deepswe-test/heartbeat:1")


def test_what_the_code_below_is_doing_is_named_in_each_beat():
    """Issue #45: while a build stage compiled numpy for minutes the heartbeat said only
    "fetching the wheels of pip step 1 of 1"; the innermost activity of the build's own thread
    is now named, and another thread's is not."""
    lines: list[str] = []
    done = threading.Event()

    def other() -> None:
        with progress.activity("someone else's"):
            done.wait(5)

    elsewhere = threading.Thread(target=other)
    elsewhere.start()
    with Heartbeat(lines.append, "deepswe/env:abc (env, on the host)", every=0.2) as beat:
        beat.doing("fetching the wheels of pip step 1 of 1")
        outer = progress.activity("pip download for Python 3.9: numpy==1.19.2")
        inner = progress.activity("building numpy-1.19.2.tar.gz with Python 3.9: pip wheel")
        with outer, inner:
            time.sleep(0.5)
        time.sleep(0.45)
    done.set()
    elsewhere.join()
    named = "(building numpy-1.19.2.tar.gz with Python 3.9: pip wheel)"
    assert any(line.endswith(named) for line in lines), lines
    assert lines[-1].endswith("s so far"), lines  # the activities ended: nothing named
    assert not any("someone else's" in line for line in lines)
