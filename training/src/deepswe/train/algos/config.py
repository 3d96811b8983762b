"""GRPOConfig: every knob of the GRPO++ update, defaulting to the DeepSWE recipe.

Sources: the DeepSWE blog post (Agentica / Together AI, 2025, section "GRPO++") and rLLM's recipe
scripts examples/swe/train_deepswe_8b.sh and train_deepswe_32b_eager.sh (agentica-project/rllm;
their verl overrides are quoted in the field descriptions). One knowing difference: those scripts
set loss_agg_mode=seq-mean-token-sum, i.e. no divisor; the blog's length normalization divides by
the max response length. The two differ by the constant factor 1/32768 only.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from deepswe.train.algos.filtering import DEFAULT_MASK_ENDINGS, check_mask_endings
from deepswe.train.algos.kl import KL_ESTIMATORS
from deepswe.train.algos.off_policy import OFF_POLICY_CORRECTIONS
from deepswe.train.algos.registry import ADVANTAGE_ESTIMATORS


class GRPOConfig(BaseModel):
    """Algorithm settings of one training run; unknown keys are rejected by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    adv_estimator: str = Field(
        "loo",
        description="advantage estimator: a registered name (loo, grpo) or 'module:function'. "
        "DeepSWE: leave-one-out (blog 'Leave One Out'; rLLM algorithm.adv_estimator=rloo)",
    )
    grpo_eps: float = Field(1e-6, gt=0, description="std epsilon of 'grpo' only (verl default)")
    eps_low: float = Field(
        0.2, ge=0, lt=1, description="lower clip: r >= 1 - eps_low (verl clip_ratio default 0.2)"
    )
    eps_high: float = Field(
        0.28,
        ge=0,
        description="upper clip: r <= 1 + eps_high; DAPO clip-higher (rLLM clip_ratio_high=0.28)",
    )
    loss_agg: Literal["seq-sum-constant", "token-mean", "seq-mean-token-mean"] = Field(
        "seq-sum-constant",
        description="loss aggregation; DeepSWE 'length normalization' = Dr. GRPO: token sums "
        "divided by a constant, mean over trajectories",
    )
    loss_constant: int = Field(
        32768,
        gt=0,
        description="divisor of seq-sum-constant, in tokens: the max response length "
        "(rLLM data.max_response_length=32768)",
    )
    kl_coef: float = Field(
        0.0,
        ge=0,
        description="KL-to-reference coefficient. DeepSWE removes the KL loss (blog; rLLM "
        "actor.use_kl_loss=False) and the trainer has no reference model: only 0 is accepted",
    )
    kl_estimator: str = Field(
        "low_var_kl",
        description="KL estimator for a KL term (rLLM kl_loss_type=low_var_kl); unused while "
        "kl_coef must be 0 (algos.kl_penalty implements them for plug-in losses)",
    )
    entropy_coef: float = Field(
        0.0,
        ge=0,
        description="entropy bonus. DeepSWE removes it (rLLM actor.entropy_coeff=0.0) and the "
        "trainer's loss has no entropy term: only 0 is accepted",
    )
    mask_endings: frozenset[str] = Field(
        DEFAULT_MASK_ENDINGS,
        description="episode endings masked by compact filtering (DeepSWE: max_context, "
        "max_steps, timeout); infra_error rows are always dropped",
    )
    drop_endings: frozenset[str] = Field(
        frozenset(),
        description="endings dropped from the batch like infra_error (not in the reference). "
        "Set to [agent_error] when agent_error means the inference endpoint failed",
    )
    keep_masked_in_baseline: bool = Field(
        True,
        description="masked rows still count in their group's baseline (rLLM computes "
        "advantages before removing compact-filtered episodes; its overlong_filter keeps "
        "masked rows in the batch with reward 0)",
    )

    off_policy: str = Field(
        "none",
        description="off-policy correction of the sampler/trainer gap (algos.off_policy): none "
        "(DeepSWE) | seq_is_mask (sequence-level truncated IS mask, MLPerf's SWE-agent GRPO "
        "reference) | 'module:function'",
    )
    is_low: float = Field(
        0.5,
        gt=0,
        le=1,
        description="seq_is_mask: rows with w = pi_old/pi_behav below it are masked",
    )
    is_high: float = Field(
        2.0, ge=1, description="seq_is_mask: rows with w above it are masked (ours, as is_low)"
    )
    is_level: Literal["geometric", "sequence"] = Field(
        "geometric",
        description="seq_is_mask: w as exp(mean token log-ratio) or exp(sum): the whole reply's",
    )

    @field_validator("adv_estimator", "off_policy")
    @classmethod
    def _registered(cls, v: str, info: Any) -> str:
        """A plug point's registered name, or a user's own 'module:function'."""
        known = (
            ADVANTAGE_ESTIMATORS if info.field_name == "adv_estimator" else OFF_POLICY_CORRECTIONS
        )
        if v not in known and ":" not in v:
            raise ValueError(f"unknown {v!r}; known: {sorted(known)} or 'module:function'")
        return v

    @field_validator("kl_estimator")
    @classmethod
    def _known_kl(cls, v: str) -> str:
        if v not in KL_ESTIMATORS:
            raise ValueError(f"unknown {v!r}; known: {list(KL_ESTIMATORS)}")
        return v

    @field_validator("kl_coef", "entropy_coef")
    @classmethod
    def _not_implemented(cls, v: float, info: Any) -> float:
        # A knob that nothing reads must not look set: a run with kl_coef 0.1 would train
        # exactly as with 0 and say otherwise in its config.
        if v != 0:
            term = "a KL-to-reference" if info.field_name == "kl_coef" else "an entropy"
            raise ValueError(
                f"{v} > 0 asks for {term} term, which the trainer does not implement "
                "(DeepSWE's GRPO++ uses none); set it to 0"
            )
        return v

    @field_validator("mask_endings", mode="before")
    @classmethod
    def _maskable(cls, v: Any) -> frozenset[str]:
        if isinstance(v, str):
            raise ValueError("give a list of ending names, not one string")
        return check_mask_endings(v)

    @field_validator("drop_endings", mode="before")
    @classmethod
    def _droppable(cls, v: Any) -> frozenset[str]:
        if isinstance(v, str):
            raise ValueError("give a list of ending names, not one string")
        return check_mask_endings(v, "drop")

    @field_serializer("mask_endings", "drop_endings", when_used="json")
    def _sorted(self, v: frozenset[str]) -> list[str]:
        return sorted(v)  # a set has no order: a stable one on disk (runs/ID/config.yaml)

    @model_validator(mode="after")
    def _consistent(self) -> GRPOConfig:
        both = self.mask_endings & self.drop_endings
        if both:
            raise ValueError(f"endings both masked and dropped: {sorted(both)}")
        if self.eps_high < self.eps_low:
            # Not wrong in PPO terms, but the inverse of clip-higher: almost surely a typo.
            raise ValueError(f"eps_high ({self.eps_high}) < eps_low ({self.eps_low})")
        return self

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "GRPOConfig") -> GRPOConfig:
        """Validate `data`; errors name `where` and each offending key."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            lines = []
            for err in e.errors():
                key = ".".join(str(p) for p in err["loc"]) or "<root>"
                msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
                lines.append(f"{where}.{key}: {msg}")
            raise ValueError("invalid GRPO config:\n  " + "\n  ".join(lines)) from None
