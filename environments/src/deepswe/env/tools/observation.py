"""Observation strings: what the model reads after each tool call.

DeepSWE-Preview was trained on R2E-Gym's observations (src/r2egym/agenthub/observation/
observation.py, with exit codes as src/r2egym/agenthub/runtime/docker.py reports them), and rLLM
formats them the same way (rllm/environments/swe/observation.py):

    execute_bash:  "Exit code: 0\\nExecution output of [execute_bash]:\\n<output>"
                   non-zero status N -> "Exit code: Error: Exit code N"; timeout -> "Exit code: -1"
    other tools:   "Execution output of [<name>]:\\n<output>"
    finish:        "<<< Finished >>>"

Only execute_bash output is cut to its first and last 40 lines when it has more than 80; the
other tools clip their own output at 10,000 characters. The real trajectories in
tests/data/r2e-gym show every one of these forms.
"""

from __future__ import annotations

import re

TRUNCATE_KEEP_LINES = 40  # R2E-Gym Observation(num_lines=40): keep 40 first + 40 last lines
FINISHED_OBSERVATION = "<<< Finished >>>"
TRUNCATION_NOTE = "<Observation truncated in middle for saving context>"
_DIVIDER = "-" * 50
# docker.py strips colour codes and carriage returns from command output.
_ANSI_OR_CR = re.compile(r"\x1b\[[0-9;]*m|\r")


def truncate_observation(text: str, keep_lines: int = TRUNCATE_KEEP_LINES) -> str:
    """Keep the first and last `keep_lines` lines of `text` if it has more than twice that."""
    lines = text.splitlines()
    if len(lines) <= 2 * keep_lines:
        return text
    head = "\n".join(lines[:keep_lines])
    tail = "\n".join(lines[-keep_lines:])
    return f"{head}\n{_DIVIDER}\n{TRUNCATION_NOTE}\n{_DIVIDER}\n{tail}"


def exit_code_text(exit_code: int) -> str:
    """How R2E-Gym's runtime reports a status: "0", or "Error: Exit code N"."""
    return "0" if exit_code == 0 else f"Error: Exit code {exit_code}"


def format_observation(
    tool_name: str, stdout: str, stderr: str, exit_code: int, *, truncate: bool = True
) -> str:
    """The observation for a tool run that finished (see `timeout_observation` otherwise).

    stdout and stderr are joined as one stream, as R2E-Gym's non-demultiplexed `docker exec`
    returned them (the tools print almost everything to stdout). With `truncate`, execute_bash
    output over 80 lines is cut as in `truncate_observation`; apply it once only.
    """
    if tool_name == "finish":
        return FINISHED_OBSERVATION
    output = _ANSI_OR_CR.sub("", stdout + stderr)
    if tool_name == "execute_bash":
        body = truncate_observation(output) if truncate else output
        return f"Exit code: {exit_code_text(exit_code)}\nExecution output of [{tool_name}]:\n{body}"
    return f"Execution output of [{tool_name}]:\n{output}"


def timeout_observation(timeout_s: float, tool_name: str = "execute_bash") -> str:
    """The observation when the sandbox killed a call after `timeout_s` seconds.

    R2E-Gym's runtime returns "The command took too long to execute (>{timeout}s)" with exit
    code "-1" in place of the output.
    """
    seconds = int(timeout_s) if float(timeout_s).is_integer() else timeout_s
    message = f"The command took too long to execute (>{seconds}s)"
    if tool_name == "execute_bash":
        return f"Exit code: -1\nExecution output of [{tool_name}]:\n{message}"
    if tool_name == "finish":
        return FINISHED_OBSERVATION
    return f"Execution output of [{tool_name}]:\n{message}"


def error_observation(tool_name: str, message: str) -> str:
    """The observation for a call that could not run (a `ToolError`): its message as output.

    Reported like a tool that printed `message` and exited with status 2 (argparse's usage
    error status, which is what R2E-Gym's scripts returned for bad parameters).
    """
    output = message.rstrip("\n") + "\n"
    if tool_name == "execute_bash":
        return format_observation(tool_name, output, "", 2)
    return f"Execution output of [{tool_name or 'unknown'}]:\n{output}"
