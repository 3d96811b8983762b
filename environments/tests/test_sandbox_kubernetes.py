"""The Kubernetes backend's own cases (the shared ones are in test_sandbox_conformance.py).

Everything runs against the test API server (k8s_server.py) through the unmodified client; each
failure must end as a SandboxError (-> infra_error), naming the pod or image, never as a result.
"""

from __future__ import annotations

import threading
import time

import pytest

from deepswe.env.sandbox import SandboxDied, SandboxLimits, SandboxStartError
from deepswe.env.sandbox.kubernetes import KubernetesSandbox, gc, load_configuration, pod_manifest

LIMITS = SandboxLimits(command_timeout_s=20, memory="512m", start_timeout_s=20)


def test_pod_spec_is_locked_down():
    pod = pod_manifest("p", "img", SandboxLimits(cpus=0.5, memory="1g"), {"deepswe.sandbox": "1"})
    spec, c = pod["spec"], pod["spec"]["containers"][0]
    assert (
        c["resources"]["requests"]
        == c["resources"]["limits"]
        == {
            "cpu": "500m",
            "memory": str(1 << 30),
        }
    )
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] > 0
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_no_cluster_configured_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SandboxStartError, match="no Kubernetes cluster configured") as info:
        load_configuration(str(tmp_path / "missing"))
    assert "\n" not in str(info.value)


@pytest.mark.docker
def test_a_pod_that_never_becomes_ready_is_a_start_error_naming_it(k8s_cluster, base_image):
    k8s_cluster.hold_pending = True
    try:
        limits = LIMITS.model_copy(update={"start_timeout_s": 1.5})
        with pytest.raises(SandboxStartError, match=r"pod deepswe-\w+ was not Ready .*Pending"):
            KubernetesSandbox(base_image, limits, workdir="/", kubeconfig=k8s_cluster.kubeconfig)
    finally:
        k8s_cluster.hold_pending = False
    assert not k8s_cluster.listing("deepswe", "deepswe.sandbox=1"), "the pod was left behind"


@pytest.mark.docker
def test_an_image_that_cannot_be_pulled_names_the_image(k8s_cluster):
    with pytest.raises(SandboxStartError, match="image 'deepswe-no-such:1' cannot be pulled"):
        KubernetesSandbox("deepswe-no-such:1", LIMITS, kubeconfig=k8s_cluster.kubeconfig)


@pytest.mark.docker
def test_pod_deleted_under_a_running_command_is_sandbox_died(k8s_cluster, base_image):
    sb = KubernetesSandbox(base_image, LIMITS, workdir="/", kubeconfig=k8s_cluster.kubeconfig)
    try:
        killer = threading.Timer(0.5, k8s_cluster.delete, args=("deepswe", sb.id))
        killer.start()
        started = time.monotonic()
        with pytest.raises(SandboxDied, match=f"pod {sb.id} closed"):
            sb.run("sleep 30", timeout=25)
        assert time.monotonic() - started < 15, "a dropped stream waited for the deadline"
    finally:
        sb.close()


@pytest.mark.docker
def test_gc_by_run_label_deletes_every_pod_of_the_run(k8s_cluster, base_image):
    kw = {"workdir": "/", "kubeconfig": k8s_cluster.kubeconfig}
    mine = [
        KubernetesSandbox(base_image, LIMITS, labels={"deepswe.run": "r1"}, **kw) for _ in range(2)
    ]
    other = KubernetesSandbox(base_image, LIMITS, labels={"deepswe.run": "r2"}, **kw)
    try:
        assert gc("deepswe.run=r1", kubeconfig=k8s_cluster.kubeconfig) == 2
        assert [p["metadata"]["name"] for p in k8s_cluster.listing("deepswe", "")] == [other.id]
        assert other.run("echo alive").stdout == "alive\n"
        with pytest.raises(SandboxDied):
            mine[0].run("true")
    finally:
        for sb in [*mine, other]:
            sb.close()
