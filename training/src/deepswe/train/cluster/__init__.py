"""Where a run's parts live: the placement plan (plan.py, pure), the Ray scheduler (ray_runtime.py:
the engine and the rollout workers as Ray actors) and the trainer ranks (ranks.py: a backend over
rank actors). Ray is imported only through `require_ray`, by those two, when a run uses it. The
trainer imports this package, never the reverse: what both need (building a plug-in, a rollout's
seed and policy) lives in deepswe.train.plugins and deepswe.train.sampling."""

from typing import Any

from deepswe.train.cluster.plan import Placement, placement_plan

__all__ = ["Placement", "placement_plan", "require_ray"]


def require_ray() -> Any:
    """The `ray` module, or RuntimeError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RuntimeError(
            "cluster.scheduler 'ray' needs Ray: pip install 'deepswe-train[cluster]'"
        ) from None
    return ray
