"""Root's reach for the tests, over their own files only: the tester is root of a user namespace
of its own (grading/tester.py), which the grading sandbox's seccomp profile allows
(sandbox/seccomp.py), in real containers on the calc task (swe-mini's shape).

Tests that need root's reach (R2E-Gym's aiohttp rows read a file they chmod 000, as the
reference ran them as root) pass; what root of the namespace could reach beyond its own files
(the graded files, root's files, another namespace, another root directory) stays out of reach.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from deepswe.data.task import Task
from deepswe.env.grading import tester  # tester_script would be collected as a test
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.images.task import ensure_task_image
from deepswe.env.reward import NO_ROOT_REACH, ROOT_REACH
from deepswe.env.sandbox import SandboxLimits
from deepswe.env.sandbox.docker import DockerSandbox

sys.path.insert(0, str(Path(__file__).parent))
from calc_task import OPS_BUG, calc_task, grade, make_repo, patch_of  # noqa: E402

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("reach"))


@pytest.fixture(scope="module")
def task(repo) -> Task:
    return calc_task(repo, "calc__reach-1")


@pytest.fixture(scope="module")
def image(task) -> str:
    return ensure_task_image(task, log=lambda _: None)


def _fixed_only_if(repo: Path, body: str) -> str:
    """A patch whose fix happens only when `body` runs without an exception."""
    lines = "\n".join("        " + line for line in body.splitlines())
    ops = OPS_BUG.replace(
        "    return a - b",
        f"    try:\n{lines}\n    except Exception:\n        return a - b\n    return a + b",
    )
    return patch_of(repo, {"calc/ops.py": ops})


# What root has over a file of its own: reading it with no permission bits.
OWN_FILE_UNREADABLE = """import os, tempfile
fd, path = tempfile.mkstemp()
os.write(fd, b"x")
os.close(fd)
os.chmod(path, 0)
with open(path, "rb") as f:
    assert f.read() == b"x"
"""


def test_a_fix_that_needs_roots_reach_over_its_own_files_resolves(repo, task, image):
    run = grade(task, _fixed_only_if(repo, OWN_FILE_UNREADABLE), image)
    assert run.grade.outcome is Outcome.RESOLVED, run.text
    assert ROOT_REACH in run.output


# What root of the namespace must not reach: each would "fix" the bug if it could.
BEYOND_ITS_FILES = {
    "graded-test-file-written": "open('/testbed/tests/test_ops.py', 'a').close()",
    "root-only-file-read": "open('/etc/shadow').read()",
    "mount-namespace": (
        "import subprocess\nsubprocess.run(['unshare', '--mount', 'true'], check=True)"
    ),
    "network-namespace": (
        "import subprocess\nsubprocess.run(['unshare', '--net', 'true'], check=True)"
    ),
    "new-root-directory": "import os\nos.chroot('/tmp')",
    "tmpfs-mounted": (
        "import subprocess\n"
        "subprocess.run(['mount', '-t', 'tmpfs', 'x', '/testbed/tests'], check=True)"
    ),
}


@pytest.mark.parametrize("name", sorted(BEYOND_ITS_FILES))
def test_root_of_the_namespace_reaches_nothing_beyond_its_own_files(name, repo, task, image):
    run = grade(task, _fixed_only_if(repo, BEYOND_ITS_FILES[name]), image)
    assert ROOT_REACH in run.output
    assert run.grade.outcome is Outcome.UNRESOLVED, run.text
    assert run.grade.f2p_failed == ["tests/test_ops.py::test_add"]


@pytest.mark.parametrize("namespaces", [True, False])
def test_the_tests_run_as_root_of_a_namespace_only_where_the_sandbox_allows_one(
    namespaces, task, image
):
    """Docker's own profile refuses the namespace: the tests then run as the plain tester, and
    the run says which."""
    limits = SandboxLimits(memory="1g", pids=256, user_namespaces=namespaces)
    with DockerSandbox(image, limits) as box:
        script = "id -u > /tmp/uid-seen; cat /proc/self/uid_map > /tmp/map-seen\n"
        box.run("mkdir -p /tmp/g", timeout=30)
        ran = tester.run_as_tester(box, "/tmp/g", script, "/testbed", timeout=60)
        seen = box.read_file("/tmp/uid-seen").decode().strip()
        mapping = box.read_file("/tmp/map-seen").decode().split()
    assert ran.result.exit_code == 0, ran.result.stdout
    assert ran.root_reach is namespaces
    if namespaces:
        assert seen == "0" and mapping == ["0", "65534", "1"]  # root over the tester's id only
    else:
        assert seen == "65534"


def test_no_namespace_where_the_engine_would_allow_more_than_one(task, image):
    """An engine that lets the tests make a mount namespace or chroot as well (no seccomp
    profile at all) gets the plain tester: root of a namespace there could mount over the graded
    files."""
    import docker

    script = tester.tester_script("/tmp/g", "tests.sh", "/testbed")
    setup = (
        "mkdir -p /tmp/g/private && echo '{}' > /tmp/g/private/settings && : > /tmp/g/protected"
        " && echo 'id -u > /tmp/uid-seen' > /tmp/g/tests.sh && cd /testbed && "
    )
    out = docker.from_env().containers.run(
        image,
        [
            "bash",
            "-c",
            setup + "bash -c " + shlex.quote(script) + "; cat /tmp/g/private/reach /tmp/uid-seen",
        ],
        security_opt=["seccomp=unconfined"],
        network_mode="none",
        remove=True,
    )
    assert out.decode().split() == ["0", "65534"]


def test_the_log_line_for_a_run_without_a_namespace_says_what_it_costs():
    assert "chmod 000" in NO_ROOT_REACH and "tester" in NO_ROOT_REACH
