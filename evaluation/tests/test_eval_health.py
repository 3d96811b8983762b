"""Task health (`deepswe-eval health`, deepswe.eval.health/network/audit): a manifest per task set
whose unhealthy tasks training leaves out.

Without Docker: the network signs on real messages, and the manifest built from records.
With Docker: a four-task set (healthy, needing the network, flaky, passing with the bug in
place) measured end to end, and training's task list read through it. A fresh sandbox per run
shares nothing with the run before it but the clock, so the flaky test reads the clock (CLOCK).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepswe.data.datasets import load_tasks
from deepswe.data.task import EnvironmentSpec, HiddenTests, Task, TaskSource, TestSpec
from deepswe.data.toy import commit_repo, diff_to, git, pth_install, write_tasks
from deepswe.env.grading.outcomes import GradeResult, Outcome
from deepswe.env.trajectory import Ending, Trajectory
from deepswe.eval.audit import build_manifest, dataset_sha256
from deepswe.eval.config import EvalConfig
from deepswe.eval.health import HealthError, load_manifest, quarantine
from deepswe.eval.network import load_sign, network_sign
from deepswe.eval.store import EpisodeRecord, EpisodeStatus
from deepswe.train.sources.task_list import healthy


@pytest.mark.parametrize(
    "line",
    [
        "E   socket.gaierror: [Errno -3] Temporary failure in name resolution",
        "E   aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host "
        "example.com:80 ssl:default [Name or service not known]",
        "E   requests.exceptions.ConnectionError: HTTPSConnectionPool(host='httpbin.org', "
        "port=443): Max retries exceeded with url: /get",
        "fatal: unable to access 'https://github.com/x/y/': Could not resolve host: github.com",
        "OSError: [Errno 101] Network is unreachable",
    ],
)
def test_the_network_is_recognised_from_what_clients_print(line):
    log = f"collected 3 items\n\ntests/test_x.py F\n{line}\n1 failed in 0.1s\n"
    assert network_sign(log) == " ".join(line.split())


@pytest.mark.parametrize(
    "line",
    [
        "E   ConnectionRefusedError: [Errno 111] Connection refused",  # a local server down
        "E   assert add(2, 3) == 5",
        "PASSED tests/test_net.py::test_name_resolution_errors_are_reported",
    ],
)
def test_local_failures_are_not_the_network(line):
    assert network_sign(f"x\n{line}\ny\n") is None


# pytest's shape: a section per failure, then the short summary (as in the real logs of
# requests-2317, sphinx-7985 and R2E-Gym aiohttp_0415a4ca, where the sign sits in the section)
SECTIONED = """\
=================================== FAILURES ===================================
_________________________________ test_lookup __________________________________
    def test_lookup():
>       socket.getaddrinfo('example.com', 80)
E       socket.gaierror: [Errno -3] Temporary failure in name resolution
_____________________________ TestClock.test_clock _____________________________
E       assert 1 % 2 == 0
=========================== short test summary info ============================
FAILED tests/test_ops.py::test_lookup - socket.gaierror: Temporary failure in name resolution
FAILED tests/test_clock.py::TestClock::test_clock - assert 1 % 2 == 0
"""


def test_a_sign_counts_only_for_a_graded_test_that_failed():
    """A file's other tests may need the network; the task needs it only when a graded test
    that failed shows the sign, in its own section or on a line naming it."""
    gaierror = "E socket.gaierror: [Errno -3] Temporary failure in name resolution"
    assert network_sign(SECTIONED, ["tests/test_ops.py::test_lookup"]) == gaierror
    assert network_sign(SECTIONED, ["tests/test_clock.py::TestClock::test_clock"]) is None
    assert network_sign(SECTIONED, []) is None  # no graded test failed: nothing to explain
    # the summary line names its test: enough without the section
    summary = "\n".join(SECTIONED.splitlines()[-3:])  # its header and two lines
    assert network_sign(summary, ["tests/test_ops.py::test_lookup"]).startswith("FAILED")
    assert network_sign(summary, ["tests/test_ops.py::test_look"]) is None  # a prefix is not it
    # unittest's shape (django): `ERROR: name` heads the section
    unit = "ERROR: test_fetch (net.tests.FetchTests)\n---\nurllib.error.URLError: <urlopen error "
    unit += "[Errno -2] Name or service not known>\n"
    assert network_sign(unit, ["test_fetch (net.tests.FetchTests)"]).startswith("urllib")
    assert network_sign(unit, ["test_other (net.tests.FetchTests)"]) is None
    # a log with no sections cannot say whose a line is: any sign counts
    assert network_sign(f"x\n{gaierror}\n", ["t.py::test_clock"]) == gaierror


# R2E-Gym aiohttp_1c1c0ea3's gold log under load, cut to its shape: the graded test gives a local
# server 0.4 s; the server was not listening yet. pytest's `-l` locals and the code listing name
# timeouts too, and are not signs.
UNDER_LOAD = """\
=================================== FAILURES ===================================
__________ TestShutdown.test_shutdown_handler_cancellation_suppressed __________
timeout = ClientTimeout(total=0.4, connect=None, sock_read=None, sock_connect=None)
    async def _wrap_create_connection(
        self,
        timeout: "ClientTimeout",
    ):
            with pytest.raises(asyncio.TimeoutError):
E                   OSError: Multiple exceptions: [Errno 111] Connect call failed ('::1', 60537, \
0, 0), [Errno 111] Connect call failed ('127.0.0.1', 60537)
E           aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host localhost:60537
_______________________________ test_on[pyloop] ________________________________
E           asyncio.exceptions.TimeoutError
=========================== short test summary info ============================
FAILED r2e_tests/test_1.py::TestShutdown::test_shutdown_handler_cancellation_suppressed
FAILED r2e_tests/test_1.py::test_on[pyloop]
"""


def test_a_test_that_reached_a_wall_clock_bound_is_a_load_sign_not_the_network():
    graded = ["TestShutdown.test_shutdown_handler_cancellation_suppressed"]
    assert network_sign(UNDER_LOAD, graded) is None
    assert load_sign(UNDER_LOAD, graded).startswith("E OSError: Multiple exceptions")
    # the other failure's timeout is not the graded test's; neither is a line of code or locals
    assert load_sign(UNDER_LOAD, ["r2e_tests/test_1.py::test_other"]) is None
    assert load_sign(UNDER_LOAD, ["r2e_tests/test_1.py::test_on[pyloop]"]).endswith("TimeoutError")
    for line in ("socket.timeout: timed out", "E   requests.exceptions.ReadTimeout: x"):
        assert load_sign(f"x\n{line}\n") == " ".join(line.split())
    for line in ('    timeout: "ClientTimeout",', "timeout = 5", "E   assert 1 == 2"):
        assert load_sign(f"x\n{line}\n") is None


def test_a_gold_failure_under_load_is_flaky_with_that_reason():
    R, U = Outcome.RESOLVED, Outcome.UNRESOLVED
    tasks = [_task("loaded")]
    graded = "TestShutdown.test_shutdown_handler_cancellation_suppressed"
    failed = _record("loaded", 0, U, UNDER_LOAD)
    failed.trajectory.grade = GradeResult(
        outcome=U, parser="r2e-gym", reason="1 mismatched", mismatched=[graded]
    )
    records = {"gold": {"loaded": [failed]}, "empty": {"loaded": [_record("loaded", 0, U)]}}
    cfg = EvalConfig(dataset="tasks.jsonl", baseline_runs=1)
    row = build_manifest(tasks, cfg, [], records, "v1").tasks["loaded"]
    assert row.flaky and not row.healthy and row.network is None
    assert row.reasons[0].startswith("flaky under load: gold unresolved where a graded test")
    # with a run that resolved beside it: the runs disagree, and the reason says why
    records["gold"]["loaded"] = [_record("loaded", 0, R), failed.model_copy(update={"run": 1})]
    row = build_manifest(tasks, cfg, [], records, "v1").tasks["loaded"]
    assert (
        row.reasons[0].startswith("flaky: gold resolved 1 of 2 runs")
        and "under load: E " in (row.reasons[0])
    )


def _task(i: str) -> Task:
    return Task(
        instance_id=i,
        repo="o/r",
        base_commit="0" * 40,
        problem_statement="p",
        source=TaskSource.SWE_MINI,
        image="img:1",
        test_spec=TestSpec(command="pytest", log_parser="pytest"),
        hidden=HiddenTests(fail_to_pass=["t::a"]),
        gold_patch="diff",
    )


def _record(i: str, run: int, outcome: Outcome, log: str = "") -> EpisodeRecord:
    traj = Trajectory(
        instance_id=i,
        policy="p",
        messages=[],
        ending=Ending.SUBMITTED,
        outcome=outcome,
        test_log=log,
    )
    return EpisodeRecord(
        instance_id=i,
        run=run,
        repo="o/r",
        status=EpisodeStatus.GRADED,
        outcome=outcome,
        trajectory=traj,
    )


def _manifest(tmp_path: Path):
    R, U = Outcome.RESOLVED, Outcome.UNRESOLVED
    tasks = [_task(i) for i in ("good", "flaky", "net", "free")]
    net_log = "FAILED t::b - socket.gaierror: [Errno -3] Temporary failure in name resolution"
    gold = {"good": [R, R, R], "flaky": [R, U, R], "net": [U, U, U], "free": [R, R, R]}
    empty = {"good": [U], "flaky": [U], "net": [U], "free": [R]}
    records = {
        "gold": {
            i: [_record(i, k, o, net_log if i == "net" else "") for k, o in enumerate(v)]
            for i, v in gold.items()
        },
        "empty": {i: [_record(i, k, o) for k, o in enumerate(v)] for i, v in empty.items()},
    }
    cfg = EvalConfig(dataset="tasks.jsonl", baseline_runs=3)
    return tasks, build_manifest(tasks, cfg, [], records, "v1")


def test_the_manifest_names_each_unhealthy_task_with_its_reason(tmp_path):
    tasks, m = _manifest(tmp_path)
    assert m.kind == "health" and m.rounds == 3 and m.dataset_sha256 == dataset_sha256(tasks)
    assert {i for i, r in m.tasks.items() if r.healthy} == {"good"}
    assert m.tasks["flaky"].flaky and m.tasks["flaky"].gold_runs == [
        "resolved",
        "unresolved",
        "resolved",
    ]
    assert m.tasks["flaky"].reasons == [
        "flaky: gold resolved 2 of 3 runs (resolved, unresolved, resolved)"
    ]
    assert m.tasks["net"].network.endswith("Temporary failure in name resolution")
    assert m.tasks["net"].reasons[0].startswith("needs the network: FAILED t::b")
    assert m.tasks["free"].reasons == ["empty: resolved: the tests pass with the bug in place"]
    kept, out = quarantine(tasks, m)
    assert [t.instance_id for t in kept] == ["good"] and set(out) == {"flaky", "net", "free"}


def test_training_leaves_out_the_unhealthy_and_says_why(tmp_path, capsys):
    tasks, m = _manifest(tmp_path)
    (tmp_path / "health.json").write_text(m.model_dump_json())
    data = SimpleNamespace(health=str(tmp_path), path=None, include_unhealthy=False)
    assert [t.instance_id for t in healthy(tasks, data)] == ["good"]
    err = capsys.readouterr().err
    assert "3 of 4 task(s) left out as unhealthy" in err and "flaky: gold resolved 2 of 3" in err
    data.include_unhealthy = True
    assert len(healthy(tasks, data)) == 4 and "KEPT" in capsys.readouterr().err
    with pytest.raises(ValueError, match="data.health: .*no such manifest"):
        healthy(tasks, SimpleNamespace(health=str(tmp_path / "x.json"), path=None))
    (tmp_path / "bad.json").write_text('{"version": 9}')
    with pytest.raises(HealthError, match="not a health or audit manifest"):
        load_manifest(tmp_path / "bad.json")


# --- Docker: a real task set measured ------------------------------------------------------

OPS_BUG = "def add(a, b):\n    return a - b\n"
# The offline sandbox drops every packet, so glibc's resolver waits out its default 5 s x 2
# attempts before "Temporary failure in name resolution"; one 1 s attempt (RES_OPTIONS, read at
# the process's first lookup) fails with the same error. Every run of every task runs
# test_lookup: 16 runs, about 9 s each saved.
TESTS = (
    "import os\nimport socket\n\nfrom calc.ops import add\n\n"
    "os.environ['RES_OPTIONS'] = 'timeout:1 attempts:1'\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_other():\n    assert add(0, 0) == 0\n\n\n"
    "def test_lookup():\n    socket.getaddrinfo('example.com', 80)\n"
)
# Flaky on cue: a sandbox shares nothing with the run before it but the clock. The test passes
# in even windows of WINDOW_S seconds, fails in odd ones, and holds its sandbox until the next
# window starts, so of two runs one after the other (one worker), the second lands in the next
# window and disagrees with the first. It assumes less than WINDOW_S seconds between one run's
# test and the next one's: measured here, the second run's episode began 0.1 s after the first
# ended, then a sandbox start and pytest's own before its test.
WINDOW_S = 20
CLOCK = (
    "import time\n\n\ndef test_clock():\n    now = time.time()\n"
    f"    window = int(now // {WINDOW_S})\n"
    f"    time.sleep((window + 1) * {WINDOW_S} - now + 0.2)\n"
    "    assert window % 2 == 0\n"
)
PTH = pth_install()


def _real_task(
    repo: Path, name: str, f2p: list[str], p2p: list[str], files: str = "tests/test_ops.py"
) -> Task:
    return Task(
        instance_id=f"calc__{name}-1",
        repo="calc/calc",
        base_commit=git(repo, "rev-parse", "HEAD").strip(),
        problem_statement="add is wrong.",
        source=TaskSource.SWE_MINI,
        environment=EnvironmentSpec(source=str(repo), pip=["pytest"], install=[PTH]),
        test_spec=TestSpec(
            command=f"python -m pytest -rA -p no:cacheprovider {files}",
            log_parser="pytest",
            timeout_s=120,
        ),
        hidden=HiddenTests(fail_to_pass=f2p, pass_to_pass=p2p, graded_files=files.split()),
        gold_patch=diff_to(repo, "calc/ops.py", OPS_BUG.replace("a - b", "a + b")),
    )


@pytest.mark.docker
def test_health_of_a_real_task_set_and_training_reads_it(tmp_path, capsys):
    repo = tmp_path / "calc"
    files = {
        "calc/__init__.py": "",
        "calc/ops.py": OPS_BUG,
        "tests/test_ops.py": TESTS,
        "tests/test_clock.py": CLOCK,
    }
    commit_repo(repo, files, "calc")
    t = "tests/test_ops.py::"
    both = "tests/test_ops.py tests/test_clock.py"
    tasks = [
        _real_task(repo, "healthy", [t + "test_add"], [t + "test_other"]),
        _real_task(repo, "network", [t + "test_add"], [t + "test_lookup"]),  # recorded online
        _real_task(repo, "flaky", [t + "test_add"], ["tests/test_clock.py::test_clock"], both),
        _real_task(repo, "nobug", [t + "test_other"], []),  # passes with the bug in place
    ]
    path = write_tasks(tasks, tmp_path / "tasks.jsonl")
    out = tmp_path / "health"
    cmd = [
        str(Path(sys.executable).with_name("deepswe-eval")),
        "health",
        "--dataset",
        str(path),
        "--out",
        str(out),
        "--rounds",
        "2",
        "eval.workers=1",  # a task's runs one after the other: the flaky test needs it (CLOCK)
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "health: 1 of 4 task(s) healthy" in run.stdout
    m = json.loads((out / "health.json").read_text())
    rows = m["tasks"]
    assert (
        rows["calc__healthy-1"]["healthy"]
        and rows["calc__healthy-1"]["gold_runs"] == ["resolved"] * 2
    )
    assert "name resolution" in rows["calc__network-1"]["network"]
    flaky = rows["calc__flaky-1"]
    assert flaky["flaky"] and sorted(flaky["gold_runs"]) == ["resolved", "unresolved"], flaky
    assert flaky["reasons"][0].startswith("flaky: gold resolved 1 of 2 runs"), flaky
    assert rows["calc__nobug-1"]["reasons"] == [
        "empty: resolved: the tests pass with the bug in place"
    ]
    assert "| calc__network-1 |" in (out / "health.md").read_text()
    # the images were built by this run: their size and build time are in the manifest
    assert all(r["image_mb"] > 0 and r["build_s"] > 0 for r in rows.values()), rows
    # training: a health.json beside the task file is read by default
    (tmp_path / "health.json").write_text((out / "health.json").read_text())
    data = SimpleNamespace(health=None, path=str(path), include_unhealthy=False)
    kept = healthy(load_tasks(str(path)), data)
    assert [k.instance_id for k in kept] == ["calc__healthy-1"]
    assert "3 of 4 task(s) left out as unhealthy" in capsys.readouterr().err


def test_the_report_gives_pass_at_1_on_the_healthy_subset_beside_all(tmp_path):
    """An evaluation keeps every task; the report adds the healthy subset and names the rest."""
    from deepswe.eval.card import make_card, open_run
    from deepswe.eval.report import HEALTH_FILE, build_report

    tasks, m = _manifest(tmp_path)
    cfg = EvalConfig(dataset="tasks.jsonl")
    store, _ = open_run(tmp_path / "run", make_card(cfg, tasks))
    won = {
        "good": Outcome.RESOLVED,
        "flaky": Outcome.RESOLVED,
        "net": Outcome.UNRESOLVED,
        "free": Outcome.RESOLVED,
    }
    for i, o in won.items():
        store.save(_record(i, 0, o))
    assert build_report(tmp_path / "run")["healthy"] is None  # no manifest: nothing beside
    (tmp_path / "run" / HEALTH_FILE).write_text(m.model_dump_json())
    metrics = build_report(tmp_path / "run")
    assert metrics["pass@1_mean"] == 0.75
    assert metrics["healthy"]["tasks"] == 1 and metrics["healthy"]["pass@1_mean"] == 1.0
    assert set(metrics["healthy"]["outside"]) == {"flaky", "net", "free"}
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Pass@1, healthy tasks" in report and "| net | needs the network:" in report


@pytest.mark.parametrize(
    ("line", "sign"),
    [
        # aiohttp_1c1c0ea3's gold log: a local server of the test that is down is not the network
        (
            "ClientConnectorError: Cannot connect to host localhost:34567 ssl:default "
            "[Connect call failed ('127.0.0.1', 34567)]",
            False,
        ),
        ("Cannot connect to host 127.0.0.1:8080 ssl:default [Connection refused]", False),
        ("Cannot connect to host [::1]:8080 ssl:default", False),
        (
            "HTTPConnectionPool(host='localhost', port=5000): Max retries exceeded with url: /",
            False,
        ),
        ("Cannot connect to host example.com:443 ssl:default [Name or service not known]", True),
        ("HTTPSConnectionPool(host='pypi.org', port=443): Max retries exceeded with url: /", True),
    ],
)
def test_the_sandboxs_own_loopback_is_not_the_network(line: str, sign: bool) -> None:
    assert bool(network_sign(line)) is sign
