"""The cluster around the Kubernetes backend: where it is, which pods are ours, `gc`.

Configuration comes from the usual places: KUBECONFIG (or ~/.kube/config), else the in-cluster
service account; neither is a one-line SandboxStartError, raised before any episode by
`preflight()`. Every sandbox pod carries labels naming the backend, the host and the creating
process, so one call deletes a run's pods, a host's, or those a killed process left behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from deepswe.env.sandbox import SandboxStartError
from deepswe.env.sandbox.owner import LABEL, owner_alive

log = logging.getLogger(__name__)


def load_configuration(
    kubeconfig: str | None = None, context: str | None = None
) -> tuple[k8s.Configuration, str]:
    """Client configuration and namespace from KUBECONFIG / ~/.kube/config, else in-cluster."""
    cfg = k8s.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    path = path.split(os.pathsep)[0]
    if os.path.exists(path):
        k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        _, active = k8s_config.list_kube_config_contexts(config_file=path)
        if context:
            contexts, _ = k8s_config.list_kube_config_contexts(config_file=path)
            active = next(c for c in contexts if c["name"] == context)
        namespace = (active or {}).get("context", {}).get("namespace") or "default"
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=cfg)
        ns_file = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        namespace = ns_file.read_text().strip() if ns_file.exists() else "default"
    else:
        raise SandboxStartError(
            f"no Kubernetes cluster configured: no kubeconfig at {path} and not in a cluster "
            "(set KUBECONFIG)"
        )
    return cfg, os.environ.get("DEEPSWE_K8S_NAMESPACE") or namespace


def api_message(exc: ApiException) -> str:
    """An API error in words: its status and the `Status` object's message when there is one."""
    try:
        message = json.loads(exc.body or "{}").get("message") or ""
    except (ValueError, AttributeError):
        message = ""
    return f"{exc.status} {exc.reason}" + (f": {message}" if message else "")


def context_setting() -> str | None:
    return os.environ.get("DEEPSWE_K8S_CONTEXT") or None


def gc(
    selector: str | None = None,
    *,
    orphans_only: bool = False,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> list[str]:
    """Delete the sandbox pods matching `selector` (e.g. `deepswe.run=abc`); their names.

    Without a selector, this host's sandbox pods; `orphans_only` keeps those whose creating
    process is still alive. One delete-collection call unless orphans are picked one by one.
    """
    cfg, namespace = load_configuration(kubeconfig, context or context_setting())
    host = socket.gethostname()[:63]
    label = f"{LABEL}=1," + (selector or f"deepswe.host={host}")
    with k8s.ApiClient(cfg) as api:
        core = k8s.CoreV1Api(api)
        pods = core.list_namespaced_pod(namespace, label_selector=label).items
        if orphans_only:
            pods = [p for p in pods if not owner_alive(p.metadata.labels or {})]
            for p in pods:
                with contextlib.suppress(ApiException):
                    core.delete_namespaced_pod(p.metadata.name, namespace, grace_period_seconds=0)
        elif pods:
            core.delete_collection_namespaced_pod(
                namespace, label_selector=label, grace_period_seconds=0
            )
    return [p.metadata.name for p in pods]


_swept: set[tuple[str | None, str | None]] = set()
_swept_lock = threading.Lock()


def sweep_once(kubeconfig: str | None = None, context: str | None = None) -> None:
    """Once per process and cluster, in the background: delete this host's pods whose creating
    process is gone (a killed run's). A sweep is a courtesy; `gc` is the tool that reports
    failures."""
    key = (kubeconfig, context)
    with _swept_lock:
        if key in _swept:
            return
        _swept.add(key)

    def sweep() -> None:
        try:
            gone = gc(orphans_only=True, kubeconfig=kubeconfig, context=context)
        except Exception as exc:
            log.warning("pod sweep failed: %s", exc)
            return
        if gone:
            log.info("swept %d leftover sandbox pod(s)", len(gone))

    threading.Thread(target=sweep, name="pod-sweep", daemon=True).start()


def preflight() -> None:
    """Fail fast, in one line, when no cluster is configured or its API server is silent."""
    cfg, namespace = load_configuration(None, context_setting())
    with k8s.ApiClient(cfg) as api:
        try:
            k8s.CoreV1Api(api).list_namespaced_pod(namespace, limit=1, _request_timeout=15)
        except ApiException as exc:
            raise SandboxStartError(
                f"Kubernetes API server {cfg.host}: cannot list pods in namespace {namespace}: "
                f"{api_message(exc)}"
            ) from None
        except HTTPError as exc:
            raise SandboxStartError(
                f"Kubernetes API server {cfg.host} does not answer: {exc}"
            ) from None
