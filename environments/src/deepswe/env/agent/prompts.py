"""The DeepSWE prompts: system prompt, user prompts, step reminders, the no-call message.

DeepSWE-Preview was trained by rLLM with the system prompt `SWE_SYSTEM_PROMPT` and the short user
prompt `SWE_USER_PROMPT` (rllm/agents/system_prompts.py, used by rllm/agents/swe_agent.py), and
evaluated by R2E-Gym with src/r2egym/agenthub/config/r2egym/edit_non_fn_calling.yaml: the same
system prompt (without the closing `</IMPORTANT>`) and a long nine-step user prompt. The texts
in `prompts/` are our own wording with the same content, order and layout; the tool names,
parameters, allowed values and the function-call format are kept exactly.

Variants: "eval" = R2E-Gym's evaluation prompts, "train" = rLLM's training prompts.
"""

from __future__ import annotations

from importlib import resources
from typing import Literal

Variant = Literal["eval", "train"]
VARIANTS: tuple[str, ...] = ("eval", "train")

# R2E-Gym's reply to a response without a function call (CONTINUE_MSG in
# src/r2egym/agenthub/__init__.py, returned by Observation.__str__): used at evaluation.
CONTINUE_MSG = (
    "\nYou forgot to use a function call in your response. \n"
    "YOU MUST USE A FUNCTION CALL IN EACH RESPONSE.\n"
    "\n"
    "IMPORTANT: YOU SHOULD NEVER ASK FOR HUMAN HELP.\n"
)
# rLLM's SWEEnv.step reply to the same (rllm/environments/swe/swe.py): used in training.
CONTINUE_MSG_TRAIN = (
    "You forgot to use a function call in your response. "
    "YOU MUST USE A FUNCTION CALL IN EACH RESPONSE.\n"
    "IMPORTANT: YOU SHOULD NEVER ASK FOR HUMAN HELP."
)
MAX_STEPS_MESSAGE = "You have reached the maximum number of steps. Please submit your answer NOW."
OUT_OF_TOKENS_MESSAGE = "You are running out of tokens. Please submit your answer NOW."

_PLACEHOLDER = "{problem_statement}"
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


def _text(name: str) -> str:
    return resources.files("deepswe.env.agent").joinpath("prompts", name).read_text("utf-8")


def _check(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown prompt variant {variant!r}; expected one of {VARIANTS}")


def system_prompt(variant: Variant = "eval") -> str:
    """The system prompt: role, the four tools, the function-call format and reminders."""
    _check(variant)
    text = _text("system.txt")
    # rLLM closes the <IMPORTANT> block; R2E-Gym's YAML (and its recorded runs) do not.
    return text if variant == "eval" else text + "\n</IMPORTANT>\n"


def user_prompt(problem_statement: str, variant: Variant = "eval") -> str:
    """The first user message: the issue inside the instructions of `variant`."""
    _check(variant)
    template = _text("user_eval.txt" if variant == "eval" else "user_train.txt")
    # Not str.format: an issue's own braces must pass through untouched.
    return template.replace(_PLACEHOLDER, problem_statement)


def build_messages(
    problem_statement: str, variant: Variant = "eval", max_steps: int | None = None
) -> list[dict[str, str]]:
    """The opening chat: system prompt, then the user prompt.

    With `max_steps`, the user prompt ends with the step-0 reminder (`step_reminder`), as both
    references add it before the first model call.
    """
    user = user_prompt(problem_statement, variant)
    if max_steps is not None:
        user += step_reminder(max_steps, 0, variant)
    return [
        {"role": "system", "content": system_prompt(variant)},
        {"role": "user", "content": user},
    ]


def steps_remaining(max_steps: int, steps_taken: int, variant: Variant = "eval") -> int:
    """Steps left as each reference counts them before the next model call.

    R2E-Gym (Agent.run): max_steps - steps taken. rLLM (SWEAgent.update_from_env): one fewer.
    """
    _check(variant)
    remaining = max_steps - steps_taken
    return remaining if variant == "eval" else remaining - 1


def step_reminder(max_steps: int, steps_taken: int, variant: Variant = "eval") -> str:
    """Text appended to the latest user message (the observation) before each model call.

    "\\nSteps Remaining: N" while N > 0, else "\\n" + MAX_STEPS_MESSAGE.
    """
    remaining = steps_remaining(max_steps, steps_taken, variant)
    if remaining > 0:
        return f"\nSteps Remaining: {remaining}"
    return "\n" + MAX_STEPS_MESSAGE


def token_warning() -> str:
    """rLLM's optional note once the context passes a token threshold (appended likewise)."""
    return "\n" + OUT_OF_TOKENS_MESSAGE


def continue_message(variant: Variant = "eval") -> str:
    """What the model is told after a reply without a function call."""
    _check(variant)
    return CONTINUE_MSG if variant == "eval" else CONTINUE_MSG_TRAIN


def strip_thinking(text: str) -> str:
    """Remove reasoning: every `<think>...</think>` block, and everything before a stray
    `</think>` (Qwen3's chat template opens `<think>` in the prompt, so replies can start
    inside it). An unclosed `<think>` is left alone. Result is stripped.
    """
    kept, i = [], 0
    while True:  # str.find scanning forward only: linear, unlike a lazy regex
        start = text.find(_THINK_OPEN, i)
        end = text.find(_THINK_CLOSE, start + len(_THINK_OPEN)) if start != -1 else -1
        if end == -1:
            break
        kept.append(text[i:start])
        i = end + len(_THINK_CLOSE)
    text = "".join(kept) + text[i:]
    close = text.rfind(_THINK_CLOSE)
    if close != -1:
        text = text[close + len(_THINK_CLOSE) :]
    return text.strip()
