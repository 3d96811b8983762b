"""parse_action: R2E-Gym's parsing rule, without its regexes, never raising, linear."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from deepswe.env.agent.parser import ParsedAction, parse_action


def r2egym_reference(text: str) -> tuple[str, str, dict[str, str]]:
    """R2E-Gym's own regexes (agent.py parse_response_v2 + Action.from_string), for comparison
    on small inputs only: on large adversarial ones they take quadratic time."""
    match = re.search(r"(?s)(<function=.*?</function>)", text)
    thought, action = (text[: match.start()], match.group(1)) if match else (text, "")
    fn = re.search(r"<function\s*=\s*([^>]+)>", action)
    params = {}
    for key, value in re.findall(
        r"<parameter\s*=\s*([^>]+)>(.*?)</parameter>", action, flags=re.DOTALL
    ):
        params[key.strip()] = value.strip()
    return thought.strip(), fn.group(1).strip() if fn else "", params


def _agrees(text: str) -> None:
    parsed = parse_action(text)
    thought, name, params = r2egym_reference(text)
    assert parsed.thought == thought
    assert parsed.function_name == name
    if name:  # without a name R2E-Gym sends CONTINUE_MSG and ignores the parameters
        assert parsed.parameters == params
        assert list(parsed.parameters) == list(params)


def test_simple_call():
    text = "I will look.\n<function=file_editor>\n  <parameter=command>view</parameter>\n  <parameter=path>/testbed/a.py</parameter>\n</function>"
    parsed = parse_action(text)
    assert parsed == ParsedAction(
        thought="I will look.",
        function_name="file_editor",
        parameters={"command": "view", "path": "/testbed/a.py"},
    )
    assert parsed.call is not None and parsed.call.name == "file_editor"
    assert parsed.to_xml() == text[len("I will look.\n") :]


def test_first_block_wins_and_values_are_stripped_multiline():
    text = (
        "<function=execute_bash><parameter=cmd>\n  ls -la\n</parameter></function>"
        "<function=finish><parameter=command>submit</parameter></function>"
    )
    parsed = parse_action(text)
    assert (parsed.function_name, parsed.parameters) == ("execute_bash", {"cmd": "ls -la"})


def test_missing_close_tag_means_no_call():
    parsed = parse_action("<function=execute_bash><parameter=cmd>ls</parameter>")
    assert not parsed.has_call and parsed.call is None and parsed.error is None
    assert parsed.thought == "<function=execute_bash><parameter=cmd>ls</parameter>"


def test_no_call_at_all():
    assert parse_action("Just thinking out loud.") == ParsedAction(
        thought="Just thinking out loud."
    )


def test_empty_function_name_is_no_call():
    assert not parse_action("<function=></function>").has_call


def test_unknown_tool_and_missing_parameter_are_errors_not_exceptions():
    unknown = parse_action("<function=browse><parameter=url>x</parameter></function>")
    assert unknown.has_call and unknown.call is None
    assert "Input action: browse" in unknown.error
    missing = parse_action("<function=file_editor><parameter=command>view</parameter></function>")
    assert missing.error == "Missing required parameter 'path' for 'file_editor'."


def test_duplicate_key_keeps_last_value_first_position():
    parsed = parse_action(
        "<function=search><parameter=search_term>a</parameter><parameter=path>p</parameter>"
        "<parameter=search_term>b</parameter></function>"
    )
    assert list(parsed.parameters.items()) == [("search_term", "b"), ("path", "p")]


def test_edge_cases_agree_with_r2egym():
    for text in [
        "<function = file_editor ><parameter = command >view</parameter></function>",
        "<function=><function =execute_bash><parameter=cmd>ls</parameter></function>",
        "<function=a\n<parameter=cmd>x</parameter></function>",
        "<function=x><parameter=a<parameter=b>v</parameter></function>",
        "<function=x><parameter=>v</parameter><parameter=k>w</parameter></function>",
        "<function=x><parameter=k>unclosed <parameter=j>v</parameter></function>",
        "<function=x><parameters=k>v</parameter></function>",
        "a</function><function=x></function>",
        "<function=  ></function>",
    ]:
        _agrees(text)


TOKENS = [
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<function",
    "<parameter",
    ">",
    "<",
    "=",
    " ",
    "\n",
    "\t",
    "file_editor",
    "execute_bash",
    "cmd",
    "path",
    "x",
    "<think>",
    "</think>",
    "</param",
    "function>",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_random_tag_mixes_agree_with_r2egym(tokens):
    _agrees("".join(tokens))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_random_text_never_raises(text):
    parsed = parse_action(text)
    assert isinstance(parsed.thought, str)
    _agrees(text)


def test_one_megabyte_adversarial_inputs_finish():
    """Inputs on which R2E-Gym's regexes backtrack quadratically; ours scan forward only."""
    mb = 1 << 20
    cases = [
        "<function=" * (mb // 10),  # no closing tag anywhere
        "<function=x>" + "<parameter=" * (mb // 11) + "</function>",  # keys never closed
        "<function=x>" + "<parameter=k>" * (mb // 13) + "</function>",  # values never closed
        "<function=" + "<function=>" * (mb // 11) + "</function>",  # empty names
        "<function=" + " " * mb + "x>" + "</function>",
        "".join(chr(i % 0x2FF + 1) for i in range(mb)),  # garbage
    ]
    for text in cases:
        parse_action(text)
    huge = "<function=x>" + "<parameter=k>v</parameter>" * (mb // 26) + "</function>"
    assert parse_action(huge).parameters == {"k": "v"}
