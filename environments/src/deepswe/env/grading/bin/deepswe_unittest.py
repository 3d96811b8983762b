"""The grader's unittest launcher: a task's own unittest runner script, reported by the grader.

Copied into the grading sandbox (outside the repository) with deepswe_seal.py and run as
    <python> [options] deepswe_unittest.py SETTINGS_FD SCRIPT [args...]
in place of `<python> [options] SCRIPT [args...]`, where SCRIPT is a runner the task's hidden
tests ship (R2E-Gym's tornado and Pillow rows: `r2e_tests/tornado_unittest_runner.py`,
`r2e_tests/unittest_custom_runner.py`, which print pytest-like `PASSED module::Class::method`
lines). SETTINGS_FD is a descriptor on the same settings as deepswe_pytest.py's, read and closed
before any repository code runs. The runner's printed summary is never read: unittest's own
`TestResult` reports each outcome through the vault (deepswe_seal.py), in the words and ids the
runner prints, as it happens:

    # deepswe-grader report v3
    ===... short test summary info ...===           (HEADER)
    PASSED|FAILED|ERROR|SKIPPED module::Class::method
    # deepswe-grader: TAMPERED <reason>
    ========== deepswe-grader: unittest returned <code> <facts> <mac> ==========

- Results: `unittest.result.TestResult`'s add* methods, which every result class reaches (the
  runners call `super()`), post the outcome before doing their own work; each test's outcome is
  taken once. Expected failures and unexpected successes print nothing, as the runners print
  nothing for them.
- Canaries are root's, written into a graded file as methods of its test classes: this file does
  not know them.
- The graded tests' own code: a test method from a protected file must run code that compiling
  that file gives.
- Watched callables: unittest's TestCase.run/__call__ and its assertion API (assert*, fail,
  failureException), TestSuite.run, the add* methods (this file's), the loader, os.write; checked
  at every result and at the end.
What this cannot stop is what deepswe_pytest.py says: code under test shares the process.

Standalone: the standard library and deepswe_seal.py, the syntax of the oldest Python a task image
may have.
"""

import inspect
import os
import runpy
import sys
import types
import unittest
import unittest.case
import unittest.loader
import unittest.result
import unittest.suite

import deepswe_seal as seal

WORDS = {"addSuccess": "PASSED", "addFailure": "FAILED", "addError": "ERROR", "addSkip": "SKIPPED"}
SILENT = ("addExpectedFailure", "addUnexpectedSuccess")
_exit, _static = sys.exit, inspect.getattr_static


def test_id(test):
    """The id the runners print: module::Class::method (module::Class for an error holder)."""
    cls = test.__class__
    method = getattr(test, "_testMethodName", None)
    if method is None:
        return "%s::%s" % (cls.__module__, cls.__name__)
    return "%s::%s::%s" % (cls.__module__, cls.__name__, method)


def _tests(suite):
    for test in suite:
        if isinstance(test, unittest.suite.TestSuite):
            for t in _tests(test):
                yield t
        else:
            yield test


def _graded_code(trust, test):
    """Why a test method from a protected file does not run code its file holds (or, for a
    method it inherits or a generator made, a repository test file's own code), or None."""
    method = getattr(test, "_testMethodName", None)
    fn = getattr(type(test), method, None) if method else None
    fn = getattr(fn, "__func__", fn)
    if not isinstance(fn, types.FunctionType):
        return None
    module = sys.modules.get(type(test).__module__)
    path = os.path.realpath(getattr(module, "__file__", None) or "")
    if not trust.is_protected(path):
        return None
    code = fn.__code__
    where = os.path.realpath(code.co_filename)
    if where == path and code in trust.codes_of(path):
        return None
    parts = os.path.relpath(where, trust.workdir).split(os.sep)
    in_tests = any(p in ("tests", "test", "testing", "r2e_tests") for p in parts[:-1])
    if where != path and trust.in_repository(where) and in_tests and trust.from_its_file(code):
        return None
    return "the graded test %s does not run its file's code" % test_id(test)


def _install(post, tampered, trust):
    """Hooks on unittest's base result and loader; returns check(final)."""
    state = {"loaded": False}
    base = unittest.result.TestResult

    def hook(name, original):
        word = WORDS.get(name)

        def add(self, test, *args):
            why = _graded_code(trust, test)
            if why:
                tampered(why)
            if word:
                post("status", test_id(test), "call", word, True)
            check(False)
            return original(self, test, *args)

        add.__name__ = name
        return add

    for name in list(WORDS) + list(SILENT):
        original = getattr(base, name, None)
        if original is not None:
            setattr(base, name, hook(name, original))

    loader_cls = unittest.loader.TestLoader
    originals = dict(
        (n, _static(loader_cls, n))
        for n in ("discover", "loadTestsFromNames", "loadTestsFromModule")
    )

    def posting(name):
        """The loader method `name`; its outermost call's tests are posted as collected (once)."""
        original = originals[name]

        def load(self, *args, **kwargs):
            nested = state.get("loading")
            state["loading"] = True
            try:
                suite = original(self, *args, **kwargs)
            finally:
                state["loading"] = nested
            if not nested and not state["loaded"]:
                state["loaded"] = True
                ids = sorted(set(test_id(t) for t in _tests(suite)))
                post("collected", tuple((i, i) for i in ids))
            return suite

        load.__name__ = name
        return load

    for name in originals:
        setattr(loader_cls, name, posting(name))

    watched = [
        (base, n, _static(base, n)) for n in list(WORDS) + list(SILENT) if hasattr(base, n)
    ] + [(loader_cls, n, _static(loader_cls, n)) for n in originals]
    watched += [
        (unittest.case.TestCase, "run", _static(unittest.case.TestCase, "run")),
        (unittest.case.TestCase, "__call__", _static(unittest.case.TestCase, "__call__")),
        (unittest.suite.TestSuite, "run", _static(unittest.suite.TestSuite, "run")),
        (unittest.suite.TestSuite, "__call__", _static(unittest.suite.TestSuite, "__call__")),
        (os, "write", os.write),
    ]
    # The assertion API the tests call: disarming one passes every test that uses it.
    case = unittest.case.TestCase
    watched += [
        (case, n, _static(case, n))
        for n in sorted(vars(case))
        if n.startswith(("assert", "fail")) or n in ("failureException", "_baseAssertEqual")
    ]
    codes = [(f, f.__code__) for f in (hook, posting) if isinstance(f, types.FunctionType)]

    def check(final):
        for owner, name, value in watched:
            if _static(owner, name, None) is not value:
                tampered("%s.%s replaced" % (getattr(owner, "__name__", owner), name))
        for f, code in codes:
            if f.__code__ is not code:
                tampered("the launcher's %s replaced" % f.__name__)

    return check


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: deepswe_unittest.py SETTINGS_FD SCRIPT [args...]\n")
        return 64
    here = os.path.dirname(os.path.abspath(__file__))
    settings = seal.read_settings(int(argv[1]))
    runner_dirs = [os.path.dirname(unittest.__file__)]
    post, trust, tampered = seal.install(settings, "unittest", runner_dirs)
    del settings  # the key is the vault's alone
    check = _install(post, tampered, trust)
    script = argv[2]
    # As `python SCRIPT` runs it: its folder first on sys.path, never this file's.
    sys.path[:] = [os.path.dirname(os.path.abspath(script))] + [
        p for p in sys.path[1:] if os.path.abspath(p or os.curdir) != here
    ]
    sys.argv = [script] + argv[3:]
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        # sys.exit(True) is exit status 1: bool is an int, but prints as "True"
        code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    check(True)
    post("finish", code)
    return code


if __name__ == "__main__":
    _exit(main(sys.argv))
