"""Dataset rows turned into environments this project builds from source, offline.

    swebench/   SWE-bench rows: swebench 4.1.0's specs (Python, conda lists, pip packages,
                pre_install and install commands, downloads) translated into EnvironmentSpecs
    r2e_gym/    R2E-Gym rows: R2E-Gym's per-repository install scripts restated as recipes,
                the attempt a row's setup log names, its requirements read at the base commit

Each gives a Task the `environment` that `deepswe.env.images.task.ensure_task_image` builds, or
says why none of ours serves the row (`UnsupportedEnv`: recorded `unsupported_env`, never run).
The evaluation harness (`deepswe.eval`) and training call these; they run nothing themselves.
"""


class UnsupportedEnv(Exception):
    """No environment of ours serves this row; the message says why."""


__all__ = ["UnsupportedEnv"]
