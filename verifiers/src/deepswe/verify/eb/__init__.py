"""Execution-based verifiers (placeholder docstring, completed below)."""

from deepswe.verify.eb.common import SandboxPlan
from deepswe.verify.eb.regression import score_regression

__all__ = ["SandboxPlan", "score_regression"]
