"""The grader's unittest launcher: a task's own unittest runner script, reported by the grader.

Copied into the grading sandbox (outside the repository) and run as
    <python> [options] deepswe_unittest.py SETTINGS SCRIPT [args...]
in place of `<python> [options] SCRIPT [args...]`, where SCRIPT is a runner the task's hidden
tests ship (R2E-Gym's tornado and Pillow rows: `r2e_tests/tornado_unittest_runner.py`,
`r2e_tests/unittest_custom_runner.py`, which print pytest-like `PASSED module::Class::method`
lines). SETTINGS is the same JSON file as deepswe_pytest.py's ({"report_fd", "nonce", "graded",
"seed", ...}). The runner's printed summary is never read: unittest's own `TestResult` reports
each outcome to the pipe `report_fd`, in the words and ids the runner prints, as it happens:

    # deepswe-grader report v2
    ===... short test summary info ...===           (HEADER)
    PASSED|FAILED|ERROR|SKIPPED module::Class::method
    # deepswe-grader: CANARY <pass|fail|error> <WORD>
    # deepswe-grader: NO-CANARIES <why>
    # deepswe-grader: TAMPERED <reason>
    ========== deepswe-grader: unittest returned <code> <nonce> ==========

- Results: `unittest.result.TestResult`'s add* methods, which every result class reaches (the
  runners call `super()`), write the line before doing their own work. Expected failures and
  unexpected successes print nothing, as the runners print nothing for them.
- Canaries: a TestCase of the grader's with three tests (one passes, one fails, one errors),
  named like and placed in the module of the first graded test, added to what the runner's
  loader returns and run first. A blanket change to how tests run or report moves one.
- Watched callables: unittest's TestCase.run/__call__ and its assertion API (assert*, fail,
  failureException), TestSuite.run, the add* methods (this file's), the loader, this file's
  writer, os.write; checked at every result and at the end.
What this cannot stop is what deepswe_pytest.py says: code under test shares the process.

Standalone: the standard library only, the syntax of the oldest Python a task image may have.
"""

import contextlib
import inspect
import json
import keyword
import os
import random
import re
import runpy
import sys
import types
import unittest
import unittest.case
import unittest.loader
import unittest.result
import unittest.suite

STARTED = "# deepswe-grader report v2"
HEADER = "=" * 27 + " short test summary info " + "=" * 28
RETURNED = "deepswe-grader: unittest returned"
MARK = "# deepswe-grader: "
WORDS = {"addSuccess": "PASSED", "addFailure": "FAILED", "addError": "ERROR", "addSkip": "SKIPPED"}
SILENT = ("addExpectedFailure", "addUnexpectedSuccess")
_exit, _static = sys.exit, inspect.getattr_static


def _writer(fd, write=os.write):
    def emit(text):
        data = (text.replace("\n", " ") + "\n").encode("utf-8", "replace")
        while data:
            data = data[write(fd, data) :]

    return emit


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


def _canary_case(suite, graded, seed):
    """(TestCase class, {method: role}) placed beside the first graded test, or (None, {})."""
    tests = [t for t in _tests(suite) if getattr(t, "_testMethodName", None)]
    if not tests:
        return None, {}

    def key(t):
        return "%s.%s" % (t.__class__.__name__, t._testMethodName)

    hits = [t for t in tests if key(t) in graded or test_id(t) in graded]
    first = (hits or tests)[0]
    module = sys.modules.get(first.__class__.__module__)
    rng = random.Random(seed)
    names = [t._testMethodName for t in tests] + [t.__class__.__name__ for t in tests]
    words = sorted(set(w for n in names for w in re.split(r"[^A-Za-z0-9]+|_", n) if w))
    words = [w for w in words if w[:1].isalpha() and w.lower() != "test"] or ["case", "value"]
    taken = set(dir(module)) if module else set()

    def fresh(prefix):
        for n in range(1000):
            name = prefix + "_".join(rng.sample(words, min(len(words), 1 + n % 3)))
            name += "_%d" % n if n >= 50 else ""
            # an identifier, never a keyword: `with` alone would make `def test_x(with)`
            if name not in taken and name.isidentifier() and not keyword.iskeyword(name):
                taken.add(name)
                return name

    cls_name = fresh("") + "Test"
    cls_name = cls_name[0].upper() + cls_name[1:]
    path = getattr(module, "__file__", None) or "<unknown>"
    roles, body = {}, {}
    for role, stmt in (
        ("pass", "pass"),
        ("fail", "raise AssertionError('0 != 1')"),
        ("error", "raise KeyError('value')"),
    ):
        name = fresh("test_")
        ns = {}
        exec(compile("def %s(self):\n    %s\n" % (name, stmt), path, "exec"), ns)
        body[name] = types.FunctionType(ns[name].__code__, vars(module) if module else {}, name)
        roles[name] = role
    body["__module__"] = first.__class__.__module__
    case = type(cls_name, (unittest.TestCase,), body)
    if module is not None:
        setattr(module, cls_name, case)
    return case, roles


def _install(emit, settings):
    """Hooks on unittest's base result and loader; returns check(final) and finish()."""
    graded, seed = set(settings.get("graded", [])), str(settings.get("seed", ""))
    state = {"ran": 0, "said": set(), "roles": {}, "case": None}
    base = unittest.result.TestResult

    def tampered(reason):
        if reason not in state["said"]:
            state["said"].add(reason)
            emit(MARK + "TAMPERED " + reason)

    def hook(name, original):
        word = WORDS.get(name)

        def add(self, test, *args):
            state["ran"] += 1
            role = state["roles"].get(getattr(test, "_testMethodName", None))
            if role is not None and test.__class__ is state["case"]:
                emit(MARK + "CANARY %s %s" % (role, word or name))
            elif word:
                emit(word + " " + test_id(test))
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

    def with_canaries(name):
        """The loader method `name`, its outermost call's suite led by the canaries (once)."""
        original = originals[name]

        def load(self, *args, **kwargs):
            nested = state.get("loading")
            state["loading"] = True
            try:
                suite = original(self, *args, **kwargs)
            finally:
                state["loading"] = nested
            if nested or state["case"] is not None:
                return suite
            try:
                case, roles = _canary_case(suite, graded, seed)
            except Exception as exc:  # never end the run; a run without canaries is not trusted
                tampered(
                    "the grader's canaries could not be made: %s: %s" % (type(exc).__name__, exc)
                )
                case = None
            if case is None:
                return suite
            state["case"], state["roles"] = case, roles
            canaries = [case(m) for m in sorted(roles)]
            random.Random(seed).shuffle(canaries)
            return unittest.suite.TestSuite(canaries + [suite])

        load.__name__ = name
        return load

    for name in originals:
        setattr(loader_cls, name, with_canaries(name))

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
    codes = [(f, f.__code__) for f in (emit, tampered)]

    def check(final):
        for owner, name, value in watched:
            if _static(owner, name, None) is not value:
                tampered("%s.%s replaced" % (getattr(owner, "__name__", owner), name))
        for f, code in codes:
            if f.__code__ is not code:
                tampered("the launcher's %s replaced" % f.__name__)
        if final and state["case"] is None and "none" not in state["said"]:
            state["said"].add("none")
            emit(MARK + "NO-CANARIES no test was loaded")

    return check


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: deepswe_unittest.py SETTINGS SCRIPT [args...]\n")
        return 64
    here = os.path.dirname(os.path.abspath(__file__))
    with open(argv[1]) as f:
        settings = json.load(f)
    with contextlib.suppress(OSError):
        os.unlink(argv[1])
    fd, nonce = int(settings["report_fd"]), str(settings["nonce"])
    os.set_inheritable(fd, False)
    emit, close = _writer(fd), os.close
    emit(STARTED)
    emit(HEADER)
    check = _install(emit, settings)
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
    emit("=" * 10 + " " + RETURNED + " " + str(code) + " " + nonce + " " + "=" * 10)
    close(fd)
    return code


if __name__ == "__main__":
    _exit(main(sys.argv))
