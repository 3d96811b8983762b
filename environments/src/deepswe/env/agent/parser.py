"""Parse a model reply into one tool call, R2E-Gym style.

The rule, as R2E-Gym's agent (`parse_response_v2` in src/r2egym/agenthub/agent/agent.py), rLLM's
SWEAgent (`parse_xml_response` in rllm/agents/swe_agent.py) and `Action.from_string`
(src/r2egym/agenthub/action/action.py) apply it:

1. The action block runs from the first `<function=` to the first `</function>` after it. With
   no `</function>` there is no block: the reply has no function call, however much of one it
   started. The thought is the text before the block (the whole reply if none), stripped.
2. In the block, the name is the text between `<function=` and the next `>` (spaces around `=`
   allowed), stripped; if that text is empty the next `<function ... =NAME>` in the block is
   tried. No name means no function call.
3. Parameters are every `<parameter=KEY>VALUE</parameter>`, scanned left to right without
   overlap; a VALUE ends at the first `</parameter>`; key and value are stripped; a repeated
   key keeps its first position and its last value.

R2E-Gym does this with regular expressions that can take quadratic time on adversarial text
(many `<function=` and no `</function>`); here every step is a `str.find` that moves forward, so
parsing is linear in the reply's length and never raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deepswe.env.tools import ToolCall, ToolError, validate

FUNCTION_OPEN = "<function"
FUNCTION_CLOSE = "</function>"
PARAMETER_OPEN = "<parameter"
PARAMETER_CLOSE = "</parameter>"


@dataclass(frozen=True)
class ParsedAction:
    """A reply, split. `function_name == ""` means no function call (send CONTINUE_MSG).

    `error` is set when there is a call but it cannot run (unknown tool, missing or unknown
    parameter); the loop shows it with `deepswe.env.tools.error_observation`.
    """

    thought: str
    function_name: str = ""
    parameters: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def has_call(self) -> bool:
        return bool(self.function_name)

    @property
    def call(self) -> ToolCall | None:
        """The call, if there is one and it is valid."""
        if not self.function_name or self.error is not None:
            return None
        return ToolCall(self.function_name, dict(self.parameters))

    def to_xml(self) -> str:
        """R2E-Gym's `Action.to_xml_string`: the form trajectories record actions in."""
        lines = [f"<function={self.function_name}>"]
        lines += [f"  <parameter={k}>{v}</parameter>" for k, v in self.parameters.items()]
        return "\n".join(lines) + "\n</function>"


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():  # str.isspace is re's \s for str patterns
        i += 1
    return i


_NO_CLOSE = (-1, -1)  # no ">" anywhere after the tag: no later occurrence can match either


def _tag_value(text: str, i: int, tag: str) -> tuple[int, int] | None:
    """At a `tag` occurrence `i`, match `tag\\s*=\\s*([^>]+)>`: return (value start, `>` index).

    The value is everything between `=` and the next `>` (the `\\s*` after `=` is part of it
    before stripping); it must not be empty. None if there is no match at `i`, `_NO_CLOSE` if
    no `>` follows at all.
    """
    j = _skip_space(text, i + len(tag))
    if j >= len(text) or text[j] != "=":
        return None
    close = text.find(">", j + 1)
    if close == -1:
        return _NO_CLOSE
    if close == j + 1:  # nothing between "=" and ">"
        return None
    return j + 1, close


def _function_name(block: str) -> str:
    i = block.find(FUNCTION_OPEN)
    while i != -1:
        match = _tag_value(block, i, FUNCTION_OPEN)
        if match == _NO_CLOSE:
            return ""
        if match is not None:
            return block[match[0] : match[1]].strip()
        i = block.find(FUNCTION_OPEN, i + 1)
    return ""


def _parameters(block: str) -> dict[str, str]:
    params: dict[str, str] = {}
    i = block.find(PARAMETER_OPEN)
    while i != -1:
        match = _tag_value(block, i, PARAMETER_OPEN)
        if match == _NO_CLOSE:
            break
        if match is None:
            i = block.find(PARAMETER_OPEN, i + 1)
            continue
        key_start, key_end = match
        end = block.find(PARAMETER_CLOSE, key_end + 1)
        if end == -1:  # no later <parameter can be closed either
            break
        params[block[key_start:key_end].strip()] = block[key_end + 1 : end].strip()
        i = block.find(PARAMETER_OPEN, end + len(PARAMETER_CLOSE))
    return params


def parse_action(text: str) -> ParsedAction:
    """Split a model reply into thought and (at most) one tool call. Never raises."""
    start = text.find("<function=")
    end = text.find(FUNCTION_CLOSE, start + len("<function=")) if start != -1 else -1
    if end == -1:
        return ParsedAction(thought=text.strip())
    block = text[start : end + len(FUNCTION_CLOSE)]
    thought = text[:start].strip()
    name = _function_name(block)
    if not name:
        return ParsedAction(thought=thought)
    parameters = _parameters(block)
    error = None
    try:
        validate(ToolCall(name, parameters))
    except ToolError as exc:
        error = str(exc)
    return ParsedAction(thought=thought, function_name=name, parameters=parameters, error=error)
