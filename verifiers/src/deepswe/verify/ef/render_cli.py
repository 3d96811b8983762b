"""`deepswe-verify render`: a recorded R2E-Gym trajectory's judge prompt, in either format.

    deepswe-verify render --recorded traj.json --format r2e-gym --tokenizer runs/models/tiny-qwen3

r2e-gym: R2E-Gym's verifier input (r2e_input.from_record: the record as traj2verifier_data reads
it, its own reward and patch rules included). ours: render.py over the record read as our
Trajectory (r2e.r2e_trajectory), for comparison.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deepswe.verify.ef.r2e import r2e_trajectory
from deepswe.verify.ef.r2e_input import from_record, render_r2e
from deepswe.verify.ef.render import JudgePrompt, judge_steps, render_prompt, task_text
from deepswe.verify.ef.score import DEFAULT_BUDGETS, EF_FORMATS


class RenderError(ValueError):
    """Bad input to `render`: the message names the file and what is wrong."""


def read_record(path: Path, index: int = 0) -> dict[str, Any]:
    """One trajectory record: a .json file's object, or line `index` of a .jsonl."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise RenderError(f"{path}: cannot read ({e.strerror})") from None
    where = str(path)
    if path.suffix == ".jsonl":
        lines = [line for line in text.splitlines() if line.strip()]
        if index >= len(lines):
            raise RenderError(f"{path}: --index {index}, but it holds {len(lines)} records")
        text, where = lines[index], f"{path}:{index + 1}"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise RenderError(f"{where}: not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(record, dict) or not isinstance(record.get("trajectory_steps"), list):
        raise RenderError(f"{where}: not an R2E-Gym trajectory record (no trajectory_steps list)")
    bad = [i for i, s in enumerate(record["trajectory_steps"]) if not isinstance(s, dict)]
    if bad:
        raise RenderError(f"{where}: trajectory_steps[{bad[0]}] is not an object")
    return record


def render_recorded(
    path: Path, tokenizer: Path, fmt: str, max_tokens: int | None = None, index: int = 0
) -> JudgePrompt:
    """The judge's chat for the record at `path` in format `fmt`, counted by `tokenizer`."""
    from deepswe.verify.ef.tokens import ChatTokens, load_tokenizer

    if fmt not in EF_FORMATS:
        raise RenderError(f"--format must be one of {', '.join(EF_FORMATS)}, not {fmt!r}")
    record = read_record(path, index)
    if not tokenizer.is_dir():
        raise RenderError(f"--tokenizer {tokenizer}: no such folder")
    try:
        tokens = ChatTokens(load_tokenizer(tokenizer))
    except (OSError, ValueError) as e:
        raise RenderError(f"--tokenizer {tokenizer}: {e}") from None
    budget = max_tokens or DEFAULT_BUDGETS[fmt]
    if fmt == "r2e-gym":
        return render_r2e(from_record(record), tokens.count_text, budget)
    try:
        traj = r2e_trajectory(record, path.stem)
    except ValueError as e:
        raise RenderError(f"{path}: {e}") from None
    problem = task_text(str(record.get("problem_statement") or ""), traj)
    return render_prompt(problem, judge_steps(traj), traj.patch, tokens, budget)
