"""The DeepSWE prompts: content the model relies on, variants, reminders, think stripping."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from deepswe.env.agent.parser import parse_action
from deepswe.env.agent.prompts import (
    CONTINUE_MSG,
    CONTINUE_MSG_TRAIN,
    build_messages,
    continue_message,
    step_reminder,
    steps_remaining,
    strip_thinking,
    system_prompt,
    user_prompt,
)
from deepswe.env.tools import TOOL_NAMES, TOOL_SPECS

FIXTURE = Path(os.environ["DEEPSWE_R2E_FIXTURES"]) / "trajectory_aiohttp_0813710e.json"


@pytest.mark.parametrize("variant", ["eval", "train"])
def test_system_prompt_lists_every_tool_and_parameter_in_order(variant):
    text = system_prompt(variant)
    positions = [
        text.index(f"BEGIN FUNCTION #{i}: {name} ––") for i, name in enumerate(TOOL_NAMES, 1)
    ]
    assert positions == sorted(positions)
    for name in TOOL_NAMES:
        section = text[
            text.index(f": {name} ––") : text.index(f"END FUNCTION #{TOOL_NAMES.index(name) + 1}")
        ]
        for param in TOOL_SPECS[name].required:
            assert f"{param} (string, required)" in section, (name, param)
    for param in ("file_text", "old_str", "new_str", "insert_line", "view_range", "concise"):
        assert re.search(rf"\d\.\t{param} \((string|integer|array|boolean), optional\)", text), (
            param
        )
    assert "Allowed values: [view, create, str_replace, insert, undo_edit]" in text
    assert "Currently allowed value: [submit]" in text


def test_format_example_parses_into_a_call():
    text = system_prompt("train")
    example = text[
        text.index("<function=example_function_name>") : text.index("</function>")
        + len("</function>")
    ]
    parsed = parse_action(example)
    assert parsed.function_name == "example_function_name"
    assert parsed.parameters == {
        "example_parameter_1": "value_1",
        "example_parameter_2": "This is the value for the second parameter\nthat can span\nmultiple lines",
    }
    # Written with the real tool, the same format yields a valid call.
    real = example.replace("example_function_name", "execute_bash").replace(
        "example_parameter_1", "cmd"
    )
    real = re.sub(r"<parameter=example_parameter_2>.*?</parameter>\n", "", real, flags=re.DOTALL)
    assert parse_action(real).call is not None


def test_system_prompt_layout_matches_recorded_r2egym_prompt():
    """Same skeleton as the prompt R2E-Gym actually sent (fixture agent_args): the headings,
    parameter lines, the format block and the ending; only the prose is reworded."""
    reference = json.loads(FIXTURE.read_text())["agent_args"]["system_prompt"]

    def skeleton(text: str) -> list[str]:
        keep = re.compile(
            r"^(––|  \d\.\t|Allowed values|Currently allowed|<|Parameters:|Description:|Behavior notes:|If you choose|- )"
        )
        lines = [line for line in text.splitlines() if keep.match(line)]
        return [
            line.split(" (")[0] if line[0] == " " else line[:2] if line[0] == "-" else line[:20]
            for line in lines
        ]

    assert skeleton(system_prompt("eval")) == skeleton(reference)
    assert not system_prompt("eval").rstrip().endswith("</IMPORTANT>")
    assert system_prompt("train").endswith("\n</IMPORTANT>\n")


def test_user_prompts_by_variant():
    issue = "Fix {braces} in `f()`"
    long, short = user_prompt(issue, "eval"), user_prompt(issue, "train")
    for text in (long, short):
        assert f"<github_issue>\n{issue}\n</github_issue>" in text
        assert "{problem_statement}" not in text
    assert long.startswith("I have uploaded a python code repository in the /testbed directory.")
    assert "/testbed/reproduce_issue.py" in long and "/testbed/edge_case_tests.py" in long
    assert [int(n) for n in re.findall(r"^(\d)\. ", long, flags=re.M)] == list(range(1, 10))
    assert short.startswith("Consider the following github issue:")
    assert [int(n) for n in re.findall(r"^(\d)\. ", short, flags=re.M)] == list(range(1, 8))
    assert len(long) > 3 * len(short)
    with pytest.raises(ValueError, match="unknown prompt variant"):
        user_prompt(issue, "test")


def test_build_messages_and_first_reminder():
    messages = build_messages("issue text", "eval", max_steps=100)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == system_prompt("eval")
    assert messages[1]["content"].endswith("\nSteps Remaining: 100")
    train = build_messages("issue text", "train", max_steps=50)
    assert train[1]["content"].endswith("\nSteps Remaining: 49")  # rLLM counts one fewer
    assert build_messages("issue text", "train")[1]["content"] == user_prompt("issue text", "train")


def test_step_reminders():
    assert step_reminder(100, 99) == "\nSteps Remaining: 1"
    last = "\nYou have reached the maximum number of steps. Please submit your answer NOW."
    assert step_reminder(100, 100) == last
    assert step_reminder(50, 49, "train") == last
    assert steps_remaining(50, 10, "eval") == 40 and steps_remaining(50, 10, "train") == 39


def test_continue_messages():
    assert continue_message("eval") == CONTINUE_MSG
    assert "You forgot to use a function call in your response." in CONTINUE_MSG
    assert continue_message("train") == CONTINUE_MSG_TRAIN
    assert not parse_action(CONTINUE_MSG).has_call


def test_strip_thinking():
    assert strip_thinking("<think>plan <function=x></function></think>\nDo it.") == "Do it."
    assert strip_thinking("a<think>1</think>b<think>2</think>c") == "abc"
    assert strip_thinking("still thinking</think>\n\nanswer") == "answer"  # template opened <think>
    assert strip_thinking("<think>cut off mid-thought") == "<think>cut off mid-thought"
    assert strip_thinking("<think>" * 100_000) == "<think>" * 100_000


def _layout(text: str) -> list[str]:
    """Each line's indentation and list marker: the shape of a prompt without its prose."""
    return [re.match(r"^\s*(\d\.|-|<[/a-z_]+>)?", line).group(0) for line in text.splitlines()]


def test_eval_user_prompt_layout_matches_recorded_r2egym_prompt():
    reference = json.loads(FIXTURE.read_text())["agent_args"]["instance_prompt"]
    assert _layout(user_prompt("{problem_statement}", "eval")) == _layout(reference)
