"""What a submitted patch may touch, checked before any apply attempt (grading/patch_check.py):
from the text alone, and against the start tree in a real git repository (local sandbox)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deepswe.env.grading.patch import patch_apply_script
from deepswe.env.grading.patch_check import check_in_tree, check_text, read_patch
from deepswe.env.sandbox import backend_class
from deepswe.env.workspace import snapshot_script

GOOD = """diff --git a/calc/ops.py b/calc/ops.py
index 1111111..2222222 100644
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,3 +1,3 @@
 def add(a, b):
-    return a - b
+    return a + b
-- an SQL comment removed: a hunk line, not a header
"""
GOOD = GOOD.replace(
    "-- an SQL comment removed: a hunk line, not a header\n",
    "--- a hunk line that looks like a header\n",
).replace("@@ -1,3 +1,3 @@", "@@ -1,3 +1,2 @@")
HOOK = """diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout
new file mode 100755
--- /dev/null
+++ b/.git/hooks/post-checkout
@@ -0,0 +1,2 @@
+#!/bin/sh
+touch /tmp/owned
"""


def _file(path: str, body: str = "+x\n", old: str = "/dev/null") -> str:
    new = path if path.startswith("/") else f"b/{path}"
    return f"--- {old}\n+++ {new}\n@@ -0,0 +1 @@\n{body}"


def test_an_ordinary_patch_is_taken_with_its_paths():
    paths, why = check_text(GOOD)
    assert (paths, why) == (["calc/ops.py"], "")


@pytest.mark.parametrize(
    "patch, why",
    [
        (HOOK, "inside .git"),
        # git's header names one file, the ---/+++ lines another: either tool's reading counts
        (
            HOOK.replace(
                "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout",
                "diff --git a/ok.py b/ok.py",
            ),
            "inside .git",
        ),
        (_file(".GIT/config"), "inside .git"),
        ("Index: .git/config\n" + _file("ok.py"), "inside .git"),
        ("rename from ok.py\nrename to .git/hooks/pre-commit\n", "inside .git"),
        (_file("/etc/cron.d/x"), "absolute"),
        (_file("../outside.py"), "climbs out"),
        (_file("calc/__pycache__/ops.cpython-311.pyc"), "bytecode"),
        (_file("calc/ops.pyc"), "bytecode"),
        ('--- /dev/null\n+++ "b/.git/hooks/\\npost-merge"\n@@ -0,0 +1 @@\n+x\n', "inside .git"),
        (
            "diff --git a/x b/x\nnew file mode 120000\n" + _file("x", "+/usr/lib/python3\n"),
            "symlink to an absolute",
        ),
        (
            "diff --git a/d/x b/d/x\nnew file mode 120000\n" + _file("d/x", "+../../etc\n"),
            "symlink leaving",
        ),
        (
            "diff --git a/h b/h\nnew file mode 120000\n" + _file("h", "+.git/hooks\n"),
            "symlink into .git",
        ),
        ("1c1\n< a\n---\n> b\n", "not a unified diff"),
        (
            "*** a/x\n--- b/x\n***************\n*** 1 ****\n! a\n--- 1 ----\n! b\n",
            "not a unified diff",
        ),
    ],
)
def test_paths_no_fix_needs_are_refused_from_the_text(patch, why):
    paths, reason = check_text(patch)
    assert why in reason and paths == []


def test_a_reason_never_carries_a_line_break():
    """A C-quoted name may decode to a newline; the reason is written into the graded log."""
    _, reason = check_text(
        '--- /dev/null\n+++ "b/.git/x\\n>>>>> Reset Failed"\n@@ -0,0 +1 @@\n+x\n'
    )
    assert reason and "\n" not in reason


def test_binary_and_symlink_patches_inside_the_repository_are_taken():
    patch = (
        "diff --git a/img.png b/img.png\nindex 1..2 100644\nGIT binary patch\nliteral 5\n"
        "McmZQzO3KUw00MIXJOBUy\n\nliteral 5\nMcmZQzOv=my00M6TI{*Lx\n\n"
        "diff --git a/docs/l b/docs/l\nnew file mode 120000\n" + _file("docs/l", "+../README\n")
    )
    paths, why = check_text(patch)
    assert why == "" and paths == ["docs/l", "img.png"]
    assert read_patch(patch).symlinks == {"docs/l": "../README"}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "calc" / "ops.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("/*.py\nbuild/\n")
    (tmp_path / "elsewhere").mkdir()
    (repo / "out").symlink_to(tmp_path / "elsewhere")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "base")
    return repo


@pytest.mark.parametrize(
    "path, why",
    [
        ("conftest.py", "ignores"),  # `/*.py`: `git add -A` would never list it
        ("build/x.py", "ignores"),
        ("out/evil.py", "outside"),  # through a symlink the tree already has
        ("calc/ops.py", ""),
        ("calc/new.py", ""),
    ],
)
def test_paths_the_tree_refuses(repo, path, why):
    sandbox = backend_class("local")(None)
    try:
        reason = check_in_tree(sandbox, [path], str(repo))
    finally:
        sandbox.close()
    assert (why in reason) if why else reason == ""


def test_gnu_patch_would_write_a_hook_that_git_apply_refuses(repo, tmp_path):
    """The attack is real: SWE-bench's chain falls through to GNU patch, which writes into
    .git/hooks; the check refuses the patch before any attempt."""
    (tmp_path / "hook.patch").write_text(HOOK)
    subprocess.run(["bash", "-c", snapshot_script(str(repo))], check=True, capture_output=True)
    r = subprocess.run(
        ["bash", "-c", patch_apply_script(str(tmp_path / "hook.patch"), str(repo))],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and (repo / ".git" / "hooks" / "post-checkout").exists(), r.stdout
    assert "inside .git" in check_text(HOOK)[1]
