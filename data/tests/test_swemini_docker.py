"""The CI subset of swe-mini, from scratch: download three pinned sdists (PyPI), rebuild their git
repositories and base commits in a fresh cache, build each task's image, and check through the
spine that the gold patch resolves every task and the empty patch resolves none. 21 tasks from 3
projects; about 3 minutes on 2 cores."""

from __future__ import annotations

import contextlib

import pytest

from deepswe.data.loaders import load_jsonl
from deepswe.data.swemini.load import resolve_source
from deepswe.data.swemini.manifest import TASKS, load_manifest
from deepswe.data.swemini.sources import fetch

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECTS = ("inflection", "addict", "xmltodict")  # small sdists, sub-second suites
PER_PROJECT = 7


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    cache = tmp_path_factory.mktemp("swe-mini-cache")
    manifest = load_manifest()
    manifest = manifest.model_copy(update={"projects": [manifest.project(n) for n in PROJECTS]})
    rows = load_jsonl(TASKS)
    chosen = [
        t for name in PROJECTS for t in [r for r in rows if r.repo == f"pypi/{name}"][:PER_PROJECT]
    ]
    fetch(manifest, chosen, cache=cache, log=lambda _: None)  # checks every base_commit SHA
    tasks = [resolve_source(t, cache) for t in chosen]
    yield cache, tasks
    from deepswe.env.images.task import task_image_tag
    from deepswe.env.sandbox.docker import client

    for t in tasks:  # the tags name this temporary cache: nothing else will use them
        with contextlib.suppress(Exception):  # already gone or still in use: harmless here
            client().images.remove(task_image_tag(t), noprune=False)


def test_ci_subset_gold_resolves_and_empty_does_not(subset):
    from deepswe.data.swemini.validate import validate_tasks

    cache, tasks = subset
    assert len(tasks) >= 20 and len({t.repo for t in tasks}) >= 3
    report = validate_tasks(tasks, cache / "progress.jsonl", workers=2, show_progress=False)
    assert report["validated"] == len(tasks)
    assert report["failed"] == [], report
