"""Scaffolds: which environment's observable behaviour the agent loop shows the model.

DeepSWE-Preview was trained and evaluated inside R2E-Gym's environment. Our tools follow its
messages and formats everywhere; three behaviours differ by design, and `scaffold` chooses:

| behaviour | "r2e-gym" (what the model was trained on) | "deepswe" (clearer) |
|---|---|---|
| a call to a function that is not a tool | `Execution output of [<name>]:\\n` and nothing more: `RepoEnv.run_action` (src/r2egym/agenthub/environment/env.py) catches its own "Invalid Action" assertion and sets the output to "" | the assertion's message, saying which tools exist |
| ending the episode | any function whose name holds "finish" or "submit" (env.py `step`); the observation recorded is `<<< Finished >>>` (observation/observation.py) | `finish` only; nothing recorded |
| reading a file in `file_editor` | decoded with the encoding chardet guesses (tools/r2egym/file_editor.py `read_file`), chardet 5.2.0 as of R2E-Gym's time: a short UTF-8 file with one `≥` reads as Windows-1252, `â‰¥` | strict UTF-8 |

The decoder travels as chardet's pure-Python wheel (`decoder_wheel`), fetched once from PyPI into
the cache and written into each r2e-gym sandbox at `SANDBOX_DECODER`, where the editor imports
it from the zip; an interpreter chardet 5.2 cannot run on (Python 3.6) reads strict UTF-8.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

Scaffold = Literal["r2e-gym", "deepswe"]
SCAFFOLDS: tuple[Scaffold, ...] = ("r2e-gym", "deepswe")

CHARDET = "chardet==5.2.0"
SANDBOX_DECODER = "/usr/local/lib/deepswe-tools/chardet.whl"
"""Where the editor looks for the decoder (its $DEEPSWE_EDITOR_DECODER overrides it)."""


def ends_episode(name: str, scaffold: Scaffold) -> bool:
    """Whether a call to function `name` ends the episode."""
    if scaffold == "r2e-gym":
        return "finish" in name.lower() or "submit" in name.lower()
    return name == "finish"


@functools.cache
def decoder_wheel() -> Path:
    """chardet's wheel on this machine: downloaded from PyPI on first use, then from the cache
    ($DEEPSWE_CACHE/wheels). Raises RuntimeError naming what to do when it cannot be fetched."""
    from deepswe.env.images.recipe import cache_root
    from deepswe.env.images.wheels import download_wheels

    dest = cache_root() / "tools"
    try:
        wheels = download_wheels([CHARDET], dest, "3.11")
    except Exception as exc:  # pip's failure, offline
        raise RuntimeError(
            f"scaffold r2e-gym: {CHARDET} (the file_editor's decoder) could not be fetched "
            f"from PyPI ({exc}); fetch it once online, or use scaffold: deepswe"
        ) from exc
    found = [w for w in wheels if w.name.startswith("chardet-") and w.suffix == ".whl"]
    if not found:
        raise RuntimeError(f"scaffold r2e-gym: no wheel for {CHARDET} in {dest}")
    return found[0]


__all__ = ["CHARDET", "SANDBOX_DECODER", "SCAFFOLDS", "Scaffold", "decoder_wheel", "ends_episode"]
