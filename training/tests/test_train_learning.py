"""The tiny model learns under GRPO++ (a short bench/learning.py), and the SFT warm start's
scripted fixes (deepswe.train.scripted_fixes).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from deepswe.train.scripted_fixes import fix_scripts

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
    from deepswe.data.toy import make_toy_tasks

    tasks = {t.instance_id.rsplit("-", 1)[1]: t for t in make_toy_tasks(tmp_path)}
    (right, finish), (wrong0, _), (wrong1, _) = (s for _, s in fix_scripts(tasks["add"], 2))
    assert (_param(right, "old_str"), _param(right, "new_str")) == (
        "    return a - b\n",
        "    return a + b\n",
    )
    assert _param(wrong0, "new_str") == "    # TODO: check this\n    return a - b\n"
    assert _param(wrong1, "new_str") == "    pass\n    return a - b\n"
    assert _param(wrong0, "old_str") == "    return a - b\n" and "finish" in finish
    (neg, _), *_ = (s for _, s in fix_scripts(tasks["neg"], 2))
    assert _param(neg, "old_str") == "def neg(a):\n    return a\n"
    assert _param(neg, "new_str") == "def neg(a):\n    return -a\n"


@pytest.mark.slow
@pytest.mark.docker
def test_grpo_raises_the_tiny_models_reward(tmp_path):
    """bench/learning.py, shortened: SFT on one toy task's scripted fixes (1 right : 2 wrong),
    then 10 GRPO++ steps of 2 x 4 real Docker episodes. Reward is measured before and after on
    the same 32 seeded episodes. Measured at 16 steps (training/README.md): 0.219 -> 0.875.
    About 8 minutes on 2 cores idle (SFT 4, measurements 1.5, GRPO++ 3), 12 under CI's load:
    a fifth of `make test`, so it runs where DEEPSWE_LEARNING is set (and as bench/learning.py)."""
    if not os.environ.get("DEEPSWE_LEARNING"):
        pytest.skip("a learning run of 8-12 minutes: set DEEPSWE_LEARNING=1 (or bench/learning.py)")
    bench = _bench()
    r = bench.learning_run(tmp_path, steps=10, eval_samples=32, log=print)
    curve = [round(s["reward/mean"], 3) for s in r.steps]
    print(f"baseline {r.baseline:.3f} -> final {r.final:.3f}; curve {curve}; {r.seconds}")
    assert r.sft_loss[-1] < 0.02, "the SFT warm start did not fit its scripted fixes"
    assert 0.05 <= r.baseline <= 0.5, "the SFT policy should pick the right fix about 1 in 3"
    assert r.gain >= 0.25 and r.final >= 0.5
    assert not any(s.get("actor/skipped") for s in r.steps)
