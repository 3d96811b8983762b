"""The grader's pytest launcher: pytest run by the grader, reported by the grader.

Copied into the grading sandbox (outside the repository) and run as
    <python> [options] deepswe_pytest.py REPORT [pytest args...]
in place of `<python> -m pytest [pytest args...]`, in the same working directory.

- pytest is imported with no repository path on sys.path, so no file of the repository (a root
  `pytest.py`, `_pytest/`, `pluggy.py`) can stand in for it; then the working directory goes
  first on sys.path, where `python -m pytest` puts it, so the tests import what they would.
- Every test's status is written by this file's plugin to REPORT, in the words of pytest's
  `-rA` short summary, as the test finishes; the grader reads REPORT, never the process's
  output, which the code under test can print anything into.
- After pytest.main returns, its exit status is written to REPORT with the nonce the grader left
  in REPORT.nonce (read and removed before any code of the repository runs), and the process
  exits with it: a report without that line means the test process died or was cut short, and
  code under test that writes such a line into the report does not know the nonce.
- At session end, any pytest plugin loaded from a file listed in REPORT.touched (the paths of
  the repository the patch changed) is reported: a plugin the patch wrote took part.

Standalone: the standard library and the environment's own pytest only, and the syntax of the
oldest Python a task image may have (3.5: no f-strings, no annotations).
"""

import os
import sys

HEADER = "=" * 27 + " short test summary info " + "=" * 28
RETURNED = "deepswe-grader: pytest.main returned"
STARTED = "# deepswe-grader report v1"


def _under(path, root):
    path = os.path.abspath(path or os.curdir)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _repository_path(path, cwd):
    """A sys.path entry the repository's own files could fill: the working directory or a
    folder inside it, except an environment's package folder kept there (a `.venv` inside the
    repository is ignored by git, so no patch reaches it)."""
    parts = os.path.abspath(path or os.curdir).split(os.sep)
    return _under(path, cwd) and "site-packages" not in parts and "dist-packages" not in parts


class Reporter(object):
    """The grader's plugin: one `-rA` line per test outcome, written as it happens."""

    def __init__(self, out, touched):
        self.out = out
        self.touched = touched
        self.config = None

    def line(self, text):
        self.out.write(text.replace("\n", " ") + "\n")
        self.out.flush()

    def pytest_configure(self, config):
        self.config = config

    def _pos(self, nodeid):
        rel = getattr(self.config, "cwd_relative_nodeid", None)
        return rel(nodeid) if rel is not None else nodeid

    def pytest_collectreport(self, report):
        if report.failed:
            self.line("ERROR " + self._pos(report.nodeid or "."))

    def pytest_runtest_logreport(self, report):
        # The statuses pytest's terminal reporter gives (`pytest_report_teststatus`).
        xfail = hasattr(report, "wasxfail")
        if report.when == "call":
            if report.passed:
                word = "XPASS" if xfail else "PASSED"
            elif report.failed:
                word = "FAILED"
            else:
                word = "XFAIL" if xfail else "SKIPPED"
        elif report.failed:
            word = "ERROR"  # setup or teardown
        elif report.skipped:
            word = "XFAIL" if xfail else "SKIPPED"
        else:
            return
        self.line(word + " " + self._pos(report.nodeid))

    def pytest_sessionfinish(self, session, exitstatus):
        if self.config is None or not self.touched:
            return
        for plugin in self.config.pluginmanager.get_plugins():
            where = getattr(plugin, "__file__", None)
            if where and os.path.abspath(where) in self.touched:
                self.line("# deepswe-grader: TAMPERED plugin loaded from a changed file: " + where)


def _take(path):
    """The text of `path`, which is then removed ("" when there is none)."""
    try:
        with open(path) as f:
            text = f.read()
        os.unlink(path)
        return text
    except OSError:
        return ""


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: deepswe_pytest.py REPORT [pytest args...]\n")
        return 64
    report_path, args = argv[1], argv[2:]
    here = os.path.dirname(os.path.abspath(__file__))
    cwd = os.getcwd()
    outside = [p for p in sys.path if not _under(p, here) and not _repository_path(p, cwd)]
    fd = os.open(report_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    out = os.fdopen(fd, "w")
    out.write(STARTED + "\n")
    out.flush()
    nonce = _take(report_path + ".nonce").strip()
    touched = set()
    try:
        with open(report_path + ".touched") as f:
            touched = set(
                os.path.abspath(os.path.join(cwd, p.rstrip("\n"))) for p in f if p.strip()
            )
    except IOError:
        pass

    # pytest from the environment alone, then the path `python -m pytest` would have.
    saved = list(sys.path)
    sys.path[:] = outside
    import pytest  # noqa: E402

    sys.path[:] = [cwd] + [p for p in saved if not _under(p, here)]
    sys.argv = [getattr(pytest, "__file__", "pytest")] + args
    out.write(HEADER + "\n")
    out.flush()
    code = pytest.main(args, plugins=[Reporter(out, touched)])
    code = int(code)
    out.write("=" * 10 + " " + RETURNED + " " + str(code) + " " + nonce + " " + "=" * 10 + "\n")
    out.flush()
    out.close()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
