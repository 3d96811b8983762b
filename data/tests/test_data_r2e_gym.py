"""R2E-Gym rows -> tasks, on the five real rows in the shared fixtures."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unidiff import PatchSet

from deepswe.data.datasets import load_tasks
from deepswe.data.errors import DataError
from deepswe.data.loaders import load_r2e_gym
from deepswe.data.loaders.r2e_commit import is_test_file, parse_commit, split_commit
from deepswe.data.loaders.r2e_gym import r2e_row_to_task
from deepswe.data.loaders.r2e_test_log import decolor, summary_statuses
from deepswe.data.task import TaskSource

FIXTURES = Path(os.environ["DEEPSWE_R2E_FIXTURES"])
FILES = sorted(FIXTURES.glob("trajectory_*.json"))

# What each real row yields: (#fail_to_pass, #pass_to_pass, gold files, test files).
EXPECTED = {
    "aiohttp_0813710e": (
        1,
        17,
        ["CHANGES.txt", "aiohttp/__init__.py", "aiohttp/wsgi.py"],
        ["tests/test_wsgi.py"],
    ),
    "aiohttp_216e0828": (
        2,
        17,
        ["CHANGES/9451.bugfix.rst", "aiohttp/resolver.py"],
        ["tests/test_resolver.py"],
    ),
    "orange3_2d9617bd": (
        1,
        9,
        ["Orange/widgets/settings.py", "doc/development/source/tutorial-settings.rst"],
        ["Orange/widgets/tests/test_context_handler.py"],
    ),
    "orange3_56706b60": (
        1,
        27,
        ["Orange/preprocess/discretize.py"],
        ["Orange/tests/test_discretize.py"],
    ),
    "pillow_0836e388": (
        1,
        14,
        ["src/PIL/PdfImagePlugin.py", "src/PIL/PdfParser.py"],
        ["Tests/test_file_pdf.py"],
    ),
}


def rows() -> list[dict]:
    assert len(FILES) == 5, f"expected the five R2E-Gym fixture files in {FIXTURES}"
    return [json.loads(f.read_text())["env_args"]["ds"] for f in FILES]


def test_all_five_fixtures_load_with_the_expected_shape() -> None:
    tasks = {t.instance_id: t for t in load_r2e_gym(FIXTURES)}
    assert set(tasks) == set(EXPECTED)
    for iid, (n_f2p, n_p2p, gold_files, test_files) in EXPECTED.items():
        t = tasks[iid]
        assert t.source is TaskSource.R2E_GYM
        assert (len(t.hidden.fail_to_pass), len(t.hidden.pass_to_pass)) == (n_f2p, n_p2p)
        assert [p.path for p in PatchSet(t.gold_patch)] == gold_files
        assert [p.path for p in PatchSet(t.hidden.test_patch)] == test_files
        assert (
            t.image
            and t.image.startswith("namanjain12/")
            and t.image.endswith(t.metadata["commit_hash"])
        )
        assert t.base_commit == t.metadata["commit_hash"] + "^"
        # R2E-Gym's tests_cmd for the repository, not the image's run_tests.sh
        assert t.test_spec.command.endswith(".venv/bin/python -W ignore -m pytest -rA r2e_tests")
        assert t.test_spec.log_parser == "r2e-gym" and t.test_spec.grading_rules == "strict"
        assert ("xvfb-run" in t.test_spec.command) == t.instance_id.startswith("orange3")
        assert t.metadata["test_lists_from"] == "execution_result"
        assert "test_1.py" in t.hidden.test_files
        assert "[ISSUE]" not in t.problem_statement and t.problem_statement.startswith("**Title:**")
    assert tasks["aiohttp_0813710e"].repo == "aio-libs/aiohttp"
    assert tasks["pillow_0836e388"].hidden.fail_to_pass == ["test_resolution"]
    assert tasks["orange3_56706b60"].hidden.fail_to_pass == ["TestBinning.test_decimal_binnings"]


def test_expected_statuses_keep_ansi_codes_but_test_lists_do_not() -> None:
    pillow = next(t for t in load_r2e_gym(FIXTURES) if t.instance_id == "pillow_0836e388")
    assert pillow.hidden.expected_statuses is not None
    assert "\x1b[1mtest_resolution\x1b[0m" in pillow.hidden.expected_statuses
    assert all("\x1b" not in n for n in pillow.hidden.fail_to_pass + pillow.hidden.pass_to_pass)


def test_patch_split_follows_the_test_file_rule() -> None:
    for row in rows():
        commit = parse_commit(row["parsed_commit_content"])
        patches = split_commit(commit)
        assert patches.gold_files and patches.test_files
        assert not any(is_test_file(p) for p in patches.gold_files)
        assert all(is_test_file(p) for p in patches.test_files)
        assert sorted(patches.gold_files + patches.test_files) == sorted(row["modified_files"])
        # hunk headers agree with the lines under them (unidiff raises on a mismatch)
        for patch in (patches.gold_patch, patches.test_patch):
            parsed = PatchSet(patch)
            assert all(
                h.source_length == len(h.source) and h.target_length == len(h.target)
                for f in parsed
                for h in f
            )


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("tests/test_wsgi.py", True),
        ("Tests/test_file_pdf.py", True),
        ("Orange/widgets/tests/test_context_handler.py", True),
        ("pkg/test/data.json", True),
        ("pkg/foo_test.py", True),
        ("test_top.py", True),
        ("pkg/testing.py", False),
        ("pkg/contest.py", False),
        ("aiohttp/test_utils.py", True),  # R2E-Gym counts any test_* file name
        ("docs/tests.rst", False),
    ],
)
def test_r2e_gym_test_file_rule(path: str, is_test: bool) -> None:
    assert is_test_file(path) is is_test


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def test_patches_apply_with_git_and_rebuild_the_new_commit(tmp_path: Path) -> None:
    """Each row carries every touched file's old and new content: a scratch repo holding the
    old files must accept both patches (`git apply --check`, then apply) and end up equal to
    the new files byte for byte."""
    for i, row in enumerate(rows()):
        repo = tmp_path / f"r{i}"
        assert _git(tmp_path, "init", "-q", str(repo)).returncode == 0
        commit = parse_commit(row["parsed_commit_content"])
        for fd in commit.file_diffs:
            if fd.minus_file and fd.minus_file.path != "/dev/null":
                (repo / fd.path).parent.mkdir(parents=True, exist_ok=True)
                (repo / fd.path).write_text(fd.old_file_content)
        patches = split_commit(commit)
        for name, patch in (("gold", patches.gold_patch), ("test", patches.test_patch)):
            (repo / f"{name}.diff").write_text(patch)
            check = _git(repo, "apply", "--check", f"{name}.diff")
            assert check.returncode == 0, check.stderr
            assert _git(repo, "apply", f"{name}.diff").returncode == 0
        for fd in commit.file_diffs:
            assert (repo / fd.path).read_text() == fd.new_file_content, fd.path


def test_summary_parser_reads_new_commit_runs_as_the_expected_statuses() -> None:
    """The new-commit run is where expected_output_json came from: our summary parser must
    name the same tests with the same statuses (this pins the naming F2P/P2P rely on)."""
    for row in rows():
        execution = json.loads(row["execution_result_content"])
        parsed = {
            decolor(k): v for k, v in summary_statuses(execution["new_commit_res_stdout"]).items()
        }
        expected = {decolor(k): v for k, v in json.loads(row["expected_output_json"]).items()}
        assert parsed == expected


def test_hub_rows_without_instance_id_get_r2e_gyms_naming() -> None:
    """The Hub rows carry no instance_id (the fixtures added one): derive repo_commit[:8]."""
    row = {k: v for k, v in rows()[4].items() if k != "instance_id"}
    assert r2e_row_to_task(row).instance_id == "pillow_0836e388"


def test_without_execution_results_every_expected_pass_is_fail_to_pass() -> None:
    row = dict(rows()[0])
    del row["execution_result_content"]
    task = r2e_row_to_task(row)
    assert task.metadata["test_lists_from"] == "expected_output_json"
    assert len(task.hidden.fail_to_pass) == 18 and task.hidden.pass_to_pass == []
    assert task.hidden.test_files == {}


def test_public_view_leaks_no_hidden_material() -> None:
    for task in load_tasks(FIXTURES):
        public = task.public()
        text = " ".join(public.model_dump().values())
        assert public.model_dump_json().count("fail_to_pass") == 0
        for name in task.hidden.fail_to_pass + task.hidden.pass_to_pass:
            assert name not in text, name
        assert task.hidden.test_patch not in text and task.gold_patch not in text
        for code in task.hidden.test_files.values():
            assert code not in text
        assert "r2e_tests" not in text and "diff --git" not in text


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k) + _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_execution_results_never_stored_on_the_task() -> None:
    for row, task in zip(rows(), load_r2e_gym(FIXTURES), strict=True):
        execution = json.loads(row["execution_result_content"])
        stored = _strings(task.model_dump())
        for log in ("old_commit_res_stdout", "new_commit_res_stdout", "setup_res_stdout"):
            assert execution[log] and not any(execution[log] in s for s in stored), log


def test_bad_parsed_commit_names_the_nested_field(tmp_path: Path) -> None:
    row = dict(rows()[0])
    commit = json.loads(row["parsed_commit_content"])
    commit["file_diffs"][1]["hunks"][0]["line_group"]["all_lines"][0]["type"] = "moved"
    row["parsed_commit_content"] = json.dumps(commit)
    bad = tmp_path / "rows.jsonl"
    bad.write_text(json.dumps(rows()[1]) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError) as err:
        load_r2e_gym(bad)
    (issue,) = err.value.issues
    assert issue.where == f"{bad}:2"
    assert issue.field == "parsed_commit_content.file_diffs.1.hunks.0.line_group.all_lines.0.type"


_SEGMENT = st.sampled_from(["src", "pkg", "tests", "Tests", "test", "testing", "docs", "core"])
_NAME = st.sampled_from(
    ["test_io.py", "io_test.py", "io.py", "contest.py", "README.rst", "conftest.py"]
)


@st.composite
def commits(draw: st.DrawFn) -> dict:
    """parsed_commit_content-shaped commits over random paths, one valid hunk per file."""
    paths = draw(
        st.lists(
            st.builds(lambda d, n: "/".join([*d, n]), st.lists(_SEGMENT, max_size=3), _NAME),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    diffs = []
    for path in paths:
        kinds = draw(
            st.lists(st.sampled_from(["context", "added", "deleted"]), min_size=1, max_size=6)
        )
        lines = [{"content": f"line {i}", "type": k} for i, k in enumerate(kinds)]
        old_len = sum(k != "added" for k in kinds)
        new_len = sum(k != "deleted" for k in kinds)
        diffs.append(
            {
                "header": {"file": {"path": path}},
                "minus_file": {"path": f"a/{path}"},
                "plus_file": {"path": f"b/{path}"},
                "is_binary_file": draw(st.booleans()) and draw(st.booleans()),
                "binary_line": f"Binary files a/{path} and b/{path} differ",
                "hunks": [
                    {
                        "descriptor": {
                            "old_range": {"start": 1, "length": old_len},
                            "new_range": {"start": 1, "length": new_len},
                            "section": "",
                        },
                        "line_group": {"all_lines": lines},
                    }
                ],
            }
        )
    return {"file_diffs": diffs, "old_commit_hash": "abc^", "new_commit_hash": "abc"}


@settings(max_examples=200, deadline=None)
@given(commits())
def test_split_property_every_file_lands_on_exactly_one_side(commit: dict) -> None:
    patches = split_commit(parse_commit(commit))
    text_files = [
        d["header"]["file"]["path"] for d in commit["file_diffs"] if not d["is_binary_file"]
    ]
    assert sorted(patches.gold_files + patches.test_files) == sorted(text_files)
    assert len(patches.skipped_binary) == len(commit["file_diffs"]) - len(text_files)
    assert [p.path for p in PatchSet(patches.gold_patch)] == patches.gold_files
    assert [p.path for p in PatchSet(patches.test_patch)] == patches.test_files
    assert not any(is_test_file(p) for p in patches.gold_files)
    assert all(is_test_file(p) for p in patches.test_files)


def test_rows_graded_by_r2e_gyms_runner_scripts_get_their_command() -> None:
    """R2E-Gym's run_tests.sh for tornado rows, and Pillow rows of unittest classes, runs the
    runner script it ships among the row's test files (repo_testextract.py)."""
    from deepswe.data.loaders.r2e_gym import r2e_test_command

    assert r2e_test_command("tornado", ["test_1.py", "tornado_unittest_runner.py"]) == (
        ".venv/bin/python -W ignore r2e_tests/tornado_unittest_runner.py"
    )
    assert r2e_test_command("pillow", ["test_1.py", "unittest_custom_runner.py"]).endswith(
        "r2e_tests/unittest_custom_runner.py"
    )
    assert r2e_test_command("pillow", ["test_1.py"]).endswith("-m pytest -rA r2e_tests")


def test_the_python_r2e_gyms_install_kept_is_in_the_metadata() -> None:
    tasks = {t.instance_id: t for t in load_r2e_gym(FIXTURES)}
    assert tasks["orange3_56706b60"].metadata["r2e_setup_python"] == "3.7"
    assert tasks["aiohttp_0813710e"].metadata["r2e_setup_python"] == "3.9"
