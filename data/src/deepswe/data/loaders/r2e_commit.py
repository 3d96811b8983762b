"""R2E-Gym's `parsed_commit_content` -> a gold patch (non-test files) and a test patch.

`parsed_commit_content` is a JSON object {file_diffs, old_commit_hash, new_commit_hash,
commit_message, commit_date, metadata}. Each file diff holds the file's full old and new
content, a header (path, misc_line such as "new file mode 100644"), an index line, the
---/+++ paths and its hunks; a hunk is a descriptor (old/new range, section) plus lines typed
context / added / deleted / note. We render each file diff as a `git diff`-style unified
diff, which `git apply` accepts, and split files with R2E-Gym's test-file rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

_MARK = {"context": " ", "added": "+", "deleted": "-", "note": "\\ "}

# R2E-Gym's FileDiff.is_test_file (r2egym/commit_models/diff_classes.py): a file is a test file
# when its path ends in "_test.py", its name starts with "test_", or any directory component
# is exactly one of these names.
_TEST_DIRS = frozenset({"tests", "Tests", "test", "Test"})


def is_test_file(path: str) -> bool:
    """R2E-Gym's test-file rule (see _TEST_DIRS)."""
    parts = path.split("/")
    return (
        path.endswith("_test.py") or parts[-1].startswith("test_") or bool(_TEST_DIRS & set(parts))
    )


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Range(_Model):
    start: int
    length: int | None = None

    def render(self) -> str:
        # unified-diff convention: an omitted length means 1
        return str(self.start) if self.length is None else f"{self.start},{self.length}"


class _Descriptor(_Model):
    old_range: _Range
    new_range: _Range
    section: str = ""


class _Line(_Model):
    content: str
    type: Literal["context", "added", "deleted", "note"]


class _LineGroup(_Model):
    all_lines: list[_Line] = []


class _Hunk(_Model):
    descriptor: _Descriptor
    line_group: _LineGroup


class _FileInfo(_Model):
    path: str


class _Header(_Model):
    file: _FileInfo
    misc_line: str | None = None


class _IndexLine(_Model):
    old_commit_hash: str
    new_commit_hash: str
    mode: str = ""


class FileDiff(_Model):
    header: _Header
    index_line: _IndexLine | None = None
    is_binary_file: bool = False
    binary_line: str | None = None
    minus_file: _FileInfo | None = None
    plus_file: _FileInfo | None = None
    hunks: list[_Hunk] = []
    old_file_content: str = ""
    new_file_content: str = ""

    @property
    def path(self) -> str:
        return self.header.file.path

    def render(self) -> str:
        """This file's diff in `git diff` form."""
        out = [f"diff --git a/{self.path} b/{self.path}"]
        if self.header.misc_line:
            out.append(self.header.misc_line)
        if self.index_line:
            ix = self.index_line
            out.append(
                f"index {ix.old_commit_hash}..{ix.new_commit_hash}"
                + (f" {ix.mode}" if ix.mode else "")
            )
        if self.minus_file and self.plus_file:
            out += [f"--- {self.minus_file.path}", f"+++ {self.plus_file.path}"]
        for hunk in self.hunks:
            d = hunk.descriptor
            head = f"@@ -{d.old_range.render()} +{d.new_range.render()} @@"
            out.append(f"{head} {d.section}" if d.section else head)
            out += [_MARK[line.type] + line.content for line in hunk.line_group.all_lines]
        return "\n".join(out) + "\n"


class ParsedCommit(_Model):
    file_diffs: list[FileDiff]
    old_commit_hash: str = ""
    new_commit_hash: str = ""
    commit_message: str = ""
    commit_date: str = ""


@dataclass(frozen=True)
class CommitPatches:
    """A commit split into the fix and its tests; binary diffs cannot be rendered from the
    row (git needs the blobs), so they are left out and listed."""

    gold_patch: str
    test_patch: str
    gold_files: list[str] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)
    skipped_binary: list[str] = field(default_factory=list)


def parse_commit(content: str | dict[str, Any]) -> ParsedCommit:
    """Validate `parsed_commit_content` (a JSON string, or already decoded)."""
    data = json.loads(content) if isinstance(content, str) else content
    return ParsedCommit.model_validate(data)


def split_commit(commit: ParsedCommit) -> CommitPatches:
    """Gold patch = every non-test text file's diff; test patch = every test file's diff.

    Unlike R2E-Gym's `get_patch(only_python=True)` default, non-Python files (changelogs,
    docs) stay in the gold patch: they are part of the reference change and apply cleanly.
    """
    gold, tests, gold_files, test_files, binary = [], [], [], [], []
    for fd in commit.file_diffs:
        if fd.is_binary_file:
            binary.append(fd.path)
        elif is_test_file(fd.path):
            tests.append(fd.render())
            test_files.append(fd.path)
        else:
            gold.append(fd.render())
            gold_files.append(fd.path)
    return CommitPatches("".join(gold), "".join(tests), gold_files, test_files, binary)
