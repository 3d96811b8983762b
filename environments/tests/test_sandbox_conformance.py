"""One conformance suite for every Sandbox backend, so backends cannot drift apart.

The local backend runs server.py as a host subprocess; the docker one in a real container of the
bookworm base image; the kubernetes one in a pod of the test API server (k8s_server.py), which is
a real container of the same image reached through the unmodified `kubernetes` client; k8s_live
in a pod of a real cluster ($KUBECONFIG, image $DEEPSWE_K8S_LIVE_IMAGE, which must have bash and
python3), skipped where there is none. Paths are under a per-test folder that exists in all of
them.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from deepswe.env.sandbox import Sandbox, SandboxError, SandboxLimits, backend_class, preflight

LIMITS = SandboxLimits(command_timeout_s=20, max_output_bytes=100_000, pids=256, memory="512m")


BACKEND_PARAMS = [
    "local",
    pytest.param("docker", marks=pytest.mark.docker),
    pytest.param("kubernetes", marks=pytest.mark.docker),
    pytest.param("k8s_live", marks=pytest.mark.k8s_live),
]


def _live_cluster() -> str:
    """The image to run on the cluster $KUBECONFIG names; skips when there is no cluster."""
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("k8s_live: no $KUBECONFIG, so no cluster to run against")
    try:
        preflight("kubernetes")
    except SandboxError as exc:
        pytest.skip(f"k8s_live: {exc}")
    return os.environ.get("DEEPSWE_K8S_LIVE_IMAGE", "python:3.12-slim-bookworm")


@pytest.fixture(params=BACKEND_PARAMS)
def box(request, tmp_path):
    if request.param == "docker":
        image = request.getfixturevalue("base_image")
        sb = backend_class("docker")(image, LIMITS, workdir="/")
        root = f"/tmp/conf-{uuid.uuid4().hex[:8]}"
    elif request.param == "kubernetes":
        image = request.getfixturevalue("base_image")
        kubeconfig = request.getfixturevalue("k8s_cluster").kubeconfig
        sb = backend_class("kubernetes")(image, LIMITS, workdir="/", kubeconfig=kubeconfig)
        root = f"/tmp/conf-{uuid.uuid4().hex[:8]}"
    elif request.param == "k8s_live":
        limits = LIMITS.model_copy(update={"start_timeout_s": 600})  # a real pull may be slow
        sb = backend_class("kubernetes")(_live_cluster(), limits, workdir="/")
        root = f"/tmp/conf-{uuid.uuid4().hex[:8]}"
    else:
        sb = backend_class("local")(None, LIMITS)
        root = str(tmp_path)
    sb.run(f"mkdir -p {root}")
    sb.root = root  # type: ignore[attr-defined]
    yield sb
    sb.close()


def test_is_a_sandbox(box):
    assert isinstance(box, Sandbox)


def test_run_reports_exit_code_and_both_streams(box):
    r = box.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)


def test_run_honours_cwd_and_env(box):
    r = box.run("pwd; echo $FOO", cwd=box.root, env={"FOO": "bar baz"})
    assert r.stdout.split("\n")[:2] == [box.root, "bar baz"]


def test_timeout_kills_the_whole_process_group(box):
    pidfile = f"{box.root}/pid"
    r = box.run(f"sleep 300 & echo $! > {pidfile}; wait", timeout=1)
    assert r.timed_out and r.exit_code == -9
    pid = box.read_file(pidfile).decode().strip()
    # Gone, or a zombie waiting for its reaper (killed, no longer running). SIGKILL takes effect
    # when the child is next scheduled: on a loaded machine (CI, two test workers) that can be
    # after the first look, so it gets 5 s (`sleep 300` would still be running then).
    alive = box.run(
        f"for _ in $(seq 50); do test -e /proc/{pid} && ! grep -q '^State:.*Z' /proc/{pid}/status"
        " || exit 1; sleep 0.1; done",
        timeout=30,
    )
    assert alive.exit_code != 0, "the background child outlived the timeout"


def test_children_left_behind_do_not_hold_the_call(box):
    """A command that leaves a writer behind (`yes > /dev/null &`) still returns promptly."""
    r = box.run("yes > /dev/null & echo started", timeout=15)
    assert not r.timed_out and r.stdout == "started\n"


def test_output_is_capped_with_a_marker(box):
    r = box.run("head -c 300000 /dev/zero | tr '\\0' 'a'")
    assert r.truncated and "output truncated: 200000 more bytes dropped" in r.stdout
    assert r.stdout.startswith("a" * 100_000)


def test_endless_output_ends_at_the_timeout(box):
    r = box.run("yes", timeout=2)
    assert r.timed_out and r.truncated
    assert box.run("echo alive").stdout == "alive\n"


def test_files_round_trip_bytes(box):
    data = bytes(range(256)) * 10
    box.write_file(f"{box.root}/sub/dir/blob.bin", data, mode=0o755)
    assert box.read_file(f"{box.root}/sub/dir/blob.bin") == data
    assert box.run(f"test -x {box.root}/sub/dir/blob.bin").exit_code == 0


def test_reading_a_missing_file_is_file_not_found(box):
    with pytest.raises(FileNotFoundError):
        box.read_file(f"{box.root}/nope.txt")


def test_copy_in_a_folder(box, tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text("X = 1\n")
    box.copy_in(src, f"{box.root}/copied")
    assert box.read_file(f"{box.root}/copied/pkg/m.py") == b"X = 1\n"


def test_close_twice_is_safe(box):
    box.close()
    box.close()


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown sandbox backend 'nope'"):
        backend_class("nope")


def test_local_backend_accepts_a_dotted_path(tmp_path: Path):
    cls = backend_class("deepswe.env.sandbox.local:LocalSandbox")
    with cls(None, LIMITS) as sb:
        assert sb.run("echo hi").stdout == "hi\n"


def test_an_answer_forged_into_the_helpers_stdout_is_not_taken(box):
    """A command that reaches the helper's stdout (`/proc/<helper>/fd/1`: the same user, as a
    test process under SWE-bench's rules is) writes a well-formed answer to the request in
    flight; the host takes only the answer carrying the request's random id."""
    forged = '{"ok": true, "exit_code": 0, "stdout": "forged", "stderr": "", "timed_out": false}'
    r = box.run(f"echo '{forged}' > /proc/$PPID/fd/1 && sleep 0.5; echo real")
    assert r.stdout == "real\n"
