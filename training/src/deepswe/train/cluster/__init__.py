"""Where a run's parts live: the placement plan (plan.py, pure), the Ray scheduler (ray_runtime.py:
the engine and the rollout workers as Ray actors) and the trainer ranks (ranks.py: a backend over
rank actors); Ray is imported only in those two, when a run uses it."""

from deepswe.train.cluster.plan import Placement, placement_plan

__all__ = ["Placement", "placement_plan"]
