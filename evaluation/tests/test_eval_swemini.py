"""swe-mini's CI subset, from scratch: download three pinned sdists (PyPI), rebuild their git
repositories and base commits in a fresh cache, build each task's image, and validate it as a
release is validated (`deepswe-eval validate`: gold resolves every task, empty none). 3 tasks,
one from each of 3 projects (21 once, then 9: the whole of swe-mini is validated at every grading
change, outside CI, so that CI keeps to its budget); about a minute on 2 cores."""

from __future__ import annotations

import contextlib

import pytest

from deepswe.data.loaders import load_jsonl
from deepswe.data.swemini.load import resolve_source
from deepswe.data.swemini.manifest import TASKS, load_manifest
from deepswe.data.swemini.sources import fetch

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECTS = ("inflection", "addict", "xmltodict")  # small sdists, sub-second suites


def _plain(task) -> bool:
    """Test ids a rigged module can redefine (no parametrized ids, no nested classes)."""
    ids = task.hidden.fail_to_pass + task.hidden.pass_to_pass
    return not any("[" in n or n.count("::") > 2 for n in ids)


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    cache = tmp_path_factory.mktemp("swe-mini-cache")
    manifest = load_manifest()
    manifest = manifest.model_copy(update={"projects": [manifest.project(n) for n in PROJECTS]})
    rows = load_jsonl(TASKS)
    chosen = [next(r for r in rows if r.repo == f"pypi/{name}") for name in PROJECTS]
    fetch(manifest, chosen, cache=cache, log=lambda _: None)  # checks every base_commit SHA
    tasks = [resolve_source(t, cache) for t in chosen]
    yield cache, tasks
    from deepswe.env.images.task import task_image_tag
    from deepswe.env.sandbox.docker import client

    for t in tasks:  # the tags name this temporary cache: nothing else will use them
        with contextlib.suppress(Exception):  # already gone or still in use: harmless here
            client().images.remove(task_image_tag(t), noprune=False)


def test_ci_subset_gold_resolves_and_empty_does_not(subset):
    from deepswe.env.sandbox import SandboxLimits
    from deepswe.eval.config import EvalConfig
    from deepswe.eval.validate import validate_tasks

    cache, tasks = subset
    assert len(tasks) == 3 and len({t.repo for t in tasks}) == 3
    cfg = EvalConfig(workers=2, sandbox=SandboxLimits(memory="1g", pids=256))
    result = validate_tasks(tasks, cache / "validation", cfg, tools=False)  # CI time
    assert result.ok and len(result.passed) == len(tasks), result.summary()


def _rigged(nodeids: list[str]) -> str:
    """A test module that defines every test of `nodeids` (one file's) to pass, whatever the code."""
    functions = sorted({n.split("::")[1] for n in nodeids if n.count("::") == 1})
    classes: dict[str, set[str]] = {}
    for n in nodeids:
        if n.count("::") == 2:
            cls, name = n.split("::")[1:]
            classes.setdefault(cls, set()).add(name)
    out = ["import unittest\n"]
    out += [f"\ndef {f}():\n    pass\n" for f in functions]
    for cls, names in sorted(classes.items()):
        out.append(f"\nclass {cls}(unittest.TestCase):\n")
        out += [f"    def {name}(self):\n        pass\n" for name in sorted(names)]
    return "".join(out)


def test_rewriting_the_graded_tests_of_a_swe_mini_task_earns_nothing(subset):
    """Regression: swe-mini's graded tests live in the repository and nothing restored them, so a
    patch that replaced them by same-named tests that pass, and left the bug, was resolved. On
    one task of each of two projects: reward 0 now, reward 1 with the restore switched off (and
    the issue's reproduction, which catches the left bug on its own, switched off too)."""
    from deepswe.env.episode import run_task
    from deepswe.env.policies.scripted import FINISH, ScriptedPolicy
    from deepswe.env.sandbox import SandboxLimits

    _, tasks = subset
    chosen = [
        next(t for t in tasks if t.repo == f"pypi/{p}" and _plain(t))
        for p in ("addict", "xmltodict")
    ]
    for task in chosen:
        ids = task.hidden.fail_to_pass + task.hidden.pass_to_pass
        script = [
            "<function=execute_bash><parameter=cmd>"
            f"cat > /testbed/{path} <<'EOF'\n{_rigged([n for n in ids if n.startswith(path + '::')])}EOF"
            "</parameter></function>"
            for path in task.hidden.graded_files
        ]
        script.append(  # the "fix": a comment in the buggy file, the bug left as it is
            "<function=execute_bash><parameter=cmd>"
            f"echo '# fixed' >> /testbed/{task.metadata['file']}</parameter></function>"
        )
        limits = SandboxLimits(memory="1g", pids=256)
        traj = run_task(task, ScriptedPolicy([*script, FINISH]), sandbox_limits=limits)
        assert all(f"b/{p}" in traj.patch for p in task.hidden.graded_files), traj.patch
        assert (traj.outcome, traj.reward) == ("unresolved", 0.0), traj.grade
        unguarded = task.model_copy(
            update={
                "hidden": task.hidden.model_copy(update={"graded_files": [], "reproduction": None})
            }
        )
        control = run_task(unguarded, ScriptedPolicy([*script, FINISH]), sandbox_limits=limits)
        assert (control.outcome, control.reward) == ("resolved", 1.0), control.grade
