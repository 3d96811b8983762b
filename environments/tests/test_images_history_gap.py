"""A clone's gaps, told apart: objects missing from old history (cut, the row builds) and
objects missing from the base commit's own tree (the row cannot be built from this clone)."""

from __future__ import annotations

from deepswe.data.toy import commit_repo, git
from deepswe.env.images.history import base_tree_gap, lacks_base_tree


def test_only_a_gap_in_the_base_tree_itself_is_reported(tmp_path):
    repo = tmp_path / "r"
    old = commit_repo(repo, {"old.txt": "gone later\n", "f.py": "X = 1\n"}, "old")
    old_blob = git(repo, "rev-parse", f"{old}:old.txt").strip()
    git(repo, "rm", "-q", "old.txt")
    git(repo, "commit", "-q", "-m", "drop old.txt")
    base = git(repo, "rev-parse", "HEAD").strip()
    assert base_tree_gap(repo, base) is None
    (repo / ".git" / "objects" / old_blob[:2] / old_blob[2:]).unlink()
    assert base_tree_gap(repo, base) is None  # history only: the cut's business
    assert base_tree_gap(repo, old) == old_blob
    assert lacks_base_tree(repo, "0" * 40) is None  # no such commit: the commit check says so
    assert old_blob in (lacks_base_tree(repo, old) or "")
