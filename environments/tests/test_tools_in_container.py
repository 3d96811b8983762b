"""The tools installed in a real Debian container and run by name with the image's python3.

bookworm ships Python 3.11 and bullseye 3.9; the container has no network and no locale set
(Python then sees a C/POSIX locale), which is how many task images run.
"""

from __future__ import annotations

import io
import tarfile

import pytest

from deepswe.env.tools import SANDBOX_BIN_DIR, ToolCall, format_observation, to_command, tool_files

pytestmark = pytest.mark.docker


def _tools_tar() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, path in tool_files().items():
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="module", params=["bookworm", "bullseye"])
def container(request):
    import docker

    from deepswe.env.images import ensure_base_image

    image = ensure_base_image(request.param)
    client = docker.from_env()
    box = client.containers.run(
        image,
        ["sleep", "600"],
        detach=True,
        network_mode="none",
        working_dir="/",
        auto_remove=False,
    )
    try:
        box.exec_run(["mkdir", "-p", "/testbed/pkg"])
        box.put_archive(SANDBOX_BIN_DIR, _tools_tar())
        yield box
    finally:
        box.remove(force=True)


def _run(box, call: ToolCall) -> str:
    result = box.exec_run(
        to_command(call), workdir="/testbed", demux=True, environment={"LANG": ""}
    )
    stdout, stderr = (part.decode("utf-8") if part else "" for part in result.output)
    return format_observation(call.name, stdout, stderr, result.exit_code)


def test_tools_run_by_name_in_container(container):
    create = ToolCall(
        "file_editor",
        {
            "command": "create",
            "path": "/testbed/pkg/mod.py",
            "file_text": "def f():\n    return 'é'\n",
        },
    )
    assert _run(container, create).startswith(
        "Execution output of [file_editor]:\nFile created at /testbed/pkg/mod.py."
    )
    edit = ToolCall(
        "file_editor",
        {
            "command": "str_replace",
            "path": "/testbed/pkg/mod.py",
            "old_str": "'é'",
            "new_str": "'ü'",
        },
    )
    assert "    2\t    return 'ü'" in _run(container, edit)
    undo = ToolCall("file_editor", {"command": "undo_edit", "path": "/testbed/pkg/mod.py"})
    assert "Last edit to /testbed/pkg/mod.py undone successfully." in _run(container, undo)
    search = _run(container, ToolCall("search", {"search_term": "return", "path": "/testbed"}))
    assert search == (
        'Execution output of [search]:\nFound 1 matches for "return" in /testbed:\n'
        "./pkg/mod.py (1 matches)\n"
        'End of matches for "return" in /testbed\n'
    )
    bash = _run(container, ToolCall("execute_bash", {"cmd": "cat pkg/mod.py; exit 4"}))
    assert bash == (
        "Exit code: Error: Exit code 4\nExecution output of [execute_bash]:\n"
        "Error executing command:\n\n[STDOUT]\n\ndef f():\n    return 'é' \n\n[STDERR]\n\n\n"
    )
    blocked = _run(container, ToolCall("execute_bash", {"cmd": "git log"}))
    assert blocked.endswith(
        "Bash command 'git' is not allowed. Please use a different command or tool.\n"
    )
    assert _run(container, ToolCall("finish", {"command": "submit"})) == "<<< Finished >>>"
