"""The OpenEnv server's container image, built from our registry-free base (`deepswe-eval
serve-image`): nothing pulled from a registry, as every image of ours.

FROM the Debian base image (`deepswe.env.images.base`, debootstrapped here), a venv at
/opt/deepswe holding deepswe-data, deepswe-env and deepswe-eval with the `openenv` extra,
installed offline (`--no-index`, the build has no network) from wheels the host's pip made:
ours built from this checkout, the rest downloaded for the image's own Python. The container
runs the manifest's app (`uvicorn deepswe.eval.openenv.app:app`, port 8000), its profile at
/config/profile.yaml ($DEEPSWE_OPENENV_CONFIG). Its sandboxes are siblings on the host's
engine: run it with the engine's socket, the task files at the paths the profile names, and
`--pid host --hostname "$(hostname)"`, so its sandboxes carry the host's own owner labels and
`deepswe-env gc` and the next start reap what a killed container leaves (evaluation/README.md,
"An OpenEnv environment").
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from deepswe.env.images.base import ensure_base_image

REPOSITORY = "deepswe/openenv-server"
# The checkout's folders and the extras the server needs of them (by distribution name).
PROJECTS = (("data", ""), ("environments", "[swebench]"), ("evaluation", "[openenv]"))
WHEEL_EXTRAS = (("data", ""), ("env", "[swebench]"), ("eval", "[openenv]"))
PORT = 8000
CONFIG = "/config/profile.yaml"
DOCKERFILE = """\
FROM {base}
COPY wheels /wheels
RUN python3 -m venv /opt/deepswe \\
 && /opt/deepswe/bin/pip install --no-index --find-links /wheels --no-cache-dir \\
    'deepswe-eval[openenv]' \\
 && rm -rf /wheels
ENV PATH=/opt/deepswe/bin:$PATH DEEPSWE_OPENENV_CONFIG={config}
LABEL deepswe.kind=openenv-server
EXPOSE {port}
CMD ["uvicorn", "deepswe.eval.openenv.app:app", "--host", "0.0.0.0", "--port", "{port}"]
"""


class ServerImageError(RuntimeError):
    """The server's image could not be built; the message says which step and why."""


def build_server_image(
    checkout: Path, suite: str = "bookworm", log: Callable[[str], None] = print
) -> str:
    """Build the server's image from the checkout at `checkout`; returns its tag
    (deepswe/openenv-server:<hash of base and wheels>, also tagged :latest)."""
    base = ensure_base_image(suite, log=log)
    with tempfile.TemporaryDirectory(prefix="openenv-image-") as tmp:
        ctx = Path(tmp)
        _wheels(checkout, ctx / "wheels", _image_python(base), log)
        dockerfile = DOCKERFILE.format(base=base, config=CONFIG, port=PORT)
        (ctx / "Dockerfile").write_text(dockerfile)
        tag = f"{REPOSITORY}:{_digest(dockerfile, ctx / 'wheels')}"
        if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
            log(f"[openenv image] {tag} exists: the same base and wheels")
            return tag
        log(f"[openenv image] docker build {tag} (offline: --network none)")
        _run(
            ["docker", "build", "--network", "none", "-t", tag, "-t", f"{REPOSITORY}:latest", "."],
            ctx,
        )
    log(f"[openenv image] built {tag}")
    return tag


def _wheels(checkout: Path, out: Path, python: str, log: Callable[[str], None]) -> None:
    """Wheels of our three distributions (built here), then every wheel they need for the
    image's Python `python` (X.Y.Z: a dependency's Requires-Python may exclude the image's
    patch release, so pip resolves for it, not for the host's)."""
    for folder, _ in PROJECTS:
        if not (checkout / folder / "pyproject.toml").is_file():
            raise ServerImageError(f"{checkout / folder} is not a project folder of a checkout")
    ours = [str(checkout / folder) for folder, _ in PROJECTS]
    log(f"[openenv image] pip wheel {' '.join(ours)}; their dependencies for Python {python}")
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "-q", "--no-deps", "--wheel-dir", str(out), *ours], None)
    names = {w.name.split("-")[0].replace("_", "-"): w for w in out.glob("*.whl")}
    wanted = [f"{names[f'deepswe-{n}']}{extra}" for n, extra in WHEEL_EXTRAS]
    download = [*pip, "download", "-q", "--dest", str(out), "--find-links", str(out)]
    download += ["--only-binary=:all:", "--python-version", python, *wanted]
    _run(download, None)


def _image_python(image: str) -> str:
    """The full version (X.Y.Z) of the image's python3."""
    cmd = ["docker", "run", "--rm", "--network", "none", image, "python3", "-c"]
    cmd.append("import platform; print(platform.python_version())")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ServerImageError(f"{image}: python3 did not run: {done.stderr[-500:]}")
    return done.stdout.strip()


def _digest(dockerfile: str, wheels: Path) -> str:
    h = hashlib.sha256(dockerfile.encode())
    for w in sorted(wheels.iterdir()):
        h.update(w.name.encode())
        h.update(hashlib.sha256(w.read_bytes()).digest())
    return h.hexdigest()[:12]


def _run(cmd: list[str], cwd: Path | None) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout[-2500:] + "\n" + done.stderr[-1500:]).strip()
        raise ServerImageError(f"{' '.join(cmd[:3])} ... exited {done.returncode}:\n{tail}")


__all__ = ["CONFIG", "PORT", "REPOSITORY", "ServerImageError", "build_server_image"]
