"""The baselines a verifier must beat, on patches and a pool made by hand: what "changes
non-test code" and "smallest patch" read from a patch, their Best@k and AUC (pooled and within
task) counted by hand, and a verifier's gain over the best of them."""

from __future__ import annotations

import pytest

from deepswe.verify.auc import auc_report, score_table, within_task_auc
from deepswe.verify.baselines import baseline_scores, patch_facts
from deepswe.verify.curves import method_curve
from deepswe.verify.gains import best_at_k_gains
from deepswe.verify.report_scores import points_of
from deepswe.verify.types import Scores


def diff(path: str, old: list[str], new: list[str]) -> str:
    body = "".join(f"-{x}\n" for x in old) + "".join(f"+{x}\n" for x in new)
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -1,{len(old) + 1} +1,{len(new) + 1} @@\n def f(a, b):\n{body}"
    )


FIX = diff("src/pkg/ops.py", ["    return a - b"], ["    return a + b"])
COMMENT_ABOVE = diff("src/pkg/ops.py", [], ["    # fix: handle this case as the issue describes"])
COMMENT_BESIDE = diff("src/pkg/ops.py", ["    return a - b"], ["    return a - b  # see the issue"])
HASH_IN_STRING = diff("src/pkg/ops.py", ["    x = 'a'"], ["    x = '#a'"])
TEST_ONLY = diff("tests/test_ops.py", ["    assert f(1, 1) == 0"], ["    assert f(1, 1) == 2"])
DOCS_ONLY = diff("docs/usage.rst", ["old words"], ["new words"])
BIGGER = diff("src/pkg/ops.py", ["    return a - b"], ["    c = a", "    c += b", "    return c"])
# two statements swapped: the same lines in another order still change the code (if/else swaps)
SWAP = diff("src/pkg/ops.py", ["    x = 1", "    y = 2"], ["    y = 2", "    x = 1"])
# a removed line whose text starts with "--" is a line of the hunk, not a file header
DASHES = diff("src/pkg/sql.py", ["-- x", "    q = 1"], ["-- x", "    q = 2"])


@pytest.mark.parametrize(
    ("patch", "changes", "lines"),
    [
        (FIX, True, 2),
        (COMMENT_ABOVE, False, 0),  # the old scripted wrong fix: a comment line above the bug
        (COMMENT_BESIDE, False, 0),  # ... or a comment after it on the same line
        (HASH_IN_STRING, True, 2),  # a '#' inside a string is code
        (TEST_ONLY, False, 0),  # tests are not the code under repair
        (DOCS_ONLY, False, 0),
        (BIGGER, True, 4),
        (DASHES, True, 2),
        (SWAP, True, 2),
        ("", False, 0),
    ],
)
def test_patch_facts(patch, changes, lines):
    facts = patch_facts(patch)
    assert (facts.changes_code, facts.code_lines) == (changes, lines)
    s = baseline_scores(patch)
    assert s["changes_code"] == float(changes)
    assert s["smallest"] == (1 / (1 + lines) if changes else 0.0)


def hand_pool() -> dict[str, list[Scores]]:
    """Two tasks. a: the fix (resolved), a comment, a wrong code edit, nothing. b: a bigger
    resolved fix, a smaller wrong edit, a comment."""

    def s(run: int, resolved: bool, patch: str, ef: float) -> Scores:
        return Scores(run=run, resolved=resolved, ef=ef, **baseline_scores(patch))

    wrong = diff("src/pkg/ops.py", ["    return a - b"], ["    return a * b"])
    return {
        "a": [
            s(0, True, FIX, 0.9),
            s(1, False, COMMENT_ABOVE, 0.1),
            s(2, False, wrong, 0.2),
            s(3, False, "", 0.1),
        ],
        "b": [s(0, True, BIGGER, 0.3), s(1, False, wrong, 0.8), s(2, False, COMMENT_BESIDE, 0.1)],
    }


def test_baselines_best_at_n_counted_by_hand():
    pools = hand_pool()
    at_n = {
        m: method_curve(pools, m).points[-1].mean
        for m in ("changes-code", "smallest", "random", "oracle")
    }
    # changes-code: a ties the fix with the wrong edit (1/2), b the two code edits (1/2)
    assert at_n["changes-code"] == pytest.approx(0.5)
    # smallest: a ties fix and wrong edit (both 2 lines: 1/2); b picks the 2-line wrong edit (0)
    assert at_n["smallest"] == pytest.approx(0.25)
    assert at_n["random"] == pytest.approx((1 / 4 + 1 / 3) / 2)
    assert at_n["oracle"] == 1.0


def test_baseline_aucs_counted_by_hand():
    pools = hand_pool()
    code = points_of(pools, "changes-code")
    # each resolved candidate beats the 3 non-code negatives and ties the 2 code ones: 4/5
    assert auc_report(code, bootstrap=50)["auc"] == pytest.approx(0.8)
    assert within_task_auc(code) == pytest.approx((2.5 + 1.5) / 5)
    small = points_of(pools, "smallest")
    assert auc_report(small, bootstrap=50)["auc"] == pytest.approx(0.7)
    assert within_task_auc(small) == pytest.approx((2.5 + 1.0) / 5)
    assert auc_report(points_of(pools, "random"), bootstrap=50)["auc"] == 0.5


def test_a_verifier_is_worth_its_gain_over_the_best_baseline():
    pools = hand_pool()
    gains = best_at_k_gains(pools, [4], methods=["ef"])  # k = N: each whole pool
    (row,) = gains["rows"]
    # ef picks the fix in a (1) and the wrong edit in b (0); changes-code gets 1/2 in each
    assert (row["best_baseline"], row["value"], row["baseline"]) == ("changes-code", 0.5, 0.5)
    assert row["gain"] == pytest.approx(0.0) and row["stderr"] == pytest.approx(0.5)
    table = score_table(
        {n: points_of(pools, n) for n in ("ef", "changes-code", "smallest")},
        ["ef"],
        ["changes-code", "smallest"],
        bootstrap=200,
    )
    g = table["gains"]["ef"]["within_task_auc"]
    # ef within task: a 3/3, b 1/2 -> 4/5; the best baseline (changes-code) 4/5
    assert g["best_baseline"] == "changes-code" and g["gain"] == pytest.approx(0.0)
    lo, hi = g["bootstrap"]["ci95"]
    assert lo <= 0.0 <= hi
