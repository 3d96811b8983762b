"""Run a tool script as a plain local subprocess (tests, debugging, tool development).

In a sandbox the scripts are installed on PATH and run by name; here the same argv from
`to_command` is run with a chosen interpreter against the script file, which lets the tests
exercise the real scripts under several Python versions (3.6 to 3.13).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from deepswe.env.tools.calls import ToolCall, to_command, tool_files
from deepswe.env.tools.observation import format_observation


@dataclass(frozen=True)
class ToolRun:
    """What one tool process produced. `exit_code` is the process's status."""

    tool_name: str
    stdout: str
    stderr: str
    exit_code: int

    @property
    def observation(self) -> str:
        return format_observation(self.tool_name, self.stdout, self.stderr, self.exit_code)


def run_tool_locally(
    call: ToolCall,
    cwd: str | Path,
    *,
    python: str = sys.executable,
    state_file: str | Path | None = None,
    timeout_s: float | None = 60,
    decoder: str | Path | None = None,
) -> ToolRun:
    """Run `call` with `python` on this machine in `cwd`.

    `state_file` points the editor's undo history somewhere private (the sandbox default is
    /var/tmp/editor_state.json). Raises ToolError for an invalid call and
    subprocess.TimeoutExpired past `timeout_s`. `decoder`: a chardet wheel the editor decodes
    with, as under the r2e-gym scaffold (`scaffold.decoder_wheel()`); None reads strict UTF-8.
    """
    argv = to_command(call)
    env = dict(os.environ)
    if state_file is not None:
        env["DEEPSWE_EDITOR_STATE"] = str(state_file)
    # The editor's decoder (deepswe.env.tools.scaffold): chardet's wheel, or none (strict UTF-8).
    env["DEEPSWE_EDITOR_DECODER"] = str(decoder or "")
    proc = subprocess.run(
        [python, str(tool_files()[call.name]), *argv[1:]],
        cwd=str(cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout_s,
    )
    return ToolRun(
        tool_name=call.name,
        stdout=proc.stdout.decode("utf-8", "replace"),
        stderr=proc.stderr.decode("utf-8", "replace"),
        exit_code=proc.returncode,
    )
