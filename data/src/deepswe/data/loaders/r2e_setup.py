"""Which Python R2E-Gym's install ended up with for a row, read from the row's own setup log.

Several of R2E-Gym's install scripts (src/r2egym/install_utils/<repo>_install.sh) try Pythons in
turn (orange3: 3.7, 3.8, 3.10; pandas: 3.7, 3.8, 3.10) and keep the first that installs. Each
attempt starts with `uv venv --python X.Y`, which prints "Using CPython X.Y.Z" to stderr, and the
row's execution_result_content keeps that stderr (`setup_res_stderr`): the last such line names
the attempt that was kept (the script stops at the first success).

After that line, each `uv pip install` of the kept attempt lists what it installed as
` + name==version`: `setup_pins` reads them, so an image built here can install the same
versions (deepswe.env.recipes.r2e_gym passes them on as pip constraints).
"""

from __future__ import annotations

import re
from typing import Any

_USING = re.compile(r"Using (?:CPython|Python) (\d+)\.(\d+)(?:\.(\d+))?")


def setup_python(execution: dict[str, Any]) -> str | None:
    """The Python ("X.Y") of the last venv R2E-Gym's install made for this row, or None when
    the row's execution_result_content holds no setup log."""
    log = f"{execution.get('setup_res_stderr') or ''}\n{execution.get('setup_res_stdout') or ''}"
    found = _USING.findall(log)
    return f"{found[-1][0]}.{found[-1][1]}" if found else None


def setup_python_release(execution: dict[str, Any]) -> str | None:
    """The same Python's full release ("3.9.21", uv's CPython), or None when the log has none."""
    log = f"{execution.get('setup_res_stderr') or ''}\n{execution.get('setup_res_stdout') or ''}"
    found = [f for f in _USING.findall(log) if f[2]]
    return ".".join(found[-1]) if found else None


# uv's summary line of one installed distribution; "+ name==version (from file:///...)" (the
# project itself, built from its folder) has more after the version and is not a pin.
_INSTALLED = re.compile(r"^\s*\+ ([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*$", re.M)


def setup_pins(execution: dict[str, Any]) -> list[str]:
    """The `name==version` of every distribution the kept attempt's installs added, the last
    version of a name winning (a later step that upgrades it), sorted by name; [] without a
    setup log."""
    log = f"{execution.get('setup_res_stderr') or ''}\n{execution.get('setup_res_stdout') or ''}"
    starts = list(_USING.finditer(log))
    kept = log[starts[-1].end() :] if starts else log
    pins = {
        name.lower(): f"{name.lower()}=={version}" for name, version in _INSTALLED.findall(kept)
    }
    return [pins[n] for n in sorted(pins)]


__all__ = ["setup_pins", "setup_python", "setup_python_release"]
