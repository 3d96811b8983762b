"""Publishing a run to the Hugging Face Hub: stage folders and a plan, then push on request.

    deepswe-train publish runs/train-tiny --eval runs/eval-tiny/model --repo me/tiny-swe [--push]

`stage.py` builds the folders and the plan (every file with size, sha256 and LFS or not),
`checks.py` decides whether an evaluation's number is the model's, `cards.py` writes the model
and dataset cards, `push.py` surveys the Hub (what a push deletes) and sends a plan with
`huggingface_hub`.
"""

from deepswe.train.publish.push import PublishError, push_plan, survey_plan
from deepswe.train.publish.stage import Plan, PlannedFile, RepoPlan, build_plan

__all__ = [
    "Plan",
    "PlannedFile",
    "PublishError",
    "RepoPlan",
    "build_plan",
    "push_plan",
    "survey_plan",
]
