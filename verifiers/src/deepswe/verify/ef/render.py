"""What the execution-free judge reads: a system prompt, one user message, and the target.

The user message holds the issue, the agent's whole attempt (each step's reasoning, tool call and
what the tool returned) and the final patch, and ends with a YES/NO question; the judge answers
`<judgement>YES</judgement>` or `<judgement>NO</judgement>` (the form DeepSWE's verifier is
trained on: R2E-Gym's reproduction/DEEPSWE_TTS_REPRODUCTION.MD). The wording here is our own.

A prompt longer than the judge's budget is condensed as R2E-Gym and rLLM do: the longest
assistant thought (never the first, which states the plan) is replaced by a short placeholder,
again and again, until the prompt fits. Token counts come from the judge's own tokenizer, given
as a function of the chat; when nothing is left to condense the outcome is TOO_LONG.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from deepswe.env.agent.parser import parse_action
from deepswe.env.trajectory import Trajectory

Messages = list[dict[str, str]]
TokenCounter = Callable[[Messages], int]  # tokens of the chat as the judge will be prompted

TAG_OPEN, TAG_CLOSE = "<judgement>", "</judgement>"
OMITTED = "[reasoning omitted to fit the judge's context]"
NO_CALL = "(no tool call in this step)"

SYSTEM_PROMPT = (
    "You review fixes written by an AI coding agent. You are shown a GitHub issue, everything "
    "the agent did while working on it in the repository (its reasoning, each tool call, and "
    "what each call returned), and the patch it finally produced.\n\n"
    "Decide whether the patch resolves the issue: with the patch applied, the repository's "
    "hidden tests for this issue would pass and behaviour the issue does not ask to change "
    "would be kept. Judge the patch, not the effort: an attempt that looked careful can still "
    "leave the bug in place, and a short one can be right.\n\n"
    f"Answer with exactly {TAG_OPEN}YES{TAG_CLOSE} or {TAG_OPEN}NO{TAG_CLOSE}, nothing else."
)
QUESTION = (
    "Does the final patch resolve the issue? "
    f"Answer {TAG_OPEN}YES{TAG_CLOSE} or {TAG_OPEN}NO{TAG_CLOSE}."
)


@dataclass(frozen=True)
class JudgeStep:
    """One step of an attempt as the judge sees it."""

    thought: str
    action: str
    observation: str


class RenderStatus(str, Enum):
    FITS = "fits"
    TOO_LONG = "too_long"  # over budget with every thought but the first already condensed


@dataclass(frozen=True)
class JudgePrompt:
    """The judge's chat (system, user), its token count and how many thoughts were condensed."""

    messages: Messages
    tokens: int
    budget: int
    condensed: int
    status: RenderStatus


def judge_steps(trajectory: Trajectory) -> list[JudgeStep]:
    """A trajectory's steps: the reply split into thought and tool call, and the observation."""
    out = []
    for step in trajectory.steps:
        parsed = parse_action(step.assistant)
        action = parsed.to_xml() if parsed.has_call else NO_CALL
        out.append(JudgeStep(parsed.thought, action, step.observation))
    return out


def task_text(problem_statement: str, trajectory: Trajectory | None) -> str:
    """The issue: the candidate's problem statement, else the agent's first user message (the
    task as the agent was shown it, problem statement inside)."""
    if problem_statement.strip() or trajectory is None:
        return problem_statement
    return next((m["content"] for m in trajectory.messages if m["role"] == "user"), "")


def user_message(problem: str, steps: Sequence[JudgeStep], patch: str) -> str:
    parts = [
        f"# Issue\n\n<issue>\n{problem.strip()}\n</issue>",
        f"# The attempt ({len(steps)} steps)",
    ]
    for k, s in enumerate(steps, 1):
        parts.append(
            f"## Step {k}\n\n### Reasoning\n{s.thought.strip() or '(none)'}\n\n"
            f"### Action\n{s.action.strip()}\n\n### Observation\n{s.observation.strip()}"
        )
    shown = patch.strip() or "(empty: the agent changed nothing)"
    parts.append(f"# Final patch\n\n<patch>\n{shown}\n</patch>")
    parts.append(QUESTION)
    return "\n\n".join(parts)


def judge_messages(problem: str, steps: Sequence[JudgeStep], patch: str) -> Messages:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(problem, steps, patch)},
    ]


def judge_target(resolved: bool) -> dict[str, str]:
    """The assistant turn the judge is trained to produce."""
    return {"role": "assistant", "content": f"{TAG_OPEN}{'YES' if resolved else 'NO'}{TAG_CLOSE}"}


def render_prompt(
    problem: str, steps: Sequence[JudgeStep], patch: str, count: TokenCounter, budget: int
) -> JudgePrompt:
    """The judge's chat, condensed until `count(messages) <= budget` (tokens).

    Thoughts are replaced longest first (by the judge's tokens; the first never), each measured
    once; the whole chat is recounted whenever the running estimate says it fits.
    """
    steps = list(steps)
    messages = judge_messages(problem, steps, patch)
    total = count(messages)
    if total <= budget:
        return JudgePrompt(messages, total, budget, 0, RenderStatus.FITS)
    size = {i: count([{"role": "user", "content": steps[i].thought}]) for i in range(1, len(steps))}
    placeholder = count([{"role": "user", "content": OMITTED}])
    estimate, condensed = total, 0
    for i in sorted(size, key=lambda i: (-size[i], i)):
        if size[i] <= placeholder:
            break  # shorter thoughts would gain nothing
        steps[i] = replace(steps[i], thought=OMITTED)
        estimate, condensed = estimate - (size[i] - placeholder), condensed + 1
        if estimate <= budget:
            messages = judge_messages(problem, steps, patch)
            total = estimate = count(messages)
            if total <= budget:
                return JudgePrompt(messages, total, budget, condensed, RenderStatus.FITS)
    messages = judge_messages(problem, steps, patch)
    total = count(messages)
    status = RenderStatus.FITS if total <= budget else RenderStatus.TOO_LONG
    return JudgePrompt(messages, total, budget, condensed, status)
