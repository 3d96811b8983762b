"""The SFT warm start's scripted fixes (deepswe.train.sft).

The learning test (SFT, then GRPO++ raising the reward by a clear margin) is not here: measured
with bench/learning.py it does not pass yet (0.25 -> 0.33 on one toy task), and a failing or
weakened assertion would say nothing. See training/README.md, "What does not work yet".
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from deepswe.train.sft import fix_scripts

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "bench" / "learning.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _param(action: str, key: str) -> str:
    return action.split(f"<parameter={key}>")[1].split("</parameter>")[0]


def test_scripted_fixes_are_short_unique_edits(tmp_path):
    """The right fix replaces only the buggy line, with the least context that makes the edit's
    stripped old text unique in the file (the agent's parser strips parameter values: a bare
    `return a` would match `return a - b` too); a wrong fix keeps the bug and adds a no-op
    line indented like it."""
    from deepswe.eval.toy import make_toy_tasks

    tasks = {t.instance_id.rsplit("-", 1)[1]: t for t in make_toy_tasks(tmp_path)}
    (right, finish), (wrong0, _), (wrong1, _) = (s for _, s in fix_scripts(tasks["add"], 2))
    assert (_param(right, "old_str"), _param(right, "new_str")) == (
        "    return a - b\n", "    return a + b\n")  # fmt: skip
    assert _param(wrong0, "new_str") == "    # TODO: check this\n    return a - b\n"
    assert _param(wrong1, "new_str") == "    pass\n    return a - b\n"
    assert _param(wrong0, "old_str") == "    return a - b\n" and "finish" in finish
    (neg, _), *_ = (s for _, s in fix_scripts(tasks["neg"], 2))
    assert _param(neg, "old_str") == "def neg(a):\n    return a\n"
    assert _param(neg, "new_str") == "def neg(a):\n    return -a\n"
