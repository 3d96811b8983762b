"""Which images a run over R2E-Gym rows will use, said before it starts.

Each row gets R2E-Gym's own image when this engine has it (`namanjain12/<repo>_final:<commit>`,
loaded by hand: nothing here can pull it), else its environment built from source from the
repository mirror (`deepswe.env.recipes.r2e_gym.environment`); a row neither serves is missing (no image and no
mirror, no clone, the commit not in the clone) or unsupported (a Python the host lacks, a
submodule a clone cannot hold). `deepswe-eval images` prints the plan and exits 2 while any row
is missing; training's spine source plans its tasks the same way and stops on a missing row.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import Task, TaskSource


@dataclass
class ImagePlan:
    tasks: list[Task]  # prepared: image as named, or an EnvironmentSpec to build
    on_engine: int = 0
    from_source: int = 0
    other: int = 0  # tasks that are not R2E-Gym rows (their own image or spec)
    unsupported: dict[str, str] = field(default_factory=dict)  # instance id -> why
    missing: dict[str, str] = field(default_factory=dict)  # instance id -> what to do

    @property
    def usable(self) -> list[Task]:
        """The tasks an image serves (unsupported and missing rows left out)."""
        out = set(self.unsupported) | set(self.missing)
        return [t for t in self.tasks if t.instance_id not in out]

    def lines(self, mirror: Path | None) -> list[str]:
        n = self.on_engine + self.from_source + len(self.unsupported) + len(self.missing)
        out = [
            f"images for {n} R2E-Gym rows: {self.on_engine} R2E-Gym's own on this engine, "
            f"{self.from_source} built from source"
            + (f" from {mirror}" if mirror else "")
            + f", {len(self.unsupported)} unsupported here, {len(self.missing)} missing"
        ]
        for label, found in (("unsupported", self.unsupported), ("missing", self.missing)):
            for why, count in _reasons(found).most_common(5):
                out.append(f"  {label} ({count}): {why}")
        return out


_ROW_SPECIFIC = re.compile(r"\S+/\S+_final:[0-9a-f]+|\b[0-9a-f]{40}\b")


def _reasons(found: dict[str, str]) -> Counter:
    """Reasons to count: each without its row's id, image name and commit."""
    return Counter(
        _ROW_SPECIFIC.sub("<row's>", why.split(": ", 1)[-1])[:240] for why in found.values()
    )


def plan_images(
    tasks: list[Task], *, mode: str, mirror: Path | None, image_exists=None
) -> ImagePlan:
    """Each task prepared for `mode` (auto | build | image, `EvalConfig.r2e_env`)."""
    from deepswe.env.recipes.r2e_gym.environment import (
        R2EEnvError,
        R2EUnsupported,
        needs_r2e_env,
        prepare,
    )

    if image_exists is None:
        from deepswe.env.images.task import image_exists
    plan = ImagePlan(tasks=[])
    for t in tasks:
        if t.source is not TaskSource.R2E_GYM or not needs_r2e_env(t):
            plan.other += 1
            plan.tasks.append(t)
            continue
        try:
            ready = prepare(t, mode=mode, mirror=mirror, image_exists=image_exists)
        except R2EUnsupported as exc:
            plan.unsupported[t.instance_id] = str(exc)
            ready = t
        except R2EEnvError as exc:
            plan.missing[t.instance_id] = str(exc)
            ready = t
        else:
            if ready.environment is not None:
                plan.from_source += 1
            elif ready.image and image_exists(ready.image):
                plan.on_engine += 1
            else:  # r2e_env: image, and the engine lacks it
                plan.missing[t.instance_id] = (
                    f"{t.instance_id}: R2E-Gym's image {t.image} is not on this Docker engine "
                    "(r2e_env: image); load it, or build from source (r2e_env: auto or build, "
                    "with a repository mirror)"
                )
        plan.tasks.append(ready)
    return plan


__all__ = ["ImagePlan", "plan_images"]
