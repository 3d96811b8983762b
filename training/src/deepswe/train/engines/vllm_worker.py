"""vLLM worker extension for the `vllm` engine: load a safetensors folder in place and check it.

Imported inside the vLLM server's worker processes (the server's own virtualenv, not the
trainer's), named by `--worker-extension-cls deepswe.train.engines.vllm_worker.WeightSync` and
called through the dev-mode `/collective_rpc` endpoint. It must therefore import nothing beyond
torch, safetensors and the standard library. vLLM mixes this class into its Worker, so `self` is
the worker: `self.reload_weights` and `self.get_model` are vLLM's own.
"""

from __future__ import annotations

from typing import Any

import torch


class WeightSync:
    """Methods callable by name through `collective_rpc` (names prefixed: vLLM refuses an
    extension attribute that shadows a Worker attribute)."""

    def deepswe_load_weights(self, weights_dir: str) -> dict[str, Any]:
        """Load `weights_dir/*.safetensors` (HF checkpoint names) into the running model, then
        compare every parameter that is still stored as in the checkpoint with the file.

        vLLM's in-place reload (`Worker.reload_weights`) is used rather than the model's bare
        `load_weights`: it reruns each layer's post-load processing, e.g. the CPU backend's
        repacking of linear weights into kernel layouts, which a plain copy would leave stale.
        Returns {"checked": n parameters found equal, "mismatched": [names]}; fused or repacked
        parameters (qkv_proj, gate_up_proj, packed linears) have no 1:1 file tensor and are
        not counted.
        """
        self.reload_weights(weights_path=weights_dir)  # type: ignore[attr-defined]
        return self.deepswe_check_weights(weights_dir)

    def deepswe_check_weights(self, weights_dir: str) -> dict[str, Any]:
        from pathlib import Path

        from safetensors import safe_open

        params = dict(self.get_model().named_parameters())  # type: ignore[attr-defined]
        checked, mismatched = 0, []
        for file in sorted(Path(weights_dir).glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 (safe_open has no __iter__)
                    p = params.get(name)
                    if p is None or p.numel() == 0:
                        continue
                    want = f.get_tensor(name)
                    if tuple(p.shape) != tuple(want.shape):  # sharded (TP > 1): not 1:1
                        continue
                    same = torch.equal(p.detach().cpu(), want.to(p.dtype))
                    checked += 1
                    if not same:
                        mismatched.append(name)
        return {"checked": checked, "mismatched": mismatched}
