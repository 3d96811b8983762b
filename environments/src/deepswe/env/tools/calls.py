"""Tool calls: which tools exist, which parameters they take, and the argv that runs one.

The four tools and their parameters are R2E-Gym's (the DeepSWE prompt lists them; the scripts in
`bin/` implement them). A call becomes an argv close to R2E-Gym's `Action.to_bashcmd`: the tool
name, every parameter but `command` as an option in the order the model gave them, and for
`file_editor` and `finish` the `command` parameter as a positional word. Unlike R2E-Gym, options
are written `--key=value` and the positional word comes last after `--`, so a value starting
with "-" (a Markdown list line in `new_str`, say) is never mistaken by argparse for an option.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

BIN_DIR = Path(__file__).with_name("bin")


@dataclass(frozen=True)
class ToolSpec:
    """One tool's parameters. `positional` is passed as a bare word (R2E-Gym's `command`)."""

    name: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    positional: str | None = None
    ignore_unknown: bool = False  # drop unknown parameters instead of refusing the call

    @property
    def parameters(self) -> tuple[str, ...]:
        return self.required + self.optional


TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "file_editor",
            required=("command", "path"),
            # enable_linting and python_only exist in R2E-Gym's CLI but not in the prompt.
            optional=(
                "file_text",
                "old_str",
                "new_str",
                "insert_line",
                "view_range",
                "concise",
                "enable_linting",
                "python_only",
            ),
            positional="command",
        ),
        ToolSpec("execute_bash", required=("cmd",)),
        ToolSpec("search", required=("search_term",), optional=("path", "python_only")),
        # R2E-Gym ends the episode on any finish call whatever its parameters (it never runs
        # the script), so nothing about them may make the call invalid.
        ToolSpec(
            "finish",
            required=(),
            optional=("command", "result"),
            positional="command",
            ignore_unknown=True,
        ),
    )
}
TOOL_NAMES: tuple[str, ...] = tuple(TOOL_SPECS)  # prompt order


class ToolError(ValueError):
    """A call that cannot run: unknown tool, missing or unknown parameter, NUL byte in a value.

    The agent loop shows `str(error)` to the model as the tool's output (see
    `deepswe.env.tools.error_observation`); it is not an episode-ending error.
    """


@dataclass(frozen=True)
class ToolCall:
    """One parsed function call: `<function=name><parameter=key>value</parameter>...`."""

    name: str
    parameters: dict[str, str] = field(default_factory=dict)


def validate(call: ToolCall) -> None:
    """Raise ToolError if `call` cannot be turned into a command."""
    spec = TOOL_SPECS.get(call.name)
    if spec is None:
        # R2E-Gym's RepoEnv.run_action assertion text (env.py), shown here instead of its
        # empty observation so the model learns what went wrong.
        raise ToolError(
            f"Invalid Action: input action must be one of allowed actions \n"
            f" Allowed actions: {list(TOOL_NAMES)} \n Input action: {call.name}"
        )
    for key in spec.required:
        if key not in call.parameters:
            raise ToolError(f"Missing required parameter '{key}' for '{call.name}'.")
    for key, value in call.parameters.items():
        if key not in spec.parameters and not spec.ignore_unknown:
            allowed = ", ".join(spec.parameters)
            raise ToolError(
                f"Unknown parameter '{key}' for '{call.name}'. Allowed parameters: {allowed}."
            )
        if "\x00" in value:
            raise ToolError(f"Parameter '{key}' of '{call.name}' contains a NUL byte.")


def to_command(call: ToolCall) -> list[str]:
    """The argv that runs `call` in a sandbox where the tools are on PATH (see `tool_files`).

    Each value is one argv element, so no shell quoting is involved; `shell_command` gives the
    same call as one safely quoted shell string. Note Linux caps one argv element at 128 KiB
    (MAX_ARG_STRLEN), as it did for R2E-Gym.
    """
    validate(call)
    spec = TOOL_SPECS[call.name]
    argv = [call.name]
    argv += [
        f"--{key}={value}"
        for key, value in call.parameters.items()
        if key != spec.positional and key in spec.parameters
    ]
    if spec.positional is not None and spec.positional in call.parameters:
        # After "--" argparse takes the word as positional even if it starts with "-".
        argv += ["--", call.parameters[spec.positional]]
    return argv


def shell_command(call: ToolCall) -> str:
    """`to_command(call)` as one shell string, every word quoted with shlex."""
    return " ".join(shlex.quote(word) for word in to_command(call))


def tool_files() -> dict[str, Path]:
    """Tool name -> script to copy into a sandbox as an executable `/usr/local/bin/<name>`.

    Each script starts with `#!/usr/bin/env python3` and needs only the standard library of
    Python 3.6 or newer.
    """
    return {name: BIN_DIR / f"{name}.py" for name in TOOL_NAMES}
