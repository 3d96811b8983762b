"""The scripted candidate kinds, made from swe-mini-shaped tasks this test builds in a real git
repository (a clean module, two injected bugs): each kind is what it says, every patch applies
with `git apply` at the task's base commit, and a kind a task cannot offer is replaced by a
named substitute. Grading them is test_tts_grading.py's (docker)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.reproduce.tts.edits import apply, hunks, make_patch
from deepswe.reproduce.tts.kinds import TaskEdits
from deepswe.reproduce.tts.plan import PlanError, base_reader, partners_of, plan_task
from deepswe.verify.baselines import patch_facts

PAD = "".join(f"\n\ndef pad{i}(v):\n    return v * {i + 2}\n" for i in range(4))
CLEAN = f"""def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
{PAD}

def shift(x, n):
    total = x + n
    return total
"""
BUGS = {  # instance id -> (clean text, buggy text): one mutation each
    "pkg__pkg-clamp": ("    if x > hi:\n", "    if x >= hi:\n"),
    "pkg__pkg-shift": ("    total = x + n\n", "    total = x - n\n"),
}
TESTS = {
    "pkg__pkg-clamp": "tests/test_ops.py::test_clamp",
    "pkg__pkg-shift": "tests/test_ops.py::test_shift",
}


def git(repo: Path, *args: str) -> str:
    """git's output as it is (a diff's last context line may be a lone space)."""
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def commit(repo: Path, text: str, parent: str | None) -> str:
    if parent:
        git(repo, "checkout", "-q", parent)
    (repo / "src" / "pkg").mkdir(parents=True, exist_ok=True)
    (repo / "src" / "pkg" / "ops.py").write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "state")
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> dict[str, Task]:
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q")
    clean = commit(repo, CLEAN, None)
    out = {}
    for iid, (good, bad) in BUGS.items():
        base = commit(repo, CLEAN.replace(good, bad), clean)
        gold = git(repo, "diff", base, clean)
        others = [TESTS[o] for o in BUGS if o != iid]
        out[iid] = Task(
            instance_id=iid,
            repo="pypi/pkg",
            base_commit=base,
            source=TaskSource.SWE_MINI,
            problem_statement=f"{iid} is wrong",
            gold_patch=gold,
            environment=EnvironmentSpec(source=str(repo)),
            test_spec=TestSpec(command="python -m pytest tests", log_parser="pytest"),
            hidden=HiddenTests(fail_to_pass=[TESTS[iid]], pass_to_pass=others),
            metadata={"function": iid.split("-")[-1], "mutation": "flip_comparison"},
        )
    return out


def applies(task: Task, patch: str, tmp: Path) -> str:
    """The module after `git apply` of `patch` on a checkout of the task's base commit."""
    work = tmp / "work"
    if not work.exists():
        subprocess.run(
            ["git", "clone", "-q", task.environment.source, str(work)],
            check=True,
            capture_output=True,
        )
    git(work, "-c", "advice.detachedHead=false", "checkout", "-q", "-f", task.base_commit)
    git(work, "clean", "-qfd")
    subprocess.run(["git", "-C", str(work), "apply", "-"], input=patch, text=True, check=True)
    return (work / "src" / "pkg" / "ops.py").read_text()


def edits(task: Task) -> TaskEdits:
    return TaskEdits(
        task.instance_id,
        task.gold_patch,
        base_reader(task),
        0,
        task.metadata["function"],
        task.metadata["mutation"],
    )


def test_each_kind_is_what_it_says_and_applies_at_base(tasks, tmp_path):
    task = tasks["pkg__pkg-clamp"]
    e = edits(task)
    buggy, fixed = CLEAN.replace(*BUGS[task.instance_id]), CLEAN
    partners = partners_of(task, list(tasks.values()))
    assert [p.instance_id for p in partners] == ["pkg__pkg-shift"]
    made = {
        k: e.variants(k, 3, partners)
        for k in ("right", "misedit", "wrong_place", "regression", "comment", "empty", "partial")
    }
    assert applies(task, made["right"][0].patch, tmp_path) == fixed
    assert made["empty"][0].patch == "" and made["partial"] == []  # a one-line gold: no part
    for m in made["misedit"]:  # the right line edited, but neither the bug nor the fix
        text = applies(task, m.patch, tmp_path)
        assert text not in (buggy, fixed) and "if x >= hi:" not in text
        assert 4 in {n for h in hunks(m.patch) for n in h.removed}, m.detail  # the gold's line
        ast.parse(text)
    for m in made["wrong_place"]:  # the bug stays, another line of clamp changes
        text = applies(task, m.patch, tmp_path)
        assert "if x >= hi:" in text and text != buggy and "(clamp)" in m.detail
    (reg,) = made["regression"]  # the fix and shift's bug
    text = applies(task, reg.patch, tmp_path)
    assert "if x > hi:" in text and "total = x - n" in text and reg.expect is False
    for m in made["comment"]:  # a comment only: the same AST, the bug kept
        text = applies(task, m.patch, tmp_path)
        assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(buggy)) and text != buggy
        assert not patch_facts(m.patch).changes_code
    made_ones = [m.patch for k, ms in made.items() if k not in ("right", "empty") for m in ms]
    assert len(set(made_ones)) == len(made_ones)  # every made variant distinct (right repeats)
    assert made["right"] == made["right"][:1] * 3


def test_a_kind_the_task_cannot_offer_is_replaced_and_named(tasks):
    task = tasks["pkg__pkg-clamp"]
    plan = plan_task(task, {"right": 2, "partial": 1, "misedit": 1, "comment": 1}, [task], 0)
    kinds = [(p.kind, p.planned) for p in plan]
    assert kinds[:2] == [("right", "right"), ("right", "right")]
    assert plan[0].patch == plan[1].patch == task.gold_patch  # copies, as identical rollouts
    assert len(plan) == 5 and [p.run for p in plan] == list(range(5))
    (sub,) = [p for p in plan if p.planned == "partial"]
    assert sub.kind in ("misedit", "wrong_place", "comment") and sub.kind != "partial"
    assert len({p.patch for p in plan}) == 4  # the substitute is not a variant already there


def test_substitutes_and_hard_slots_take_the_hard_kinds_in_turn(tasks):
    task = tasks["pkg__pkg-clamp"]
    pool = list(tasks.values())
    plan = plan_task(task, {"partial": 3}, pool, 0)  # no partial exists: three substitutes
    assert [p.planned for p in plan] == ["partial"] * 3
    assert len({p.kind for p in plan}) == 3  # misedit, regression, wrong_place: one each
    hard = plan_task(task, {"right": 1, "hard": 1}, pool, 0)  # the judge's train pools
    assert [p.kind for p in hard][0] == "right" and hard[1].planned == "hard"
    assert hard[1].kind in ("misedit", "regression", "wrong_place")
    firsts = {plan_task(task, {"hard": 1}, pool, seed)[0].kind for seed in range(12)}
    assert len(firsts) > 1  # the turn starts at a seeded place


def test_a_two_hunk_gold_has_partial_fixes():
    both = CLEAN.replace(*BUGS["pkg__pkg-clamp"]).replace(*BUGS["pkg__pkg-shift"])
    base = {"src/pkg/ops.py": both}
    gold = make_patch(base, {"src/pkg/ops.py": CLEAN})
    assert len(hunks(gold)) == 2
    e = TaskEdits("two", gold, lambda p: base[p], 0)
    parts = e.variants("partial", 3)
    assert len(parts) == 2
    fixed_one = [apply(base, hunks(p.patch))["src/pkg/ops.py"] for p in parts]
    assert CLEAN.replace(*BUGS["pkg__pkg-shift"]) in fixed_one  # clamp fixed, shift not
    assert CLEAN.replace(*BUGS["pkg__pkg-clamp"]) in fixed_one


def test_made_diffs_carry_a_missing_final_newline():
    old, new = {"a.py": "x = 1\ny = 2"}, {"a.py": "x = 1\ny = 3"}
    patch = make_patch(old, new)
    assert patch.endswith("+y = 3\n\\ No newline at end of file\n")
    assert apply(old, hunks(patch)) == new and apply(new, hunks(patch), reverse=True) == old


def test_a_task_without_its_repository_is_refused_by_name(tasks):
    bare = tasks["pkg__pkg-clamp"].model_copy(update={"environment": None})
    with pytest.raises(PlanError, match="pkg__pkg-clamp: scripted candidates need the repository"):
        plan_task(bare, {"misedit": 1}, [], 0)


def test_proven_wrong_survivors_are_a_candidate_kind_and_fall_back_to_hard_kinds(tasks):
    """Issue #43: a test strength run's proven-wrong survivors (wrong fixes the graded tests
    pass) join the pool as `survivor`; a task with fewer gets hard kinds in their place."""
    from deepswe.eval.audit_manifest import Survivor

    task = tasks["pkg__pkg-clamp"]
    wrong = make_patch(
        {"src/pkg/ops.py": CLEAN.replace(*BUGS["pkg__pkg-clamp"])},
        {"src/pkg/ops.py": CLEAN.replace("    if x > hi:\n", "    if x > hi + 1:\n")},
    )
    killed = Survivor(
        operator="boundary",
        change="src/pkg/ops.py:4 hi -> hi + 1",
        patch=wrong,
        killed_by="tests/test_more.py::test_clamp_edge",
    )
    undecided = killed.model_copy(update={"killed_by": None, "patch": "other"})
    plan = plan_task(task, {"right": 1, "survivor": 2}, [task], 0, [killed, killed, undecided])
    assert [(p.kind, p.planned) for p in plan][:2] == [("right", "right"), ("survivor", "survivor")]
    assert plan[1].patch == wrong and plan[1].expect is True
    assert "test_clamp_edge" in plan[1].detail
    # one proven survivor (duplicates once, the undecided never): the second slot is a hard kind
    assert plan[2].planned == "survivor" and plan[2].kind in ("misedit", "wrong_place", "comment")
    none = plan_task(task, {"survivor": 1}, [task], 0)
    assert none[0].planned == "survivor" and none[0].kind != "survivor"


def test_survivor_candidates_need_a_strength_manifest_named():
    from deepswe.verify.tts_config import Mixture, TTSConfig

    with pytest.raises(ValueError, match="strength: a mixture asks for survivor candidates"):
        TTSConfig(test_mixture=Mixture(right=1, survivor=1))
    assert TTSConfig(test_mixture=Mixture(right=1, survivor=1), strength="runs/h").strength
