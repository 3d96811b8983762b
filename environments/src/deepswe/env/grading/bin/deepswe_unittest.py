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
  failureException), TestSuite.run, the add* methods (this file's), the loader, os.write, the
  part watch; checked at every result and at the end.
- The parts (deepswe_seal.watch_parts): a test unittest's own run runs is reported PASSED only
  when the vault saw its setUp, test and tearDown end without an exception (what the code under
  test could flip on `self._outcome` does not count), the method run() calls being the graded
  test's own, through trusted `_callTestMethod` code; a test whose run is the code under test's
  is tampered.
- No trace or profile function of the repository's may be running when a result is reported.
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
_RUN_CODE = unittest.case.TestCase.run.__code__
_UNITTEST_DIR = os.path.dirname(os.path.realpath(unittest.case.__file__))


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
    method it inherits or a generator made, a repository test file's own code), or None. An
    installed decorator (mock.patch) is followed to what it wraps when its closure calls that
    function; the launcher reports this only for a test that passes (unittest.skip's wrapper
    calls nothing, and skips)."""
    method = getattr(test, "_testMethodName", None)
    fn = getattr(type(test), method, None) if method else None
    fn = getattr(fn, "__func__", fn)
    if not isinstance(fn, types.FunctionType):
        return None
    module = sys.modules.get(type(test).__module__)
    path = os.path.realpath(getattr(module, "__file__", None) or "")
    if not trust.is_protected(path):
        return None
    for _ in range(8):
        code = fn.__code__
        where = os.path.realpath(code.co_filename)
        if where == path and code in trust.codes_of(path):
            return None
        if where != path and trust.test_code(code):
            return None
        inner = getattr(fn, "__wrapped__", None)
        if trust.repository_code(code) or not seal.closes_over(fn, inner):
            break
        fn = inner
        if not isinstance(fn, types.FunctionType):
            break
    return "the graded test %s does not run its file's code" % test_id(test)


def _run_by(trust, test):
    """How `test` is run: "unittest" when its run is unittest's own (its parts are watched, and
    passing needs them seen ending), "other" for a run that is trusted code (tornado's, which
    calls unittest's; twisted's, which does not), or why its run is the code under test's."""
    found = _static(test, "run", None)
    code = getattr(getattr(found, "__func__", found), "__code__", None)
    if not isinstance(code, types.CodeType):
        return "the run of %s is not a function" % test_id(test)
    if code is _RUN_CODE or os.path.dirname(os.path.realpath(code.co_filename)) == _UNITTEST_DIR:
        return "unittest"
    if trust.repository_code(code) and not trust.test_code(code):
        path = os.path.realpath(code.co_filename)
        if path in trust.changed or not trust.from_its_file(code):
            return "%s is run by the code under test (%s)" % (test_id(test), code.co_filename)
    return "other"


def _genuine(trust):
    """genuine(test, method): why the test method unittest's run is about to run (`method`, what
    run() looked up) is not the graded test's own, or its calls not trusted code; None if it is."""

    def genuine(test, method):
        why = seal.test_calls(trust, test)
        if why or method is None:
            return why
        name = getattr(test, "_testMethodName", None)
        own = _static(type(test), name, None) if name else None
        fn, own = getattr(method, "__func__", method), getattr(own, "__func__", own)
        if fn is not own and _protected(trust, test):
            return "the graded test %s ran a method that is not its class's" % test_id(test)
        return _graded_code(trust, test)

    return genuine


def _protected(trust, test):
    module = sys.modules.get(type(test).__module__)
    return trust.is_protected(os.path.realpath(getattr(module, "__file__", None) or ""))


def _install(post, tampered, trust):
    """Hooks on unittest's base result and loader; returns check(final)."""
    state = {"loaded": False}
    base = unittest.result.TestResult

    def hook(name, original):
        word = WORDS.get(name)

        def add(self, test, *args):
            why = _graded_code(trust, test) if word == "PASSED" else None
            if why:
                tampered(why)
            # a trace function is called for unittest's frames, and on 3.8-3.12 what it writes to
            # their f_locals is copied back: one of the repository's may not be running when a
            # test's outcome is reported (the same rule as deepswe_pytest.py's report window)
            for what, fn in (("trace", sys.gettrace()), ("profile", sys.getprofile())):
                code = seal.callable_code(fn)
                if code is not None and trust.repository_code(code):
                    tampered(
                        "a %s function of the code under test (%s) was running when %s was "
                        "reported" % (what, code.co_name, test_id(test)[:200])
                    )
            if isinstance(test, unittest.case.TestCase):
                how = _run_by(trust, test)
                if how == "unittest":
                    post("expect", test_id(test))
                elif how != "other" and _protected(trust, test):
                    tampered(how)
            if word:
                post("status", test_id(test), "call", word, True)
            # the seal's refusal of a tracer, open since the test's first part, ends with its
            # result (an expected failure posts no status to end it)
            post("window", False)
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
    # unittest's test parts: a pass needs each seen ending without an exception (deepswe_seal.py)
    watched += seal.watch_parts(post, test_id, _genuine(trust))
    codes = [(f, f.__code__) for f in (hook, posting) if isinstance(f, types.FunctionType)]
    # The vault keeps its own copy and checks it at each pass and at the end: `check` below is
    # reachable from the objects this launcher patched into unittest, the vault is not.
    post(
        "watch",
        "callables",
        tuple(
            ("%s.%s" % (getattr(o, "__name__", "?"), n), o, n, tuple(seal._snap(v)))
            for o, n, v in watched
        ),
    )

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
    post("arm")  # this frame's locals, from here on the same until the report closes
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        # sys.exit(True) is exit status 1: bool is an int, but prints as "True"
        code = int(exc.code) if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:
        code = 0
    check(True)
    post("finish", code)
    return code


if __name__ == "__main__":
    _exit(main(sys.argv))
