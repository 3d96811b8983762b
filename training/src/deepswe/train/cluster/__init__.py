"""Where a run's parts live: the placement plan (plan.py, pure) and the Ray scheduler
(ray_runtime.py: the engine and the rollout workers as Ray actors; Ray imported only there)."""

from deepswe.train.cluster.plan import Placement, placement_plan

__all__ = ["Placement", "placement_plan"]
