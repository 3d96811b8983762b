"""R2E-Gym's recorded trajectories as our Trajectory, so the judge renders them like our own.

An R2E-Gym trajectory file (tests/data/r2e-gym) holds `trajectory_steps`, each with the
model's `thought`, its `action` (the `<function=...>` block) and the tool's `observation`, plus
`problem_statement`, `output_patch`, `exit_reason` and, once graded, `reward`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deepswe.env.agent.parser import parse_action
from deepswe.env.trajectory import Action, Ending, Step, Trajectory

# R2E-Gym's six exit reasons (src/r2egym/agenthub/agent/agent.py) -> our endings. R2E-Gym's
# "agent" means the agent called finish; every reason is kept verbatim in ending_detail.
ENDINGS = {
    "agent": Ending.SUBMITTED,
    "max_step_limit": Ending.MAX_STEPS,
    "agent_max_step_limit": Ending.MAX_STEPS,
    "abs_step_limit": Ending.MAX_STEPS,
    "token_limit": Ending.MAX_CONTEXT,
    "traj_time_limit": Ending.TIMEOUT,
}


def r2e_step(index: int, raw: Mapping[str, Any]) -> Step:
    thought, action = str(raw.get("thought") or ""), str(raw.get("action") or "")
    parsed = parse_action(action)
    call = Action(name=parsed.function_name, parameters=parsed.parameters)
    return Step(
        index=index,
        assistant=f"{thought.rstrip()}\n\n{action}".strip(),
        action=call if parsed.has_call else None,
        observation=str(raw.get("observation") or ""),
        prompt_tokens=raw.get("token_usage_prompt"),
        completion_tokens=raw.get("token_usage_completion"),
    )


def r2e_trajectory(record: Mapping[str, Any], instance_id: str) -> Trajectory:
    """One R2E-Gym trajectory record as a Trajectory (no messages: R2E-Gym does not keep the
    chat; the judge renders steps). Raises ValueError naming what is missing."""
    steps = record.get("trajectory_steps")
    if not isinstance(steps, list):
        raise ValueError(f"{instance_id}: no trajectory_steps list in the R2E-Gym record")
    reason = str(record.get("exit_reason") or "")
    reward = record.get("reward")
    return Trajectory(
        instance_id=instance_id,
        policy="r2e-gym:recorded",
        messages=[],
        steps=[r2e_step(i, s) for i, s in enumerate(steps)],
        ending=ENDINGS.get(reason, Ending.AGENT_ERROR),
        ending_detail=f"r2e-gym exit_reason {reason!r}",
        patch=str(record.get("output_patch") or ""),
        reward=None if reward is None else float(reward),
    )
