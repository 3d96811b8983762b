"""The reward run: a patch graded in a fresh sandbox of the task's image.

A fresh sandbox, not the one the agent worked in: whatever the agent did to its environment
(`rm -rf /testbed`, a broken venv) cannot change the verdict, and the hidden tests meet exactly
base_commit + patch, as in SWE-bench's harness. The container only produces the test output; the
verdict is `grading.grade.judge(task, section, facts)`, a pure function of values: what the run
knew (the apply's result, the test infrastructure, the static gate, a timeout, a takeover) is
carried as `RunFacts`, never re-read from text. The log is for people.

    snapshot -> apply the patch -> find the test infrastructure it changed -> put back the
    graded files (and, under strict rules, that infrastructure) -> the task's test patch and
    hidden tests -> (strict rules) root's canaries into a graded file -> run the tests (under
    strict rules, pytest run by the grader's launcher, graded from its authenticated report) ->
    judge

Under strict rules (`TestSpec.grading_rules`) the grader owns the test process: no file the
patch wrote can stand in for pytest, configure it, extend it, or print the results read; a task
whose test command the grader cannot take over is refused (`strict_refusal`), never graded from
what the tests print.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from unidiff.errors import UnidiffParseError

from deepswe.data.task import Task
from deepswe.env.apply import Applied, apply_patch
from deepswe.env.grading import canaries, reproduction
from deepswe.env.grading.canaries import Canaries
from deepswe.env.grading.grade import gate_line, infra_change_line, judge
from deepswe.env.grading.markers import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    GRADER_RAN_TESTS,
    INFRA_ERROR,
    REPRODUCTION_RUN,
    START_TEST_OUTPUT,
    TEST_RUN_REJECTED,
    TEST_RUN_TAMPERED,
    TESTS_TIMEOUT,
)
from deepswe.env.grading.outcomes import GradeResult, Outcome, RunFacts, TestInfraChange
from deepswe.env.grading.owned import (
    LAUNCHER,
    SEAL,
    UNITTEST_LAUNCHER,
    OwnedCommand,
    own_pytest_command,
    strict_refusal,
)
from deepswe.env.grading.patch_check import read_patch
from deepswe.env.grading.report import judge_report, read_report
from deepswe.env.grading.static_gate import scan_patch
from deepswe.env.grading.tester import REPORT_FD, SETTINGS_FD, run_as_tester
from deepswe.env.grading.testinfra import scan_test_infra
from deepswe.env.hidden_tests import (
    TEST_PATCH_PATH,
    graded_ids,
    graded_paths,
    hidden_tests_script,
    restore_paths,
    write_restore_list,
)
from deepswe.env.images.grading_wheels import GRADING_WHEELS, put_grading_wheels
from deepswe.env.r2e_layout import (
    HIDDEN_TESTS_DIR,
    TESTS_LINK,
    hide_grading_material,
    misc_files,
    uses_r2e_layout,
)
from deepswe.env.sandbox import Sandbox, SandboxError
from deepswe.env.workspace import changed_paths, take_snapshot


@dataclass(frozen=True)
class RewardRun:
    """One reward run: the grade, the log it was read from, and the test process's output."""

    grade: GradeResult
    log: str
    """What `grade` read: harness lines and the test-output section."""
    output: str = ""
    """What the run's commands printed (the patch apply, the test process when the grader ran
    the tests), kept for people, never graded: the patch and the code under test can print
    anything there."""
    after_patch: bool = False
    """An infra_error that happened once the patch was applied: the patch may have caused it
    (`deepswe.env.episode.grade_patch` checks the clean tree before calling it infra)."""

    @property
    def text(self) -> str:
        """The log, then what the commands printed: what a person reads (test_output.txt)."""
        return f"{self.log}\n\n{self.output}" if self.output else self.log


def run_reward(task: Task, patch: str, sandbox: Sandbox, *, workdir: str = "/testbed") -> RewardRun:
    """Apply `patch`, add the hidden tests, run them; return the grade and its log.

    `sandbox` must be fresh (just started from the task's image); it is not closed here. The log
    graded holds only lines written here and the test section; what commands print is kept for
    people (`RewardRun.output`) and never read for a marker.
    """
    run = _Run(task, sandbox, workdir)
    refusal = strict_refusal(task.test_spec)
    if refusal:  # a property of the task, not of the patch: said before anything runs
        return run.infra(refusal)
    try:
        if uses_r2e_layout(task):
            hide_grading_material(sandbox, workdir)
        take_snapshot(sandbox, workdir)
        declared: list[str] = []
        if patch.strip():
            applied = apply_patch(sandbox, patch, workdir)
            if applied.output:
                run.people.append(("the patch apply's output", applied.output))
            if not applied.ok:
                run.log.append(APPLY_PATCH_FAIL + (f" ({applied.why})" if applied.why else ""))
                run.facts.update(applied=False, apply_why=applied.why)
                return run.done()
            run.log.append(APPLY_PATCH_PASS)
            run.applied, declared = True, applied.paths
            gate = scan_patch(patch, task.gold_patch or "", graded_paths(task))
            run.facts["static_gate"] = gate
            run.log += [gate_line(f) for f in gate]
        strict = task.test_spec.grading_rules == "strict"
        grader_dir = f"/tmp/deepswe-grader-{secrets.token_hex(8)}"
        owned = None
        if strict:
            owned = own_pytest_command(
                task.test_spec.command,
                f"{grader_dir}/{LAUNCHER.name}",
                str(SETTINGS_FD),
                f"{grader_dir}/{UNITTEST_LAUNCHER.name}",
            )
        # The change list is the diff's own paths and what git lists besides: a path the patch
        # hides from git (a .gitignore it adds) is still one it changed.
        changed = changed_paths(sandbox, workdir) if run.applied else {}
        changed.update({p: "A" for p in declared if p not in changed})
        changes = _test_infra(sandbox, task, changed, owned, strict, workdir)
        run.facts["test_infra"] = changes
        run.log += [infra_change_line(c) for c in changes]
        # What the patch still changes when the tests run: a pytest plugin loaded from one of
        # these files is the patch's (the launcher reports it).
        exempt = _exempt(task) | {c.path for c in changes if c.restored}
        touched = sorted(p for p in changed if p not in exempt)
        why = _put_hidden_tests(run, [c.path for c in changes if c.restored])
        if why:
            return run.infra(why)
        if task.environment is not None:
            _put_grading_wheels(run, task)
        if owned is not None:
            return _run_owned(run, owned, grader_dir, touched, sorted(changed))
        spec = task.test_spec
        tests = sandbox.run(f"{spec.command} 2>&1", cwd=workdir, timeout=spec.timeout_s)
        run.log += [START_TEST_OUTPUT, tests.stdout, END_TEST_OUTPUT]
        run.section = tests.stdout
        if tests.timed_out:
            run.log.append(TESTS_TIMEOUT)
            run.facts["timed_out"] = True
        return run.done()
    except (SandboxError, UnidiffParseError) as exc:
        # UnidiffParseError: the task's own test patch is malformed, a broken task.
        return run.infra(f"{type(exc).__name__}: {one_line(str(exc))}")


class _Run:
    """One reward run's state: what it knows (as values, for `judge`), the log people read, the
    outputs kept for people."""

    def __init__(self, task: Task, sandbox: Sandbox, workdir: str) -> None:
        self.task, self.sandbox, self.workdir = task, sandbox, workdir
        self.log: list[str] = []
        self.people: list[tuple[str, str]] = []
        self.applied = False
        self.section = ""
        self.facts: dict = {}

    def infra(self, why: str) -> RewardRun:
        """The run ends in an infrastructure failure, `why`."""
        self.log.append(f"{INFRA_ERROR} ({one_line(why)})")
        self.facts["infra_error"] = one_line(why)
        return self.done()

    def done(self) -> RewardRun:
        text = "\n".join(self.log)
        output = "\n\n".join(f"--- {title} (not graded) ---\n{body}" for title, body in self.people)
        after = self.applied and bool(self.facts.get("infra_error"))
        verdict = judge(self.task, self.section, RunFacts(**self.facts))
        return RewardRun(verdict, text, output, after_patch=after)


def one_line(text: str) -> str:
    """`text` as one line: what a command printed must never start a line of the graded log."""
    return " ".join(text.split())[:500]


def _put_hidden_tests(run: _Run, restored: list[str]) -> str:
    """The graded files put back and the task's hidden tests in place; why not when that failed,
    else "" (on the patched tree the patch may be why: `grade_patch` checks the clean tree)."""
    task, sandbox = run.task, run.sandbox
    if task.hidden.test_patch and not uses_r2e_layout(task):
        sandbox.write_file(TEST_PATCH_PATH, task.hidden.test_patch)
    for name, source in task.hidden.test_files.items():
        sandbox.write_file(f"{HIDDEN_TESTS_DIR}/{name}", source)
    setup = hidden_tests_script(task, restored)
    if restore_paths(task, restored):
        write_restore_list(sandbox, task, restored)
    if uses_r2e_layout(task):
        extra, script = misc_files(task)
        for path, text in extra.items():
            sandbox.write_file(path, text)
        setup = f"{setup}\n{script}" if script else setup
    if not setup:
        return ""
    r = sandbox.run(setup, cwd=run.workdir, timeout=120)
    if r.exit_code == 0:
        return ""
    run.people.append(("putting the hidden tests in place", r.output))
    return f"hidden tests did not apply, exit {r.exit_code}"


def _put_grading_wheels(run: _Run, task: Task) -> None:
    """The wheels a re-install after the patch needs (grading_wheels.grading_requirements),
    written into this sandbox only. A host that cannot fetch them is infrastructure."""
    spec = task.environment
    assert spec is not None
    if not spec.grading_pip and not spec.reinstall_after_patch:
        return
    try:
        n = put_grading_wheels(task, run.sandbox)
    except (OSError, RuntimeError, ValueError) as exc:  # pip's failure to download, offline
        raise SandboxError(f"the grading sandbox's wheels were not fetched: {exc}") from exc
    run.people.append(("grading wheels", f"{n} wheel(s) in {GRADING_WHEELS}"))


def _exempt(task: Task) -> set[str]:
    """Files that are the task's to change: the gold patch's and the graded ones."""
    return set(read_patch(task.gold_patch or "").paths) | set(graded_paths(task))


def _test_infra(
    sandbox: Sandbox,
    task: Task,
    changed: dict[str, str],
    owned: OwnedCommand | None,
    strict: bool,
    workdir: str,
) -> list[TestInfraChange]:
    """The test infrastructure the applied patch changed, each marked restored under strict
    rules. The gold patch's own files are the task's and are left alone."""
    if not changed:
        return []
    exempt = _exempt(task)
    ours = {p: s for p, s in changed.items() if p not in exempt}
    python = owned.interpreter if owned else '"$(command -v python || command -v python3)"'
    found = scan_test_infra(sandbox, ours, python, workdir)
    return [TestInfraChange(path=p, why=w, restored=strict) for p, w in found.items()]


def _timeout(run: _Run) -> float:
    return run.task.test_spec.timeout_s


def _plant_canaries(run: _Run, runner: str) -> Canaries | None:
    """Root's canaries written into the graded file of the first graded test found in one
    (grading.canaries); None, said in the output, where the command picks tests by name, no
    graded test is in a file, or the file does not parse."""
    task = run.task
    found = None
    if not canaries.picks_by_name(task.test_spec.command):
        ids, files = graded_ids(task), graded_paths(task)
        found = canaries.target(ids, files, task.hidden.test_files, TESTS_LINK)
    if found is None:
        run.people.append(("canaries", "none: no graded test the command runs by file"))
        return None
    path, ids = found
    source = run.sandbox.read_file(f"{run.workdir}/{path}").decode("utf-8", errors="replace")
    planted = canaries.plant(source, path, ids, runner, secrets.token_hex(8))
    if planted is None:
        run.people.append(("canaries", f"none: {path} does not parse"))
        return None
    run.sandbox.write_file(f"{run.workdir}/{path}", planted[0])
    names = ", ".join(f"{role} {name}" for role, name in planted[1].names.items())
    run.people.append(("canaries", f"in {path}: {names} (the fail one a copy of {ids[0]})"))
    return planted[1]


# What the pytest launcher says, and exits 78 with, when pytest is the repository's own.
RUNNER_REFUSED = "deepswe-grader: pytest is the repository's own"
ROOT_REACH = "root of a user namespace of their own: root's reach over their own files only"
NO_ROOT_REACH = (
    "the unprivileged tester: this sandbox makes no user namespace, so tests that need root's "
    "reach (a file chmod 000 still readable) fail here where the reference passed them as root"
)


def _run_owned(
    run: _Run, owned: OwnedCommand, grader_dir: str, touched: list[str], changed: list[str]
) -> RewardRun:
    """The tests run by the grader's launcher (pytest's, or the unittest one for a runner the
    hidden tests ship) as the tester, root's canaries written into a graded file first; the
    section graded is what the launcher's vault reported, its MAC checked with this run's key.
    `touched`: the paths the patch changed but the task's own; `changed`: all of them."""
    key = secrets.token_bytes(32)
    planted = _plant_canaries(run, owned.runner)
    protected = graded_paths(run.task)
    settings = {
        "report_fd": REPORT_FD,
        "key": key.hex(),
        "grader_dir": grader_dir,
        "protected": protected,
        "touched": touched,
        "changed": changed,
    }
    launcher = LAUNCHER if owned.runner == "pytest" else UNITTEST_LAUNCHER
    for part in (launcher, SEAL):
        run.sandbox.write_file(f"{grader_dir}/{part.name}", part.read_text())
    ran = run_as_tester(
        run.sandbox,
        grader_dir,
        owned.command,
        run.workdir,
        _timeout(run),
        protected,
        json.dumps(settings),
    )
    tests, rep = ran.result, read_report(ran.report, key)
    refusal = next((x for x in tests.stdout.splitlines() if x.startswith(RUNNER_REFUSED)), "")
    if not rep.started and refusal:  # the runner is the code under test (pytest's own rows)
        return run.infra(refusal[len("deepswe-grader: ") :])
    if not rep.started and not tests.timed_out:
        raise SandboxError(
            f"the grader's {owned.runner} launcher did not start (exit {tests.exit_code}): "
            f"{one_line(tests.stdout[-300:])}"
        )
    run.people.append(("the test process's output", tests.stdout))
    run.people.append(("the tests ran as", ROOT_REACH if ran.root_reach else NO_ROOT_REACH))
    run.log += [GRADER_RAN_TESTS, START_TEST_OUTPUT, rep.summary, END_TEST_OUTPUT]
    judged = judge_report(rep, planted, tests.exit_code, owned.runner)
    run.section, run.facts["grader_ran_tests"] = judged.section, True
    if tests.timed_out:
        run.log.append(TESTS_TIMEOUT)
        run.facts["timed_out"] = True
        return run.done()
    if judged.tampered:
        run.log.append(f"{TEST_RUN_TAMPERED} ({one_line('; '.join(judged.tampered))})")
        run.facts["tampered"] = judged.tampered
    elif judged.rejected:
        run.log.append(f"{TEST_RUN_REJECTED} ({judged.rejected})")
        run.facts["rejected"] = judged.rejected
    repro = run.task.hidden.reproduction
    if repro is not None and judge(run.task, run.section, RunFacts(**run.facts)).resolved:
        checked = reproduction.check(
            run.sandbox, grader_dir, repro, owned.interpreter, run.workdir, protected
        )
        why = checked.why
        run.log.append(f"{REPRODUCTION_RUN} ({one_line(why) if why else 'as the fix does'})")
        run.facts["reproduction"] = why
        if checked.tampered:
            run.log.append(f"{TEST_RUN_TAMPERED} ({one_line('; '.join(checked.tampered))})")
            run.facts["tampered"] = [*run.facts.get("tampered", []), *checked.tampered]
    return run.done()


__all__ = [
    "Applied",
    "Outcome",
    "RewardRun",
    "apply_patch",
    "one_line",
    "run_reward",
]
