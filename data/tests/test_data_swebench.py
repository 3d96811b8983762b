"""SWE-bench rows in their real on-disk form (FAIL_TO_PASS/PASS_TO_PASS as JSON-encoded
strings) from .jsonl, .parquet (pyarrow and `datasets`) and `datasets.load_dataset`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from deepswe.data.cli import app
from deepswe.data.datasets import load_tasks
from deepswe.data.errors import DataError
from deepswe.data.loaders import load_swebench
from deepswe.data.loaders.hub import hub_rows
from deepswe.data.loaders.swebench import swebench_image, swebench_row_to_task
from deepswe.data.task import TaskSource

DJANGO_PATCH = "\n".join(
    [
        "diff --git a/django/contrib/auth/validators.py b/django/contrib/auth/validators.py",
        "--- a/django/contrib/auth/validators.py",
        "+++ b/django/contrib/auth/validators.py",
        "@@ -7,7 +7,7 @@",
        " ",  # a blank context line is one space: keep it out of a triple-quoted string
        " @deconstructible",
        " class ASCIIUsernameValidator(validators.RegexValidator):",
        "-    regex = r'^[\\w.@+-]+$'",
        "+    regex = r'^[\\w.@+-]+\\Z'",
        "     message = _(",
        "",
    ]
)
DJANGO_TEST_PATCH = """diff --git a/tests/auth_tests/test_validators.py b/tests/auth_tests/test_validators.py
--- a/tests/auth_tests/test_validators.py
+++ b/tests/auth_tests/test_validators.py
@@ -237,7 +237,7 @@ def test_unicode_validator(self):
-        invalid_usernames = ["o'connell", "عبد ال"]
+        invalid_usernames = ["o'connell", "عبد ال", "trailingnewline\\u000A"]
"""


def swebench_rows() -> list[dict]:
    """Two rows shaped exactly like princeton-nlp/SWE-bench_Verified's."""
    return [
        {
            "repo": "django/django",
            "instance_id": "django__django-11099",
            "base_commit": "d26b2424437dabeeca94d7900b37d2df4410da0c",
            "patch": DJANGO_PATCH,
            "test_patch": DJANGO_TEST_PATCH,
            "problem_statement": "UsernameValidator allows trailing newline in usernames\n",
            "hints_text": "",
            "created_at": "2019-03-20T03:46:18Z",
            "version": "3.0",
            "FAIL_TO_PASS": json.dumps(
                [
                    "test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)",
                    "test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)",
                ]
            ),
            "PASS_TO_PASS": json.dumps(
                ["test_help_text (auth_tests.test_validators.MinimumLengthValidatorTest)"]
            ),
            "environment_setup_commit": "419a78300f7cd27611196e1e464d50fd0385ff27",
            "difficulty": "<15 min fix",
        },
        {
            "repo": "astropy/astropy",
            "instance_id": "astropy__astropy-12907",
            "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
            "patch": "diff --git a/astropy/modeling/separable.py b/astropy/modeling/separable.py\n",
            "test_patch": "diff --git a/astropy/modeling/tests/test_separable.py b/astropy/modeling/tests/test_separable.py\n",
            "problem_statement": "Modeling's `separability_matrix` does not compute separability correctly for nested CompoundModels\n",
            "hints_text": "",
            "created_at": "2022-03-03T15:14:54Z",
            "version": "4.3",
            "FAIL_TO_PASS": json.dumps(
                [
                    "astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]",
                    "astropy/modeling/tests/test_separable.py::test_separable[compound_model9-result9]",
                ]
            ),
            "PASS_TO_PASS": json.dumps(
                ["astropy/modeling/tests/test_separable.py::test_coord_matrix"]
            ),
            "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
            "difficulty": "15 min - 1 hour",
        },
    ]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def check_django(tasks: list) -> None:
    t = {x.instance_id: x for x in tasks}["django__django-11099"]
    assert t.source is TaskSource.SWE_BENCH_VERIFIED
    assert t.image == "swebench/sweb.eval.x86_64.django_1776_django-11099"
    assert t.hidden.fail_to_pass == [
        "test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)",
        "test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)",
    ]
    assert t.hidden.pass_to_pass == [
        "test_help_text (auth_tests.test_validators.MinimumLengthValidatorTest)"
    ]
    assert t.hidden.test_patch == DJANGO_TEST_PATCH and t.gold_patch == DJANGO_PATCH
    assert (t.test_spec.command, t.test_spec.log_parser) == ("", "swebench")
    assert (t.version, t.environment_setup_commit) == (
        "3.0",
        "419a78300f7cd27611196e1e464d50fd0385ff27",
    )
    assert t.metadata == {"created_at": "2019-03-20T03:46:18Z", "difficulty": "<15 min fix"}


def test_jsonl_rows_load(tmp_path: Path) -> None:
    tasks = load_swebench(write_jsonl(tmp_path / "verified.jsonl", swebench_rows()))
    assert [t.instance_id for t in tasks] == ["django__django-11099", "astropy__astropy-12907"]
    check_django(tasks)
    assert tasks[1].hidden.fail_to_pass[0].endswith("test_separable[compound_model6-result6]")


def test_parquet_written_by_pyarrow_loads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(swebench_rows()), path)
    from_parquet = load_swebench(path)
    check_django(from_parquet)
    assert from_parquet == load_swebench(write_jsonl(tmp_path / "v.jsonl", swebench_rows()))


def test_parquet_written_by_datasets_and_read_back_through_load_dataset(tmp_path: Path) -> None:
    """The Hub path is `datasets.load_dataset(name, split)`; pointed at a local folder laid out
    like a Hub repo it runs the same code offline."""
    repo = tmp_path / "SWE-bench_Verified"
    (repo / "data").mkdir(parents=True)
    datasets.Dataset.from_list(swebench_rows()).to_parquet(
        str(repo / "data" / "test-00000-of-00001.parquet")
    )
    rows = hub_rows(str(repo), "test", cache_dir=str(tmp_path / "hf-cache"))
    tasks = [swebench_row_to_task(r.data) for r in rows]
    check_django(tasks)
    assert load_swebench(repo / "data" / "test-00000-of-00001.parquet") == tasks


def test_numeric_version_from_a_dataframe_is_kept_as_text(tmp_path: Path) -> None:
    row = swebench_rows()[1] | {"version": 4.3}
    assert load_swebench(write_jsonl(tmp_path / "v.jsonl", [row]))[0].version == "4.3"


def test_bad_fail_to_pass_names_line_and_field(tmp_path: Path) -> None:
    good, bad = swebench_rows()
    bad["FAIL_TO_PASS"] = "[astropy/modeling/tests/test_separable.py::test_coord_matrix"  # not JSON
    path = write_jsonl(tmp_path / "v.jsonl", [good, bad])
    with pytest.raises(DataError) as err:
        load_tasks(path)
    (issue,) = err.value.issues
    assert (issue.where, issue.field) == (f"{path}:2", "FAIL_TO_PASS")
    assert "JSON-encoded list" in issue.message


def test_missing_local_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_swebench(tmp_path / "nope.parquet")


def test_image_name_is_lowercased() -> None:
    assert swebench_image("Foo__Bar-12") == "swebench/sweb.eval.x86_64.foo_1776_bar-12"


def test_validate_names_the_parquet_row_and_field(tmp_path: Path) -> None:
    good, bad = swebench_rows()
    bad["PASS_TO_PASS"] = json.dumps({"not": "a list"})
    path = tmp_path / "verified.parquet"
    pq.write_table(pa.Table.from_pylist([good, bad]), path)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:2: PASS_TO_PASS: Input should be a valid list" in result.output


class _Recording(BaseHTTPRequestHandler):
    """A Hub stand-in that records what the client asks and has nothing (404 to everything)."""

    seen: list[str] = []

    def _answer(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(b'{"error": "Repository not found"}')

    do_GET = do_HEAD = do_POST = _answer  # noqa: N815 (http.server's names)

    def log_message(self, *args) -> None:
        pass


def test_a_named_revision_of_verified_reaches_the_hub(tmp_path):
    """`swe-bench-verified@<rev>` loads that revision (SWE-bench corrected Verified after the
    first one): the unmodified `datasets` client asks a local stand-in for the Hub for files at
    that revision. It proves the revision reaches the wire, not a whole load from the Hub. A
    child process: huggingface_hub reads HF_ENDPOINT when it is first imported."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recording)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "HF_HOME": str(tmp_path / "hf"),
    }
    code = "from deepswe.data.datasets import load_tasks; load_tasks('swe-bench-verified@0123abcd')"
    try:
        run = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
    finally:
        server.shutdown()
    assert run.returncode != 0 and "SWE-bench_Verified@0123abcd" in run.stderr
    assert any("/SWE-bench_Verified/resolve/0123abcd/" in s for s in _Recording.seen)
    with pytest.raises(DataError, match="no revision after '@'"):
        load_tasks("swe-bench-verified@")
