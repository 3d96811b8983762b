"""The Task schema: what is public, what round-trips, what is rejected."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deepswe.data.task import (
    EnvironmentSpec,
    HiddenTests,
    PublicTask,
    Task,
    TaskSource,
    TestSpec,
)


def make_task(**over: object) -> Task:
    fields: dict[str, object] = {
        "instance_id": "pkg__pkg-1",
        "repo": "owner/pkg",
        "base_commit": "a" * 40,
        "problem_statement": "Calling f() with an empty list raises IndexError.",
        "source": TaskSource.SWE_MINI,
        "environment": EnvironmentSpec(source="/srv/repos/pkg", pip=["numpy==1.26.4"]),
        "test_spec": TestSpec(command="python -m pytest -rA tests/test_f.py", log_parser="pytest"),
        "hidden": HiddenTests(
            fail_to_pass=["tests/test_f.py::test_empty_list"],
            pass_to_pass=["tests/test_f.py::test_one"],
            test_patch="diff --git a/tests/test_f.py b/tests/test_f.py\n",
        ),
        "gold_patch": "diff --git a/pkg/f.py b/pkg/f.py\n",
        "metadata": {"created_at": "2024-01-01"},
    }
    fields.update(over)
    return Task(**fields)  # type: ignore[arg-type]


def test_task_round_trips_through_json_unchanged() -> None:
    task = make_task()
    again = Task.model_validate_json(task.model_dump_json())
    assert again == task
    assert again.source is TaskSource.SWE_MINI
    assert again.environment is not None and again.environment.base == "bookworm"


def test_public_view_holds_only_id_repo_and_statement() -> None:
    task = make_task()
    public = task.public()
    assert isinstance(public, PublicTask)
    assert set(public.model_dump()) == {"instance_id", "repo", "problem_statement"}
    text = public.model_dump_json()
    for secret in ("test_empty_list", "test_one", "tests/test_f.py", "pkg/f.py", "2024-01-01"):
        assert secret not in text


def test_unknown_field_is_rejected_by_name() -> None:
    with pytest.raises(ValidationError) as err:
        make_task(fail_to_pass=["x"])  # belongs under hidden, not at the top level
    assert err.value.errors()[0]["loc"] == ("fail_to_pass",)


def test_task_is_frozen() -> None:
    task = make_task()
    with pytest.raises(ValidationError):
        task.repo = "other/repo"  # type: ignore[misc]


def test_bad_base_image_and_timeout_are_rejected() -> None:
    with pytest.raises(ValidationError):
        EnvironmentSpec(source=".", base="alpine")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        TestSpec(command="pytest", log_parser="pytest", timeout_s=0)


def test_testspec_is_not_collected_by_pytest() -> None:
    """Regression: a pydantic class named Test* imported into a test module made pytest try to
    collect it (PytestCollectionWarning); TestSpec opts out with __test__ = False."""
    assert TestSpec.__test__ is False
