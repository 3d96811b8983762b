"""R2E-Gym's verifier input: the chat DeepSWE's published verifier was trained on.

Source, read and restated (not copied): agentica-project/R2E-Gym at 353348a0,
src/r2egym/agenthub/verifiers/prepare_ef_verifier_input.py (`traj2verifier_data`,
`deepswe_condense_thoughts`, `compute_total_tokens`); run_ef_verifier.py asks the verifier with
the first two of its three messages. How a reply becomes a step: src/r2egym/agenthub/agent/
agent.py (`parse_response`). The patch shown: r2e_patch.py. Checked against R2E-Gym's own
function: verifiers/tests/fixtures/r2e_verifier_input/README.md.

The chat: system = SYSTEM_PROMPT; user = the interaction log ([SYSTEM] the same prompt, [USER]
the instance prompt around the problem statement, then per step [STEP] its index from 0,
[ASSISTANT] "thought\\n\\naction" or the action alone when the thought is empty, [USER] the
observation), the final patch in [PATCH], and the question. The training target is
`<judgement>YES</judgement>` iff the record's reward == 1, else NO.

Condensation, R2E-Gym's rule with its quirks:
- limit = max_tokens - tokens(SYSTEM_PROMPT + " " + target) - 500, the user text counted alone
  (raw `encode`, not the chat template; special tokens added to it and not to the rest, as
  R2E-Gym calls its tokenizer);
- while the user text is over the limit, the longest span (in characters; the earliest of equal
  ones) from an "[ASSISTANT]" marker lazily to the next "<function" that is not yet the
  placeholder is replaced by it; the newlines around the thought go with it, and a span runs
  across blocks when an assistant block has no "<function" of its own (a step without a call);
- the FIRST thought is condensed too when it is the longest (R2E-Gym's docstring says it is kept);
- it stops when no span is left to condense, still over the limit: the prompt is sent anyway.
R2E-Gym counts with Qwen/Qwen2.5-Coder-32B-Instruct's tokenizer (its default, never overridden);
we count with whatever tokenizer the caller gives (the deepswe-32b profile names that one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deepswe.env.trajectory import Trajectory
from deepswe.verify.ef.r2e_patch import r2e_call, verifier_patch
from deepswe.verify.ef.render import JudgePrompt, Messages, RenderStatus, judge_target

# (text, add_special_tokens) -> tokens, by the tokenizer R2E-Gym's function would load
TextCounter = Callable[[str, bool], int]

# --- R2E-Gym's prompt text, quoted verbatim as data ----------------------------------------------
# These strings are what the published verifier was trained on: fidelity requires them byte for
# byte (prepare_ef_verifier_input.py at 353348a0). Do not reword them.
SYSTEM_PROMPT = """You are an expert judge evaluating AI assistant interactions. Your task is to determine if the assistant successfully resolved the user's request.

Key evaluation criteria:
1. Did the assistant complete the main task requested by the user?
2. Did the assistant handle all edge cases and requirements specified?
3. Were there any errors or issues in the final solution?
4. Did the assistant verify the solution works as intended?

Respond only with "<judgement>YES</judgement>" or "<judgement>NO</judgement>"."""  # noqa: E501
INSTANCE_PROMPT = """You are a software engineer working on a repository. A user has submitted an issue, and you need to resolve it.

Repository Issue:
{problem_statement}

Please analyze the issue and implement a solution."""  # noqa: E501
INTRO = "Please evaluate the following interaction between an AI assistant and a user:\n\n"
LOG_OPEN, LOG_CLOSE = "=== INTERACTION LOG ===\n\n", "\n\n=== END INTERACTION ==="
PATCH_OPEN, PATCH_CLOSE = (
    "\n\n=== FINAL PATCH ===\n\n[PATCH]\n",
    "\n[/PATCH]\n\n=== END FINAL PATCH ===",
)
QUESTION = (
    "\n\nBased on the above interaction, did the assistant successfully resolve the user's "
    "initial request? Respond with YES or NO."
)
PLACEHOLDER = "<Thought condensed for saving context>"
NO_CALL = "<function=>\n</function>"  # Action("", {}).to_xml_string(): a reply without a call
BUFFER = 500  # R2E-Gym: "500 is just a buffer"
# -------------------------------------------------------------------------------------------------

_SPAN = re.compile(r"\[ASSISTANT\](.*?)<function", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_CALL = re.compile(r"<function=.*?</function>", re.DOTALL)
# Fields R2E-Gym's Trajectory model requires: a record lacking one fails its validation, and
# traj2verifier_data then shows the recorded patch instead of the rebuilt one.
_REQUIRED = (
    "trajectory_steps",
    "problem_statement",
    "docker_image",
    "max_steps",
    "max_steps_absolute",
    "max_token_limit",
    "max_llm_time",
    "max_exec_time",
    "max_total_time",
    "exit_reason",
    "output_patch",
)
_REQUIRED_STEP = (
    "step_idx",
    "thought",
    "action",
    "observation",
    "done",
    "info",
    "token_usage_prompt",
    "token_usage_completion",
    "token_usage_total",
    "llm_exec_time",
    "env_exec_time",
    "total_step_time",
    "total_time_traj",
    "step_count",
)


@dataclass(frozen=True)
class R2EStep:
    """One step as the log shows it: the [ASSISTANT] text and the observation."""

    assistant: str
    observation: str


@dataclass(frozen=True)
class R2EInput:
    """What traj2verifier_data reads from a trajectory."""

    problem_statement: str
    steps: tuple[R2EStep, ...]
    patch: str
    resolved: bool  # reward == 1: only the training target (and so the limit) depends on it


def log_step(thought: Any, action: Any, observation: Any) -> R2EStep:
    """A step from its recorded fields, formatted as R2E-Gym's f-strings format them."""
    return R2EStep(f"{thought}\n\n{action}" if thought else f"{action}", f"{observation}")


def _validates(record: Mapping[str, Any]) -> bool:
    """Required fields present and not null (R2E-Gym's model also checks their types; we don't)."""
    steps = record.get("trajectory_steps")
    return (
        all(record.get(k) is not None for k in _REQUIRED)
        and isinstance(steps, list)
        and all(
            isinstance(s, Mapping) and all(s.get(k) is not None for k in _REQUIRED_STEP)
            for s in steps
        )
    )


def from_record(record: Mapping[str, Any]) -> R2EInput:
    """An R2E-Gym trajectory record (a dict, as traj2verifier_data takes it)."""
    if "trajectory_steps" in record:
        steps, reward = record["trajectory_steps"], record.get("reward", 0)
    else:
        steps = record.get("trajectory", [])
        reward = record.get("success", record.get("reward", 0))
    if _validates(record) and record.get("ds") is not None:
        patch = verifier_patch(record["output_patch"], (s["action"] for s in steps))
    else:
        patch = f"{record.get('output_patch', '')}"
    return R2EInput(
        problem_statement=f"{record.get('problem_statement', '')}",
        steps=tuple(
            log_step(s.get("thought", ""), s.get("action", ""), s.get("observation", ""))
            for s in steps
        ),
        patch=patch,
        resolved=reward == 1,
    )


def agent_step(reply: str) -> tuple[str, str]:
    """(thought, action) as R2E-Gym's agent records a reply: the first <think>...</think> block
    with its tags (else ""), and the first <function=...</function> block written back as
    Action.to_xml_string (NO_CALL when there is none). Text outside both is not recorded."""
    think, call = _THINK.search(reply), _CALL.search(reply)
    name, params = r2e_call(call.group(0).strip() if call else "")
    lines = [
        f"<function={name}>\n",
        *(f"  <parameter={k}>{v}</parameter>\n" for k, v in params.items()),
        "</function>",
    ]
    return (think.group(0).strip() if think else ""), "".join(lines)


def from_trajectory(problem_statement: str, trajectory: Trajectory | None, patch: str) -> R2EInput:
    """One of our candidates as R2E-Gym's runner would have recorded it: replies split by its
    agent's rule, the patch rebuilt as for a record with its dataset row (the runner always sets
    it). The reward is not read: the target, hence the limit, is NO's (YES counts the same on
    Qwen's tokenizer), so the judge's prompt never depends on the grade."""
    steps, actions = [], []
    for step in trajectory.steps if trajectory is not None else []:
        thought, action = agent_step(step.assistant)
        steps.append(log_step(thought, action, step.observation))
        actions.append(action)
    return R2EInput(problem_statement, tuple(steps), verifier_patch(patch, actions), False)


def user_text(inp: R2EInput) -> str:
    parts = [
        INTRO,
        LOG_OPEN,
        f"[SYSTEM]\n{SYSTEM_PROMPT}\n[/SYSTEM]\n\n",
        f"[USER]\n{INSTANCE_PROMPT.format(problem_statement=inp.problem_statement)}\n[/USER]",
    ]
    for i, s in enumerate(inp.steps):
        parts.append(
            f"\n\n[STEP]\n{i}\n[/STEP]\n\n[ASSISTANT]\n{s.assistant}\n[/ASSISTANT]"
            f"\n\n[USER]\n{s.observation}\n[/USER]"
        )
    parts += [LOG_CLOSE, PATCH_OPEN, inp.patch, PATCH_CLOSE, QUESTION]
    return "".join(parts)


def condense(text: str, count: Callable[[str], int], limit: int) -> tuple[str, int, int]:
    """(text, thoughts condensed, its tokens): R2E-Gym's deepswe_condense_thoughts."""
    tokens, condensed = count(text), 0
    while tokens > limit:
        spans = list(_SPAN.finditer(text))
        open_spans = [m for m in spans if m.group(1).strip() != PLACEHOLDER]
        if len(spans) <= 1 or not open_spans:
            break
        longest = max(open_spans, key=lambda m: len(m.group(1)))  # max keeps the first of ties
        text = text[: longest.start(1)] + PLACEHOLDER + text[longest.end(1) :]
        tokens, condensed = count(text), condensed + 1
    return text, condensed, tokens


def limit_for(max_tokens: int, resolved: bool, count: TextCounter) -> int:
    """R2E-Gym's condensation limit on the user text."""
    target = judge_target(resolved)["content"]  # the same "<judgement>YES</judgement>" text
    return max_tokens - count(f"{SYSTEM_PROMPT} {target}", False) - BUFFER


def render_r2e(inp: R2EInput, count: TextCounter, max_tokens: int) -> JudgePrompt:
    """The verifier's chat (system, user), condensed as R2E-Gym condenses it. `tokens` and
    `budget` are the user text's count and limit; TOO_LONG: over it with nothing left to condense
    (R2E-Gym sends it anyway)."""
    limit = limit_for(max_tokens, inp.resolved, count)
    text, condensed, tokens = condense(user_text(inp), lambda t: count(t, True), limit)
    messages: Messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": text},
    ]
    status = RenderStatus.FITS if tokens <= limit else RenderStatus.TOO_LONG
    return JudgePrompt(messages, tokens, limit, condensed, status)
