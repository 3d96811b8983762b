"""The Kubernetes backend's own cases (the shared ones are in test_sandbox_conformance.py).

Everything runs against the test API server (k8s_server.py) through the unmodified client, with
one fault knob per test; each failure must end as a SandboxError (-> infra_error), naming the
pod or image, never as a result and never as reward 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from deepswe.env.agent.loop import run_episode
from deepswe.env.episode import run_task
from deepswe.env.grading.outcomes import Outcome
from deepswe.env.policies import Reply
from deepswe.env.policies.scripted import GoldPolicy
from deepswe.env.sandbox import SandboxDied, SandboxLimits, SandboxStartError, channel
from deepswe.env.sandbox import kubernetes_exec as kexec
from deepswe.env.sandbox.kubernetes import KubernetesSandbox, gc, load_configuration, pod_manifest
from deepswe.env.trajectory import Ending

LIMITS = SandboxLimits(command_timeout_s=20, memory="512m", start_timeout_s=20)
NS = "deepswe"
CLI = str(Path(sys.executable).with_name("deepswe-eval"))


def _box(cluster, image, **kw) -> KubernetesSandbox:
    limits = kw.pop("limits", LIMITS)
    return KubernetesSandbox(image, limits, workdir="/", kubeconfig=cluster.kubeconfig, **kw)


def _pods(cluster) -> list[str]:
    return [p["metadata"]["name"] for p in cluster.listing(NS, "deepswe.sandbox=1")]


# --- the pod and the configuration (no containers) ----------------------------------------------


def test_pod_spec_is_locked_down():
    owner = "batch/v1/Job/eval-1/0f0e"
    limits = SandboxLimits(cpus=0.5, memory="1g")
    pod = pod_manifest("p", "img", limits, {"deepswe.sandbox": "1"}, owner=owner)
    spec, c = pod["spec"], pod["spec"]["containers"][0]
    want = {"cpu": "500m", "memory": str(1 << 30), "ephemeral-storage": "10Gi"}
    assert c["resources"]["requests"] == c["resources"]["limits"] == want
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] > 0
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "eval-1", "uid": "0f0e"}
    assert pod["metadata"]["ownerReferences"] == [ref]


def test_no_cluster_configured_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SandboxStartError, match="no Kubernetes cluster configured") as info:
        load_configuration(str(tmp_path / "missing"))
    assert "\n" not in str(info.value)


def test_eval_run_without_a_cluster_fails_before_any_episode(tmp_path):
    """`deepswe-eval run --sandbox kubernetes` with neither KUBECONFIG nor in-cluster config:
    one line, exit 2, and no run folder (nothing was started)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env.update(KUBECONFIG=str(tmp_path / "nope"), HOME=str(tmp_path))
    out = tmp_path / "run"
    cmd = [
        CLI,
        "run",
        "eval.sandbox_backend=kubernetes",
        "eval.policy.name=gold",
        "--dataset",
        "x.jsonl",
    ]
    cmd += ["--out", str(out)]
    dry = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, env=env)
    assert '"sandbox_backend": "kubernetes"' in dry.stdout, dry.stderr
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().count("\n") == 0
    assert "sandbox backend kubernetes: no Kubernetes cluster configured" in res.stderr
    assert not out.exists()


# --- the cluster's side: infra/kubernetes/ -------------------------------------------------------

INFRA = Path(__file__).resolve().parents[2] / "infra" / "kubernetes"
# The oldest and newest Kubernetes minor versions the manifests are checked against.
SCHEMA_VERSIONS = ("1.29.0", "1.37.0")


def _manifests() -> list[dict]:
    import yaml

    docs = [d for f in sorted(INFRA.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    return [d for d in docs if d]


def test_cluster_manifests_and_the_pod_are_valid_in_strict_mode():
    """Unknown or misspelt fields fail here, not at `kubectl apply` on someone's cluster."""
    import kubernetes_validate

    docs = _manifests()
    kinds = sorted(d["kind"] for d in docs)
    want = ["DaemonSet", "Namespace", "NetworkPolicy", "Role", "RoleBinding", "ServiceAccount"]
    assert kinds == want
    pod = pod_manifest("p", "img", LIMITS, {"deepswe.sandbox": "1"}, runtime_class="gvisor")
    for version in SCHEMA_VERSIONS:
        for doc in [*docs, pod]:
            kubernetes_validate.validate(doc, version, strict=True)
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"] and policy["egress"] == []
    assert policy["podSelector"] == {"matchLabels": {"deepswe.sandbox": "1"}}


def _role_verbs() -> set[tuple[str, str]]:
    role = next(d for d in _manifests() if d["kind"] == "Role")
    return {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}


@pytest.mark.docker
def test_the_role_grants_exactly_the_verbs_the_backend_uses(k8s_cluster, base_image, monkeypatch):
    from deepswe.env.sandbox import preflight

    monkeypatch.setenv("KUBECONFIG", k8s_cluster.kubeconfig)
    k8s_cluster.verbs = set()
    preflight("kubernetes")
    with _box(k8s_cluster, base_image) as sb:
        sb.run("true")
    gc(kubeconfig=k8s_cluster.kubeconfig)
    left = _box(k8s_cluster, base_image)  # left for the sweep: a delete-collection
    gc(kubeconfig=k8s_cluster.kubeconfig)
    left.close()
    # A websocket exec is a GET (verb "get" before 1.31); 1.31+ authorizes it as "create".
    assert k8s_cluster.verbs | {("pods/exec", "create")} == _role_verbs()


# --- start-up faults ------------------------------------------------------------------------------


@pytest.mark.docker
def test_a_pod_that_never_becomes_ready_is_a_start_error_naming_it(k8s_cluster, base_image):
    k8s_cluster.hold_pending = True
    try:
        limits = LIMITS.model_copy(update={"start_timeout_s": 1.5})
        with pytest.raises(SandboxStartError, match=r"pod deepswe-\w+ was not Ready .*Pending"):
            _box(k8s_cluster, base_image, limits=limits)
    finally:
        k8s_cluster.hold_pending = False
    assert not _pods(k8s_cluster), "the pod was left behind"


@pytest.mark.docker
def test_pending_for_a_while_then_running_starts(k8s_cluster, base_image):
    k8s_cluster.pending_s = 1.5
    try:
        with _box(k8s_cluster, base_image) as sb:
            assert sb.ready_seconds >= 1.5
            assert sb.run("echo up").stdout == "up\n"
    finally:
        k8s_cluster.pending_s = 0.0


@pytest.mark.docker
def test_throttled_and_failed_creates_are_retried(k8s_cluster, base_image):
    k8s_cluster.create_faults = [(429, False), (500, False)]
    with _box(k8s_cluster, base_image) as sb:
        assert sb.run("echo up").stdout == "up\n"
        assert _pods(k8s_cluster) == [sb.id]
    assert not k8s_cluster.create_faults


@pytest.mark.docker
def test_a_create_whose_answer_was_lost_adopts_the_pod(k8s_cluster, base_image):
    """The first create lands but answers 500; the retry's 409 is our own pod: one pod, used."""
    k8s_cluster.create_faults = [(500, True)]
    with _box(k8s_cluster, base_image) as sb:
        assert _pods(k8s_cluster) == [sb.id]
        assert sb.run("echo up").stdout == "up\n"
    assert not _pods(k8s_cluster)


@pytest.mark.docker
def test_a_conflict_with_a_pod_not_ours_is_a_start_error(k8s_cluster, base_image):
    k8s_cluster.create_faults = [(409, False)]
    with pytest.raises(SandboxStartError, match="could not be created: 409 Conflict"):
        _box(k8s_cluster, base_image)
    assert not _pods(k8s_cluster)


@pytest.mark.docker
def test_a_refused_exec_handshake_right_after_running_is_retried(k8s_cluster, base_image):
    k8s_cluster.exec_faults = [(500, 'container not found ("sandbox")'), (500, "internal error")]
    with _box(k8s_cluster, base_image) as sb:
        assert sb.run("echo up").stdout == "up\n"
    assert not k8s_cluster.exec_faults


@pytest.mark.docker
def test_an_image_that_cannot_be_pulled_is_infra_error_naming_it(
    k8s_cluster, calc_task, monkeypatch
):
    task = calc_task.model_copy(update={"environment": None, "image": "deepswe-no-such:1"})
    monkeypatch.setenv("KUBECONFIG", k8s_cluster.kubeconfig)
    traj = run_task(task, GoldPolicy(task.gold_patch), backend="kubernetes", sandbox_limits=LIMITS)
    assert traj.ending is Ending.INFRA_ERROR and traj.outcome is Outcome.INFRA_ERROR
    assert traj.reward is None
    assert "image 'deepswe-no-such:1' cannot be pulled (ImagePullBackOff" in traj.ending_detail


# --- faults under a running command -------------------------------------------------------------


def _dies_during(sb, action, cmd="sleep 30", within=15.0) -> SandboxDied:
    threading.Timer(0.5, action).start()
    started = time.monotonic()
    with pytest.raises(SandboxDied) as info:
        sb.run(cmd, timeout=25)
    assert time.monotonic() - started < within, "the host waited for the command's deadline"
    return info.value


@pytest.mark.docker
def test_pod_deleted_under_a_running_command_is_sandbox_died(k8s_cluster, base_image):
    with _box(k8s_cluster, base_image) as sb:
        died = _dies_during(sb, lambda: k8s_cluster.delete(NS, sb.id))
        assert f"exec stream to pod {sb.id} closed (pod gone)" in str(died)


@pytest.mark.docker
def test_a_stream_dropped_mid_command_is_sandbox_died_and_kills_the_command(
    k8s_cluster, base_image
):
    """An exec'd process survives a dropped stream unless the helper, seeing its input end,
    kills the command in flight: the pod must not keep running what nobody waits for."""
    with _box(k8s_cluster, base_image) as sb:
        died = _dies_during(sb, k8s_cluster.drop_streams, cmd="sleep 123")
        assert f"exec stream to pod {sb.id} closed (phase Running)" in str(died)
        ps = ["docker", "exec", k8s_cluster.container(NS, sb.id), "ps", "-eo", "args"]
        for _ in range(50):
            if "sleep 123" not in subprocess.run(ps, capture_output=True, text=True).stdout:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the command outlived its dropped stream")


# --- what the helper does for the pod ----------------------------------------------------------


@pytest.mark.docker
def test_the_process_limit_is_enforced_inside_the_pod(k8s_cluster, base_image):
    """The pod API has no pids limit; the helper kills a command whose processes pass it."""
    limits = LIMITS.model_copy(update={"pids": 32})
    with _box(k8s_cluster, base_image, limits=limits) as sb:
        r = sb.run("for i in $(seq 100); do sleep 60 & done; wait", timeout=20)
        assert not r.timed_out and "more than 32 processes; the command was killed" in r.stderr
        assert int(sb.run("ps -e --no-headers | wc -l").stdout) < 10
        assert sb.run("echo fine").stdout == "fine\n"


@pytest.mark.docker
def test_an_idle_stream_carries_keepalives_that_are_not_answers(
    k8s_cluster, base_image, monkeypatch
):
    monkeypatch.setenv("DEEPSWE_K8S_KEEPALIVE_S", "0.2")
    with _box(k8s_cluster, base_image) as sb:
        r = sb.run("sleep 1.5; echo done")
        assert r.stdout == "done\n" and r.exit_code == 0
        assert sb._channel.keepalives >= 4


@pytest.mark.docker
def test_pod_evicted_under_a_hung_stream_is_found_by_its_phase(
    k8s_cluster, base_image, monkeypatch
):
    """The node vanished: the stream neither ends nor answers; the host asks the API server."""
    monkeypatch.setattr(kexec, "POD_PROBE_S", 0.5)
    with _box(k8s_cluster, base_image) as sb:
        died = _dies_during(sb, lambda: k8s_cluster.evict(NS, sb.id, hang=True), within=8)
        assert "phase Failed, Evicted" in str(died) and "while its exec stream hung" in str(died)


@pytest.mark.docker
def test_an_exec_that_never_sends_its_status_ends_at_the_host_deadline(
    k8s_cluster, base_image, monkeypatch
):
    """The helper is gone but the stream stays open and silent: the call's own deadline ends it."""
    monkeypatch.setattr(channel, "REPLY_GRACE_S", 1.0)
    k8s_cluster.withhold_status = True
    try:
        with _box(k8s_cluster, base_image) as sb:
            started = time.monotonic()
            with pytest.raises(SandboxDied, match="gave no answer within 3s"):
                sb.run("kill -9 $PPID", timeout=2)
            assert time.monotonic() - started < 8
    finally:
        k8s_cluster.withhold_status = False


class _EvictsItsPod:
    """A policy whose second turn has the pod evicted (its stream hanging) before it acts."""

    name = "evicter"

    def __init__(self, cluster, pod: str) -> None:
        self.cluster, self.pod, self.turn = cluster, pod, 0

    def reply(self, messages, *, timeout):
        self.turn += 1
        if self.turn == 2:
            self.cluster.evict(NS, self.pod, hang=True)
        return Reply(text="<function=execute_bash><parameter=cmd>ls</parameter></function>")

    def count_tokens(self, messages):
        return None


@pytest.mark.docker
def test_pod_evicted_mid_episode_is_infra_error_not_reward_zero(
    k8s_cluster, calc_task, monkeypatch
):
    from deepswe.env.images.task import ensure_task_image

    monkeypatch.setattr(kexec, "POD_PROBE_S", 0.5)
    image = ensure_task_image(calc_task, log=lambda _: None)
    limits = LIMITS.model_copy(update={"memory": "1g"})
    sb = KubernetesSandbox(image, limits, kubeconfig=k8s_cluster.kubeconfig)
    with sb:
        traj = run_episode(calc_task, _EvictsItsPod(k8s_cluster, sb.id), sb)
    assert traj.ending is Ending.INFRA_ERROR, traj.ending_detail
    assert traj.reward is None and traj.outcome is None
    assert "Evicted" in traj.ending_detail


# --- gc -------------------------------------------------------------------------------------------


@pytest.mark.docker
def test_gc_by_run_label_deletes_every_pod_of_the_run(k8s_cluster, base_image):
    mine = [_box(k8s_cluster, base_image, labels={"deepswe.run": "r1"}) for _ in range(2)]
    other = _box(k8s_cluster, base_image, labels={"deepswe.run": "r2"})
    try:
        gone = gc("deepswe.run=r1", kubeconfig=k8s_cluster.kubeconfig)
        assert sorted(gone) == sorted(sb.id for sb in mine)
        assert _pods(k8s_cluster) == [other.id]
        assert other.run("echo alive").stdout == "alive\n"
        with pytest.raises(SandboxDied):
            mine[0].run("true")
    finally:
        for sb in [*mine, other]:
            sb.close()


@pytest.mark.docker
def test_deepswe_env_gc_sweeps_pods_by_selector_and_says_so_without_a_cluster(
    k8s_cluster, base_image, tmp_path, monkeypatch
):
    from typer.testing import CliRunner

    from deepswe.env.cli import app

    sb = _box(k8s_cluster, base_image, labels={"deepswe.run": "r3"})
    try:
        monkeypatch.setenv("KUBECONFIG", k8s_cluster.kubeconfig)
        args = ["gc", "--backend", "kubernetes", "--selector", "deepswe.run=r3"]
        kept = CliRunner().invoke(app, args)  # its owner (this process) is alive
        assert kept.exit_code == 0 and "removed 0 sandbox pod(s)" in kept.output
        swept = CliRunner().invoke(app, [*args, "--all"])
        assert swept.exit_code == 0 and f"removed 1 sandbox pod(s): {sb.id}" in swept.output
        assert _pods(k8s_cluster) == []
    finally:
        sb.close()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    none = CliRunner().invoke(app, ["gc", "--backend", "kubernetes"])
    assert none.exit_code == 2 and "no Kubernetes cluster configured" in none.output


@pytest.mark.docker
def test_gc_leaves_no_pod_behind_after_a_killed_evaluation(k8s_cluster, base_image, tmp_path):
    """`deepswe-eval run --sandbox kubernetes` SIGKILLed mid-run leaves its pods; the orphan
    sweep (what the next start runs) deletes exactly those, not a live process's pods."""
    from deepswe.data.toy import make_toy_tasks, write_tasks
    from deepswe.env.images.task import ensure_task_image

    tasks = make_toy_tasks(tmp_path / "toy", n=2)
    ensure_task_image(tasks[0], log=lambda _: None)  # one image serves both
    data = write_tasks(tasks, tmp_path / "tasks.jsonl")
    cmd = [
        CLI,
        "run",
        "eval.sandbox_backend=kubernetes",
        "--dataset",
        str(data),
        "eval.policy.name=gold",
    ]
    cmd += [
        "eval.runs=3",
        "eval.workers=2",
        "eval.sandbox.memory=1g",
        "--out",
        str(tmp_path / "run"),
    ]
    env = {**os.environ, "KUBECONFIG": k8s_cluster.kubeconfig}
    live = _box(k8s_cluster, base_image)  # this process's: must survive the sweep
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while len(_pods(k8s_cluster)) < 2 and proc.poll() is None:
            assert time.monotonic() < deadline, "the evaluation never started a pod"
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        left = [p for p in _pods(k8s_cluster) if p != live.id]
        assert left, "the kill landed after the run's pods were gone"
        gone = gc(orphans_only=True, kubeconfig=k8s_cluster.kubeconfig)
        assert sorted(gone) == sorted(left)
        assert _pods(k8s_cluster) == [live.id]
        assert live.run("echo alive").stdout == "alive\n"
    finally:
        live.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


SWE_MINI_IDS = ["inflection__inflection-0a9be10e"]  # one task: each backend grades it twice


@pytest.mark.docker
def test_swe_mini_validation_gives_the_same_verdicts_as_docker(k8s_cluster, tmp_path):
    """Real bugs in a real project, gold and empty, graded through pods: the verdicts match
    the Docker backend's, episode by episode."""
    import json

    from deepswe.data.loaders import load_jsonl
    from deepswe.data.swemini.manifest import TASKS, load_manifest
    from deepswe.data.swemini.sources import fetch

    # What `make data` does, for the one project used (a fresh CI machine has none): a skip here
    # would leave the Kubernetes evaluation untested in CI.
    manifest = load_manifest()
    manifest = manifest.model_copy(update={"projects": [manifest.project("inflection")]})
    rows = [r for r in load_jsonl(TASKS) if r.repo == "pypi/inflection"]
    fetch(manifest, rows, log=lambda _: None, rebuild=False)
    env = {**os.environ, "KUBECONFIG": k8s_cluster.kubeconfig}
    verdicts = {}
    for backend in ("docker", "kubernetes"):
        out = tmp_path / backend
        cmd = [
            CLI,
            "validate",
            "--dataset",
            "swe-mini",
            f"eval.sandbox_backend={backend}",
            "--out",
            str(out),
        ]
        cmd += ["eval.workers=2", *(a for i in SWE_MINI_IDS for a in ("--ids", i))]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stderr[-3000:]
        verdicts[backend] = {
            (policy, i): json.loads((out / policy / "episodes" / i / "run-0.json").read_text())[
                "outcome"
            ]
            for policy in ("gold", "empty")
            for i in SWE_MINI_IDS
        }
    assert verdicts["kubernetes"] == verdicts["docker"]
    assert {v for (p, _), v in verdicts["kubernetes"].items() if p == "gold"} == {"resolved"}
    assert not _pods(k8s_cluster)
