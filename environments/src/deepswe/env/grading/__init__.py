"""Grading: a pure function from (task, test log) to an outcome and a 0/1 reward.

Containers only produce the log: `patch_apply_script` and the markers say what a sandbox
should run and print; `grade` reads the result.
"""

from deepswe.env.grading.grade import grade
from deepswe.env.grading.markers import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    INFRA_ERROR,
    START_TEST_OUTPUT,
    TESTS_TIMEOUT,
)
from deepswe.env.grading.outcomes import GradeResult, Outcome, TestStatus
from deepswe.env.grading.parsers import PARSERS, get_parser
from deepswe.env.grading.patch import patch_apply_script

__all__ = [
    "APPLY_PATCH_FAIL",
    "APPLY_PATCH_PASS",
    "END_TEST_OUTPUT",
    "INFRA_ERROR",
    "PARSERS",
    "START_TEST_OUTPUT",
    "TESTS_TIMEOUT",
    "GradeResult",
    "Outcome",
    "TestStatus",
    "get_parser",
    "grade",
    "patch_apply_script",
]
