"""The `sft:` section of a training profile: the settings of the SFT warm-start (sft.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SFTConfig(BaseModel):
    """The SFT stage's settings: the `sft:` section of a training profile. Defaults are the tiny
    profile's (training/README.md, "The tiny model learns"); deepswe-32b skips the stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wrong_per_task: int = Field(
        2,
        ge=0,
        description="wrong scripted fixes per right one: the start policy picks the "
        "right fix about 1 time in 1 + this (ours: 1:2 leaves GRPO++ room to improve)",
    )
    epochs: int = Field(
        300,
        ge=1,
        description="passes over the scripted sequences. One toy task: 300 epochs = "
        "900 steps, ~4 min, loss 0.0128 nats a token, the floor the 1:2 right:wrong choice sets "
        "(ln 3 at one token of ~80); after 100 (0.02) one reply in three was malformed at T = 1 "
        "and GRPO++ gained half as much",
    )
    lr: float = Field(
        3e-3,
        gt=0,
        description="AdamW peak learning rate; a randomly initialised tiny model "
        "needs a large step (ours, measured with bench/learning.py)",
    )
    final_lr: float = Field(
        0.1,
        ge=0,
        le=1,
        description="linear decay to lr x this at the last step: the last epochs sharpen the fit",
    )
    weight_decay: float = Field(
        0.0,
        ge=0,
        description="AdamW weight decay; none: the stage means to fit its scripted "
        "data, not to generalise beyond it",
    )
    grad_clip: float = Field(1.0, gt=0, description="max global grad norm (as GRPO++: verl 1.0)")
    seed: int = Field(0, description="seeds the shuffling order and the torch RNG")
    threads: int = Field(2, ge=1, description="torch CPU threads (a shared 2-core box)")


__all__ = ["SFTConfig"]
