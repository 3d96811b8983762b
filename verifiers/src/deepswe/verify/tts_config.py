"""The `tts:` section of a profile: how `deepswe-reproduce tts` builds, judges and selects candidates.

    deepswe-reproduce tts --config configs/tiny.yaml --out runs/tts-tiny [tts.a.b=v eval.a.b=v ...]

Read beside the profile's `eval:` section (the policy, episode and sandbox limits every candidate
episode runs under). Overrides `tts.*` edit this section, `eval.*` the eval section; errors name
the file and the dotted key, as deepswe.eval.config does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from deepswe.data.profile import apply_overrides, read_profile, validate_section
from deepswe.eval.config import EvalConfig, validate_eval_config

# model: the eval policy's own episodes; the rest are made from the gold patch (tts/kinds.py)
KINDS = (
    "model",
    "right",
    "partial",
    "misedit",
    "wrong_place",
    "regression",
    "comment",
    "empty",
    "hard",
    "survivor",
)  # hard: a hard negative of a kind taken in turn (tts/plan.py); survivor: from tts.strength


class TaskPick(BaseModel):
    """A stated subset of a split: explicit ids, else the first `per_repo` tasks (by id) of each
    repository (of `repos` only, when given)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str = Field(description="dataset name, e.g. swe-mini:test")
    ids: list[str] = Field(default_factory=list, description="these tasks; empty: per_repo")
    per_repo: int | None = Field(
        2, ge=1, description="tasks per repository, first by instance id; null: every task"
    )
    repos: list[str] = Field(
        default_factory=list, description="only these repositories (e.g. pypi/addict); empty: all"
    )


class Mixture(BaseModel):
    """Candidates per task by kind (tts/kinds.py says how each is made). model: episodes of the
    eval section's policy; the others are patches made from the gold patch and the base code,
    graded as submitted patches. A kind a task cannot offer is replaced by another hard kind
    (tts/plan.py), named so in mixture.json. Every candidate is graded by the real grader."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: int = Field(0, ge=0, description="episodes of the eval policy per task")
    right: int = Field(0, ge=0, description="the gold patch (identical copies, graded once)")
    partial: int = Field(0, ge=0, description="a proper part of the gold's changes")
    misedit: int = Field(
        0, ge=0, description="the fix, then a swe-mini mutation on a line the gold changes"
    )
    wrong_place: int = Field(
        0, ge=0, description="a mutation away from the gold's lines, the bug left"
    )
    regression: int = Field(
        0, ge=0, description="the gold patch plus another task's bug our passing tests catch"
    )
    comment: int = Field(0, ge=0, description="a comment beside the buggy line, the bug kept")
    empty: int = Field(0, ge=0, description="no change")
    hard: int = Field(
        0,
        ge=0,
        description="hard negatives of misedit/regression/wrong_place/partial, the kind "
        "taken in turn from a seeded place per task (the judge's data needs one NO a task)",
    )

    survivor: int = Field(
        0,
        ge=0,
        description="a proven-wrong survivor of the task's test strength run (a wrong fix the "
        "graded tests pass: tts.strength's health manifest); a task with none gets hard kinds",
    )

    @model_validator(mode="after")
    def _some(self) -> Mixture:
        if not any(self.counts().values()):
            raise ValueError("a mixture needs at least one candidate per task")
        return self

    def counts(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in KINDS}


class JudgeStage(BaseModel):
    """The execution-free judge: trained here (deepswe-train judge, subprocess) and run in
    process, or served (endpoint) and only asked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: str = Field("configs/judge-tiny.yaml", description="deepswe-train judge's config")
    base_models: list[str] = Field(
        default_factory=lambda: ["runs/models/tiny-qwen3-sft", "runs/models/tiny-qwen3"],
        description="the judge's base model: the first of these folders that exists",
    )
    overrides: list[str] = Field(
        default_factory=list, description="passed on to deepswe-train judge, e.g. epochs=1"
    )
    format: Literal["ours", "r2e-gym"] = Field(
        "ours",
        description="the judge's prompt: ours (deepswe.verify.ef.render; the judges trained "
        "here learn it) or r2e-gym (R2E-Gym's verifier input, ef.r2e_input: what DeepSWE's "
        "published verifier was trained on; only for a served judge, tts.judge.base_url)",
    )
    max_prompt_tokens: int = Field(
        8192,
        gt=0,
        description="condense judge prompts above this: ours, the chat's tokens; r2e-gym, "
        "R2E-Gym's max_tokens (its user text is condensed above max_tokens - 500 - the system "
        "prompt's and answer's tokens)",
    )
    base_url: str | None = Field(
        None, description="a served judge (vLLM, the LoRA as a module): skip training, ask it"
    )
    model: str | None = Field(None, description="the judge's name at base_url")
    tokenizer: str | None = Field(None, description="the judge's tokenizer (local or cached)")


class EBStage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    writer: Literal["scripted-standin", "agent"] = Field(
        "scripted-standin",
        description="reproduction tests: the issue's snippet as a test (a stand-in, tiny) or an "
        "agent episode of the eval policy with the test-writing prompt",
    )
    tests_per_task: int = Field(1, ge=1, description="reproduction tests written per task")
    workers: int = Field(2, ge=1, description="sandboxes at once")


class TTSConfig(BaseModel):
    """`deepswe-reproduce tts`: candidates, judge, EB verdicts, selection, report."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test: TaskPick = Field(
        default_factory=lambda: TaskPick(dataset="swe-mini:test"),
        description="tasks whose candidates are selected among",
    )
    train: TaskPick = Field(
        default_factory=lambda: TaskPick(dataset="swe-mini:train", per_repo=1),
        description="tasks whose episodes train the judge (train split only)",
    )
    test_mixture: Mixture = Field(
        default_factory=lambda: Mixture(model=4, right=2, misedit=2, wrong_place=1, regression=1)
    )
    train_mixture: Mixture = Field(default_factory=lambda: Mixture(right=1, hard=1))
    require_model: bool = Field(
        False,
        description="refuse when the eval policy's model folder is absent (false: run with "
        "the scripted kinds only and say so in the report)",
    )
    workers: int = Field(2, ge=1, description="candidate episodes at once")
    seed: int = Field(0, description="the per-task order of the merged pools, the AUC bootstrap")
    auc_bootstrap: int = Field(2000, ge=0, description="task-level bootstrap resamples of AUC")
    judge: JudgeStage = Field(default_factory=JudgeStage)
    eb: EBStage = Field(default_factory=EBStage)
    strength: str | None = Field(
        None,
        description="a health manifest with test strength (deepswe-eval health --mutants K; "
        "its folder or health.json): the proven-wrong survivors the mixtures' `survivor` asks for",
    )

    @model_validator(mode="after")
    def _survivors_need_strength(self) -> TTSConfig:
        asked = self.test_mixture.survivor or self.train_mixture.survivor
        if asked and self.strength is None:
            raise ValueError(
                "strength: a mixture asks for survivor candidates; name the health manifest "
                "that holds them (deepswe-eval health --mutants K writes one)"
            )
        return self


def load_tts_config(profile: str | Path, overrides: list[str] = ()) -> tuple[TTSConfig, EvalConfig]:  # type: ignore[assignment]
    """(tts section, eval section) of `profile` with `tts.*` / `eval.*` overrides applied."""
    doc = read_profile(profile)
    sections = {name: dict(doc.get(name) or {}) for name in ("tts", "eval")}
    apply_overrides(sections, overrides, list(sections))
    tts = validate_section(TTSConfig, sections["tts"], str(profile), "tts")
    return tts, validate_eval_config(sections["eval"], str(profile))
