"""The `megatron` training backend (megatron-core; CPU over gloo so far): see backend.py.

mapping.py: HF Qwen3 <-> megatron GPTModel weights; model.py: the GPTModel from a Qwen3Config;
shim.py: what megatron-core needs to run on CPU; logprobs.py: log-probs from vocab-sharded logits;
selfcheck.py: `python -m deepswe.train.backends.megatron.selfcheck MODEL --tp 2` compares TP ranks with hf.
megatron-core is imported only inside functions, when this backend is chosen.
"""

from deepswe.train.backends.megatron.backend import MegatronBackend

__all__ = ["MegatronBackend"]
