"""patch_apply_script run for real with bash on a real git repository, after the start snapshot
that every grading sandbox takes (deepswe.env.workspace)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deepswe.env.grading import APPLY_PATCH_FAIL, APPLY_PATCH_PASS, patch_apply_script
from deepswe.env.grading.markers import RESET_FAILED
from deepswe.env.workspace import snapshot_script

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 41))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "mod.py").write_text(ORIGINAL)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    return repo


def _diff_after(repo: Path, new_text: str) -> str:
    """The `git diff` that turns mod.py into `new_text`, leaving the repo as it was."""
    (repo / "mod.py").write_text(new_text)
    diff = _git(repo, "diff")
    _git(repo, "checkout", "-q", "--", "mod.py")
    return diff


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def _apply(patch: Path, repo: Path) -> subprocess.CompletedProcess[str]:
    """Snapshot `repo` as it is now (what grading does first), then run the apply script."""
    snap = _run(snapshot_script(str(repo)))
    assert snap.returncode == 0, snap.stderr
    return _run(patch_apply_script(str(patch), cwd=str(repo)))


def _markers(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(">>>>>")]


def test_clean_patch_applies_with_git_apply(repo: Path, tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(_diff_after(repo, ORIGINAL.replace("line 20\n", "line twenty\n")))
    done = _apply(patch, repo)
    assert done.returncode == 0, done.stderr
    assert _markers(done.stdout) == [f"{APPLY_PATCH_PASS} (git apply --verbose)"]
    assert "line twenty\n" in (repo / "mod.py").read_text()


def test_patch_needing_fuzz_falls_back_to_patch(repo: Path, tmp_path: Path) -> None:
    """Context lines changed under the patch: git apply refuses, `patch --fuzz=5` applies."""
    patch = tmp_path / "fix.diff"
    patch.write_text(_diff_after(repo, ORIGINAL.replace("line 20\n", "line twenty\n")))
    # The tree drifted since the patch was made: lines moved down by 3 and a context line
    # right next to the change was edited.
    drifted = "a\nb\nc\n" + ORIGINAL.replace("line 19\n", "line nineteen\n")
    (repo / "mod.py").write_text(drifted)
    done = _apply(patch, repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _markers(done.stdout) == [
        f"{APPLY_PATCH_PASS} (patch --batch --fuzz=5 --forward -p1 -i)"
    ]
    text = (repo / "mod.py").read_text()
    assert "line twenty\n" in text and "line 20\n" not in text
    assert text.startswith("a\nb\nc\n") and "line nineteen\n" in text


def test_shifted_context_is_applied_by_git_apply(repo: Path, tmp_path: Path) -> None:
    """A pure line shift needs no fuzz: git apply finds the hunk at its new offset."""
    patch = tmp_path / "fix.diff"
    patch.write_text(_diff_after(repo, ORIGINAL.replace("line 20\n", "line twenty\n")))
    (repo / "mod.py").write_text("a\nb\nc\n" + ORIGINAL)
    done = _apply(patch, repo)
    assert _markers(done.stdout) == [f"{APPLY_PATCH_PASS} (git apply --verbose)"]


@pytest.mark.parametrize(
    "content",
    [
        "this is not a diff at all\n",
        "diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n@@ -1,3 +1,3 @@\n garbage",
    ],
    ids=["garbage", "truncated-hunk"],
)
def test_corrupt_patch_prints_failure_marker(repo: Path, tmp_path: Path, content: str) -> None:
    patch = tmp_path / "bad.diff"
    patch.write_text(content)
    done = _apply(patch, repo)
    assert done.returncode == 1
    assert _markers(done.stdout) == [APPLY_PATCH_FAIL]
    assert (repo / "mod.py").read_text() == ORIGINAL


def test_patch_for_other_code_fails(repo: Path, tmp_path: Path) -> None:
    """A well-formed patch whose context is nowhere in the file fails every fallback."""
    patch = tmp_path / "fix.diff"
    patch.write_text(
        "diff --git a/mod.py b/mod.py\n--- a/mod.py\n+++ b/mod.py\n@@ -19,3 +19,3 @@\n"
        " other 19\n-other 20\n+x\n other 21\n"
    )
    done = _apply(patch, repo)
    assert done.returncode == 1
    assert _markers(done.stdout) == [APPLY_PATCH_FAIL]
    assert (repo / "mod.py").read_text() == ORIGINAL


def test_script_is_embeddable_and_quotes_paths(repo: Path, tmp_path: Path) -> None:
    """The snippet runs in a subshell: the caller's directory and script survive it."""
    patch = tmp_path / "my fix; rm -rf x.diff"
    patch.write_text(_diff_after(repo, ORIGINAL.replace("line 1\n", "line one\n")))
    _run(snapshot_script(str(repo)))
    script = f"cd {tmp_path}\n{patch_apply_script(str(patch), cwd=str(repo))}echo rc=$? pwd=$PWD\n"
    done = _run(script)
    assert f"rc=0 pwd={tmp_path}" in done.stdout
    assert (repo / "mod.py").read_text().startswith("line one\n")


def test_missing_directory_fails_with_marker(tmp_path: Path) -> None:
    done = _run(patch_apply_script(str(tmp_path / "p.diff"), cwd=str(tmp_path / "nope")))
    assert done.returncode == 1
    assert _markers(done.stdout)[0].startswith(APPLY_PATCH_FAIL)


SWEBENCH_CHAIN = (  # swebench 4.1.0's GIT_APPLY_CMDS, run as it runs them: no reset in between
    "git apply --verbose {p} || git apply --verbose --reject {p} || patch --batch --fuzz=5 -p1 -i {p}"
)


def _fix_plus_existing_file(repo: Path, tmp_path: Path) -> Path:
    """The patch the old extraction produced: the fix and a file the image's install had left
    untracked (already present in every fresh sandbox)."""
    (repo / "pkg.egg-info").mkdir()
    (repo / "pkg.egg-info" / "PKG-INFO").write_text("Name: pkg\n")
    fix = _diff_after(repo, ORIGINAL.replace("line 20\n", "line twenty\n"))
    new_file = (
        "diff --git a/pkg.egg-info/PKG-INFO b/pkg.egg-info/PKG-INFO\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/pkg.egg-info/PKG-INFO\n@@ -0,0 +1 @@\n+Name: pkg\n"
    )
    patch = tmp_path / "fix.diff"
    patch.write_text(fix + new_file)
    return patch


def test_swebench_chain_reverses_a_half_applied_fix(repo: Path, tmp_path: Path) -> None:
    """Why we depart from swebench 4.1.0: `git apply --reject` applies the fix and fails on the
    existing file, then `patch --batch` takes the fix for "previously applied", REVERSES it and
    exits 0. The fix is gone and the log says the patch applied."""
    patch = _fix_plus_existing_file(repo, tmp_path)
    done = _run(f"cd {repo} && " + SWEBENCH_CHAIN.format(p=patch))
    assert done.returncode == 0
    assert "Reversed (or previously applied) patch detected" in done.stdout
    assert (repo / "mod.py").read_text() == ORIGINAL


def test_our_chain_never_reverses_a_hunk(repo: Path, tmp_path: Path) -> None:
    """Regression (a correct fix graded unresolved): the same patch now fails to apply, and the
    verdict says so, instead of running the tests on the un-fixed code."""
    patch = _fix_plus_existing_file(repo, tmp_path)
    done = _apply(patch, repo)
    assert done.returncode == 1, done.stdout
    assert _markers(done.stdout) == [APPLY_PATCH_FAIL]
    assert "Reversed" not in done.stdout and "which already exists!" in done.stdout
    assert "line twenty\n" in (repo / "mod.py").read_text()  # forward only: never undone


def test_each_attempt_starts_from_the_start_snapshot(repo: Path, tmp_path: Path) -> None:
    """`git apply --reject` applies one hunk of two and leaves a .rej file; `patch` then gets a
    clean tree, applies both hunks once, and nothing of the failed attempt is left."""
    both = ORIGINAL.replace("line 5\n", "line five\n").replace("line 30\n", "line thirty\n")
    patch = tmp_path / "fix.diff"
    patch.write_text(_diff_after(repo, both))
    # Drift under the second hunk only: git apply (even --reject) cannot place it, fuzz can.
    (repo / "mod.py").write_text(ORIGINAL.replace("line 29\n", "line twenty-nine\n"))
    done = _apply(patch, repo)
    assert _markers(done.stdout) == [
        f"{APPLY_PATCH_PASS} (patch --batch --fuzz=5 --forward -p1 -i)"
    ], done.stdout
    text = (repo / "mod.py").read_text()
    assert text.count("line five\n") == 1 and "line thirty\n" in text
    assert "line twenty-nine\n" in text
    assert not list(repo.glob("*.rej"))


def test_a_tree_that_cannot_be_restored_is_a_harness_failure(repo: Path, tmp_path: Path) -> None:
    """Without its start snapshot the grader cannot retry cleanly: Reset Failed, never a guess."""
    both = ORIGINAL.replace("line 5\n", "line five\n").replace("line 30\n", "line thirty\n")
    patch = tmp_path / "fix.diff"
    patch.write_text(_diff_after(repo, both))
    (repo / "mod.py").write_text(ORIGINAL.replace("line 29\n", "line twenty-nine\n"))
    done = _run(patch_apply_script(str(patch), cwd=str(repo)))  # no snapshot taken
    assert done.returncode == 2
    assert _markers(done.stdout) == [f"{RESET_FAILED} (cannot restore {repo} to its start)"]
