"""R2E-Gym's hidden tests: out of the agent's reach during the episode, in place only to grade.

What R2E-Gym does (agentica-project/R2E-Gym, src/r2egym/agenthub/runtime/docker.py
`DockerRuntime.setup_env`, `run_tests`, `_calculate_reward_r2e`; src/r2egym/agenthub/__init__.py
SKIP_FILES, SKIP_FILES_NEW), restated:
- its images hold the repository in /testbed with a virtualenv at /testbed/.venv and the test
  script /testbed/run_tests.sh (`<env> .venv/bin/python -W ignore -m pytest -rA r2e_tests`,
  repo_analysis_args.py `tests_cmd`), and the row's hidden tests in /r2e_tests;
- before the agent starts it moves run_tests.sh and /r2e_tests to /root and links
  /testbed/r2e_tests to /root/r2e_tests, so the agent can still list and read the tests
  through the link, and edit nothing that grades only because /root is out of its usual path;
- the reward runs `bash /root/run_tests.sh` in the agent's own container after the episode,
  and compares every parsed test status with the row's expected_output_json.

Here (`deepswe.env.reward`, `deepswe.env.agent.loop`):
- in the agent's sandbox the hidden tests and the test script do not exist: an image that ships
  them (R2E-Gym's own) has them removed before the start snapshot, with R2E-Gym's other
  grading files; images built from source never have them;
- grading runs in a fresh sandbox: the row's test files are written to /root/r2e_tests, and
  /testbed/r2e_tests, whatever the patch put there, becomes the link R2E-Gym makes;
- the command that grades is the task's own (R2E-Gym's tests_cmd for the repository, recorded
  in the task), never a script from the image or the patch, run in /testbed as R2E-Gym runs it.
"""

from __future__ import annotations

import shlex

from unidiff import PatchSet

from deepswe.data.task import Task
from deepswe.env.sandbox import Sandbox, SandboxError
from deepswe.env.workspace import START_REF

HIDDEN_TESTS_DIR = "/root/r2e_tests"  # R2E-Gym's alt_path (/root) + r2e_tests
TESTS_LINK = "r2e_tests"  # in the repository, what tests_cmd names
IMAGE_TESTS_DIR = "/r2e_tests"  # where R2E-Gym's images ship them
# R2E-Gym's SKIP_FILES: grading material its older images keep in /testbed.
GRADING_FILES = (
    "run_tests.sh",
    "syn_issue.json",
    "expected_test_output.json",
    "execution_result.json",
    "parsed_commit.json",
    "modified_files.json",
    "modified_entities.json",
    TESTS_LINK,
)


def uses_r2e_layout(task: Task) -> bool:
    """Tasks whose hidden tests are whole files (R2E-Gym's rows), not a test patch."""
    return bool(task.hidden.test_files)


def hide_script(workdir: str = "/testbed") -> str:
    """Bash that removes the grading material an R2E-Gym image ships and keeps an in-repository
    virtualenv out of snapshots and patches (run before the start snapshot)."""
    where = shlex.quote(workdir)
    files = " ".join(shlex.quote(f) for f in GRADING_FILES)
    return (
        f"rm -rf {IMAGE_TESTS_DIR} {HIDDEN_TESTS_DIR} /root/run_tests.sh\n"
        f"cd {where} || exit 1\n"
        f"rm -rf {files}\n"
        "if [ -e .venv ] && [ -d .git ] && ! git check-ignore -q .venv; then\n"
        "  mkdir -p .git/info && echo /.venv >> .git/info/exclude\n"
        "fi\n"
    )


def hide_grading_material(sandbox: Sandbox, workdir: str = "/testbed") -> None:
    """Run `hide_script` in `sandbox`; SandboxError if it fails."""
    r = sandbox.run(hide_script(workdir), cwd="/", timeout=120)
    if r.timed_out or r.exit_code != 0:
        raise SandboxError(
            f"cannot hide R2E-Gym's grading files (exit {r.exit_code}): {r.output[-300:]}"
        )


# R2E-Gym's create_tests (repo_analysis/repo_testextract.py) also writes an empty
# r2e_tests/__init__.py and copies these repository files, as they are at the fix commit, beside
# the tests (Pillow's tests import `.helper`); a row's test files list neither.
MISC_FILES = ("Tests/helper.py",)
_SCRATCH = "/tmp/deepswe/r2e-misc"


def misc_files(task: Task) -> tuple[dict[str, str], str]:
    """({sandbox path: text} to write, bash run in the repository) that put R2E-Gym's extra
    files into the hidden tests' folder: the empty __init__.py, and each MISC_FILES entry from
    the start snapshot with the commit's own change to it (its part of the test patch)."""
    files: dict[str, str] = {}
    if "__init__.py" not in task.hidden.test_files:
        files[f"{HIDDEN_TESTS_DIR}/__init__.py"] = ""
    changes = {f.path: str(f) for f in PatchSet(task.hidden.test_patch or "")}
    lines = []
    for path in MISC_FILES:
        name = path.rsplit("/", 1)[-1]
        if name in task.hidden.test_files:
            continue
        work = f"{_SCRATCH}/{path}"
        at, q = shlex.quote(f"{START_REF}:{path}"), shlex.quote(work)
        lines.append(f"rm -rf {_SCRATCH} && mkdir -p $(dirname {q})")
        lines.append(f"git cat-file -e {at} 2>/dev/null && git show {at} > {q}")
        if path in changes:
            diff = f"{_SCRATCH}.{name}.patch"
            files[diff] = changes[path]
            lines.append(f"(cd {_SCRATCH} && patch -p1 --batch --forward -i {diff} >&2) || exit 3")
        lines.append(f"if [ -f {q} ]; then cp {q} {HIDDEN_TESTS_DIR}/{name}; fi")
    return files, "\n".join(lines)


def link_script() -> str:
    """Bash (run in the repository) that makes r2e_tests the link to the hidden tests."""
    return f"rm -rf {TESTS_LINK} && ln -s {HIDDEN_TESTS_DIR} {TESTS_LINK}"


__all__ = [
    "GRADING_FILES",
    "MISC_FILES",
    "HIDDEN_TESTS_DIR",
    "TESTS_LINK",
    "hide_grading_material",
    "hide_script",
    "link_script",
    "misc_files",
    "uses_r2e_layout",
]
