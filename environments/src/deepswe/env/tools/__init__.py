"""The DeepSWE agent's tools: file_editor, execute_bash, search, finish.

Two halves:

- `bin/*.py`: the tools themselves, standalone Python 3.6+ scripts (standard library only) that
  run inside a task's sandbox with the image's own python3. `tool_files()` says what to copy
  where: each becomes an executable `/usr/local/bin/<name>`.
- this package, on the host: `ToolCall` -> `to_command` (argv) -> run in the sandbox ->
  `format_observation` (the string the model reads), plus `timeout_observation` and
  `error_observation` for calls that timed out or could not run.

Messages and formats follow R2E-Gym's tools, which DeepSWE-Preview was trained with.
"""

from deepswe.env.tools.calls import (
    BIN_DIR,
    TOOL_NAMES,
    TOOL_SPECS,
    ToolCall,
    ToolError,
    ToolSpec,
    shell_command,
    to_command,
    tool_files,
    validate,
)
from deepswe.env.tools.local import ToolRun, run_tool_locally
from deepswe.env.tools.observation import (
    FINISHED_OBSERVATION,
    error_observation,
    exit_code_text,
    format_observation,
    timeout_observation,
    truncate_observation,
)

SANDBOX_BIN_DIR = "/usr/local/bin"  # where R2E-Gym installs its tools (RepoEnv.add_commands)

__all__ = [
    "BIN_DIR",
    "FINISHED_OBSERVATION",
    "SANDBOX_BIN_DIR",
    "TOOL_NAMES",
    "TOOL_SPECS",
    "ToolCall",
    "ToolError",
    "ToolRun",
    "ToolSpec",
    "error_observation",
    "exit_code_text",
    "format_observation",
    "run_tool_locally",
    "shell_command",
    "timeout_observation",
    "to_command",
    "tool_files",
    "truncate_observation",
    "validate",
]
