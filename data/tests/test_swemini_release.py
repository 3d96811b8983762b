"""The released swe-mini dataset (data/swe-mini/tasks.jsonl) against what the tiny profile needs:
enough tasks over enough projects, a by-project split, no leak of the tests or the fix into the
problem statements, and rows that build on any machine (sources relative to the cache)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from deepswe.data.loaders import load_jsonl
from deepswe.data.swemini.load import load_swe_mini
from deepswe.data.swemini.manifest import TASKS, load_manifest


@pytest.fixture(scope="module")
def tasks():
    return load_jsonl(TASKS)


@pytest.fixture(scope="module")
def manifest():
    return load_manifest()


def test_at_least_300_tasks_over_at_least_10_projects(tasks, manifest):
    per_project = Counter(t.repo for t in tasks)
    assert len(tasks) >= 300
    assert len(per_project) >= 10
    assert set(per_project) <= {f"pypi/{p.name}" for p in manifest.projects}
    assert len({t.instance_id for t in tasks}) == len(tasks)
    assert [t.instance_id for t in tasks] == sorted(t.instance_id for t in tasks)


def test_split_is_by_project(tasks, manifest):
    splits: dict[str, set[str]] = {}
    for t in tasks:
        splits.setdefault(t.repo, set()).add(t.metadata["split"])
    assert all(len(s) == 1 for s in splits.values()), splits
    wanted = {f"pypi/{p.name}": p.split for p in manifest.projects}
    assert {repo: s.pop() for repo, s in splits.items()} == {r: wanted[r] for r in splits}
    assert {t.metadata["split"] for t in tasks} == {"train", "test"}


def test_rows_build_anywhere_and_run_only_their_own_test_files(tasks, manifest):
    by_name = {p.name: p for p in manifest.projects}
    for t in tasks:
        project = by_name[t.repo.split("/")[1]]
        env = t.environment
        assert env.source == project.repo_rel and not Path(env.source).is_absolute()
        assert env.pip == [manifest.pytest] and env.base == "bookworm"
        assert re.fullmatch(r"[0-9a-f]{40}", t.base_commit)
        files = set(t.test_spec.command.split()[7:])
        assert t.test_spec.command.startswith(
            "python -m pytest -rA -p no:cacheprovider -o addopts="
        )
        assert t.hidden.fail_to_pass and not set(t.hidden.fail_to_pass) & set(t.hidden.pass_to_pass)
        assert {n.split("::")[0] for n in t.hidden.fail_to_pass + t.hidden.pass_to_pass} <= files
        assert not t.hidden.test_patch


def test_gold_patch_touches_only_the_mutated_source_file(tasks):
    for t in tasks:
        touched = re.findall(r"^diff --git a/(\S+) b/", t.gold_patch, flags=re.M)
        assert touched == [t.metadata["file"]], t.instance_id
        assert "/test" not in f"/{touched[0]}" and not Path(touched[0]).name.startswith("test_")


def test_problem_statements_never_name_the_tests(tasks):
    for t in tasks:
        text = t.problem_statement
        for nodeid in t.hidden.fail_to_pass:
            path, _, rest = nodeid.partition("::")
            func = rest.split("::")[-1].split("[")[0]
            assert func not in text, (t.instance_id, func)
            assert Path(path).name not in text and Path(path).stem not in text, t.instance_id
        assert "swe-mini" not in text and len(text) > 80


def test_load_swe_mini_resolves_sources_against_the_cache(tmp_path):
    tasks = load_swe_mini(split="test", cache=tmp_path)
    assert tasks and {t.metadata["split"] for t in tasks} == {"test"}
    for t in tasks:
        assert t.environment.source == str(tmp_path / "repos" / t.metadata["project"])


def test_every_project_pins_its_sdist_and_its_clean_commit(manifest):
    assert len(manifest.projects) >= 10
    assert len({p.name for p in manifest.projects}) == len(manifest.projects)
    for p in manifest.projects:
        assert re.fullmatch(r"[0-9a-f]{64}", p.sha256) and re.fullmatch(r"[0-9a-f]{40}", p.commit)


def test_dataset_names_give_each_split_with_sources_on_this_machine():
    """`swe-mini:train` / `swe-mini:test` are what make train and make eval ask load_tasks for."""
    from deepswe.data.datasets import load_tasks

    train, test = load_tasks("swe-mini:train"), load_tasks("swe-mini:test")
    assert len(train) + len(test) == len(load_tasks("swe-mini"))
    assert {t.metadata["split"] for t in train} == {"train"}
    assert {t.metadata["project"] for t in train}.isdisjoint({t.metadata["project"] for t in test})
    assert all(Path(t.environment.source).is_absolute() for t in train + test)
