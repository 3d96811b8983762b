"""The Makefile passes a profile and overrides, never protocol values of its own: the commands
`make` would run are read with `make -n` and run with `--dry-run`, which prints the resolved
evaluation config."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).with_name("deepswe-eval"))

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _commands(*make_args: str, program: str = "deepswe-eval") -> list[list[str]]:
    """The `program` commands `make -n ...` would run, as argv lists."""
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", *make_args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.replace("\\\n", " ")
    return [shlex.split(line) for line in out.splitlines() if f"/{program} " in line]


def _resolved(argv: list[str], cli: str = CLI) -> dict:
    """What `argv` would run with, printed by its verb's --dry-run."""
    done = subprocess.run(
        [cli, *argv[1:], "--dry-run"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_make_eval_deepswe_32b_reads_its_protocol_from_the_profile():
    (cmd,) = _commands("eval", "PROFILE=deepswe-32b", "BASE_URL=http://gpu-node:8000/v1")
    assert "--config" in cmd and cmd[cmd.index("--config") + 1] == "configs/deepswe-32b.yaml"
    assert not {"--runs", "--max-steps", "--max-context", "--temperature"} & set(cmd)
    cfg = _resolved(cmd)
    assert (cfg["dataset"], cfg["runs"]) == ("swe-bench-verified", 16)
    assert (cfg["episode"]["max_steps"], cfg["episode"]["max_context_tokens"]) == (100, 65536)
    assert cfg["policy"] == {
        **cfg["policy"],
        "name": "openai",
        "model": "agentica-org/DeepSWE-Preview",
        "base_url": "http://gpu-node:8000/v1",
        "temperature": 1.0,
    }
    assert cfg["episode"]["prompt_variant"] == "eval"


def test_make_eval_tiny_runs_the_baselines_and_the_model_from_the_profile():
    validate, run = _commands("eval", "PROFILE=tiny", "EVAL_OVERRIDES=eval.runs=2")
    assert validate[1] == "validate" and run[1] == "run"
    cfg = _resolved(run)
    assert (cfg["dataset"], cfg["runs"], cfg["episode"]["max_steps"]) == (
        "runs/data/swe-toy/test.jsonl",
        2,
        4,
    )
    assert cfg["policy"]["args"] == {"path": "runs/train-tiny/final"}


# --- make eval-tts (deepswe-reproduce tts) ---------------------------------------------------------
REPRODUCE = str(Path(sys.executable).with_name("deepswe-reproduce"))


def _tts_commands(*make_args: str) -> list[list[str]]:
    return [c for c in _commands(*make_args, program="deepswe-reproduce") if c[1] == "tts"]


def _tts_resolved(argv: list[str]) -> dict:
    return _resolved(argv, REPRODUCE)


def test_make_eval_tts_tiny_runs_the_verb_on_the_profiles_tts_section():
    (cmd,) = _tts_commands("eval-tts", "PROFILE=tiny", "TTS_OVERRIDES=tts.workers=1")
    assert cmd[1] == "tts" and cmd[cmd.index("--config") + 1] == "configs/tiny.yaml"
    assert cmd[cmd.index("--out") + 1] == "runs/tts-tiny"
    cfg = _tts_resolved(cmd)
    assert (cfg["tts"]["test"]["dataset"], cfg["tts"]["workers"]) == ("swe-mini:test", 1)
    assert cfg["tts"]["eb"]["writer"] == "scripted-standin"
    assert cfg["eval"]["policy"]["args"] == {"path": "runs/train-tiny/final"}


@pytest.mark.parametrize("given", [[], ["BASE_URL=http://gpu-node:8000/v1"]])
def test_make_eval_tts_deepswe_32b_without_endpoints_says_what_to_set(given):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("BASE_URL", "JUDGE_URL")}
    done = subprocess.run(
        ["make", "--no-print-directory", "eval-tts", "PROFILE=deepswe-32b", *given],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2
    assert "BASE_URL=http" in done.stderr and "JUDGE_URL=http" in done.stderr


def test_make_eval_tts_deepswe_32b_passes_both_endpoints_and_reads_the_rest_from_the_profile():
    (cmd,) = _tts_commands(
        "eval-tts",
        "PROFILE=deepswe-32b",
        "BASE_URL=http://gpu:8000/v1",
        "JUDGE_URL=http://judge:8001/v1",
    )
    cfg = _tts_resolved(cmd)
    assert cfg["eval"]["policy"]["base_url"] == "http://gpu:8000/v1"
    assert cfg["tts"]["judge"]["base_url"] == "http://judge:8001/v1"
    assert (cfg["tts"]["test"]["dataset"], cfg["tts"]["test_mixture"]["model"]) == (
        "swe-bench-verified",
        16,
    )


def test_make_publish_passes_run_eval_and_repo_to_the_verb_and_pushes_only_with_push():
    def argv(*extra: str) -> list[str]:
        out = subprocess.run(
            ["make", "-n", "--no-print-directory", "publish", *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return next(shlex.split(x) for x in out.splitlines() if "/deepswe-train publish" in x)

    plan = argv("RUN=runs/train-tiny", "EVAL=runs/eval-tiny/model", "REPO=me/tiny")
    assert plan[1:] == [
        "publish",
        "runs/train-tiny",
        "--eval",
        "runs/eval-tiny/model",
        "--repo",
        "me/tiny",
    ]
    assert argv("RUN=runs/train-tiny", "REPO=me/tiny", "PUSH=1")[-1] == "--push"


# --- make reproduce (deepswe-reproduce run) ----------------------------------------------------
def _reproduce_lines(*make_args: str) -> list[list[str]]:
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "reproduce", *make_args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.replace("\\\n", " ")
    return [shlex.split(line) for line in out.splitlines() if "/deepswe-reproduce " in line]


def test_make_reproduce_times_setup_then_runs_the_pipeline_on_the_profile():
    """`make -n reproduce` only prints: the pipeline's command is not on the line that runs
    $(MAKE) (make runs such lines even under -n)."""
    (cmd,) = _reproduce_lines()
    assert cmd[1:4] == ["run", "--config", "configs/tiny.yaml"] and "--fresh" not in cmd
    assert "--setup-seconds" in cmd
    (fresh,) = _reproduce_lines("FRESH=1", "PROFILE=deepswe-32b")
    assert "--fresh" in fresh and fresh[fresh.index("--config") + 1] == "configs/deepswe-32b.yaml"


@pytest.mark.parametrize("profile", ["tiny", "deepswe-32b"])
def test_make_health_measures_the_training_tasks_where_training_reads_the_manifest(profile):
    """Training reads health.json beside data.path (deepswe.train.sources.task_list.health_manifest):
    `make health` measures that file's tasks and writes its manifest there."""
    import yaml

    (cmd,) = [c for c in _commands("health", f"PROFILE={profile}") if c[1] == "health"]
    path = yaml.safe_load((ROOT / "configs" / f"{profile}.yaml").read_text())["data"]["path"]
    assert cmd[cmd.index("--dataset") + 1] == path
    assert Path(cmd[cmd.index("--out") + 1]) == Path(path).parent
    assert cmd[cmd.index("--config") + 1] == f"configs/{profile}.yaml"
