"""The grader's pytest launcher: pytest run by the grader, reported by the grader.

Copied into the grading sandbox (outside the repository) and run as
    <python> [options] deepswe_pytest.py SETTINGS [pytest args...]
in place of `<python> -m pytest [pytest args...]`, in the same working directory. SETTINGS is a
JSON file, read and removed (where the process may) before any repository code runs:
{"report_fd": int, "nonce": str, "touched": [paths the patch changed], "graded": [test ids],
"seed": str}. The report goes to the open pipe `report_fd`, one whole line per write, as it
happens; the pipe is closed after the last line, so nothing can be rewritten at exit:

    # deepswe-grader report v2
    ===... short test summary info ...===           (HEADER)
    PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS <id>   each real test report, in pytest's -rA words
    # deepswe-grader: CANARY <pass|fail|error> <WORD>   each report of a canary, its word
    # deepswe-grader: NO-CANARIES <why>               no test ran at all (none collected, ...)
    # deepswe-grader: TAMPERED <reason>               once per reason
    ========== deepswe-grader: pytest.main returned <code> <nonce> ==========

pytest comes from the environment alone (no repository path on sys.path while it is imported),
then the working directory goes first, as `python -m pytest` puts it. The nonce proves the
closing line is this file's. What each check defends against:
- Canaries: three tests of the grader's, made to look like the first graded test's module (names
  from its test names, its file and module name), run first through pytest's own protocol: one
  must pass, one fail (AssertionError), one error (a missing fixture). Any blanket change to how
  tests run or are reported (runtest a no-op, reports forced to pass, a hook wrapper, the
  launcher's own output rewritten) changes or loses one. They do not count towards -x/--maxfail.
- Watched callables: pytest's and pluggy's runner internals, this file's plugin and writer,
  os.write and sys.exit, compared with what they were before repository code ran (object, code,
  defaults, closure), at each report (os.write/sys.exit after teardowns only: tests mock them)
  and at the end. A replacement is TAMPERED unless its code is trusted (below): installed
  plugins such as pytest-django swap TestCaseFunction.runtest.
- Hook implementations of every hook, import hooks added to sys.meta_path, and each item's
  runtest must be trusted code: from a real file that the patch did not change and nothing wrote
  since this process started. Third-party plugins and the repository's own conftest.py pass.
- pytest11 entry points: a plugin loaded from one that the environment without the repository
  does not have (a `<pkg>.dist-info` in the repository) is TAMPERED; so is any plugin module
  loaded from a changed file.
What this cannot stop: the code under test shares the process. An attack that knows the hidden
test names and changes only their outcome is not caught by the canaries; code that fakes a
trusted file name (compile(..., "/usr/lib/.../x.py")) passes the origin checks; code that finds
the nonce or the pipe in memory can write its own report; assertion helpers outside pytest
(unittest's excepted, numpy.testing) and tracing (sys.settrace) are not watched.

Standalone: the standard library and the environment's own pytest (3.x to 9.x), in the syntax of
the oldest Python a task image may have (3.5: no f-strings, no annotations).
"""

import contextlib
import functools
import importlib
import inspect
import json
import keyword
import os
import random
import re
import sys
import time
import types
import unittest.case

STARTED = "# deepswe-grader report v2"
HEADER = "=" * 27 + " short test summary info " + "=" * 28
RETURNED = "deepswe-grader: pytest.main returned"
MARK = "# deepswe-grader: "
_exit, _static = sys.exit, inspect.getattr_static


def _own(
    owner, attr, _mro=type.__dict__["__mro__"].__get__, _dict=type.__dict__["__dict__"].__get__
):
    """What `owner.attr` is defined as, without running a descriptor or __getattr__: what
    inspect.getattr_static finds for a module or a class, at a tenth of its cost (it runs at
    every report)."""
    if isinstance(owner, type):
        for klass in _mro(owner):
            found = _dict(klass).get(attr, _own)
            if found is not _own:
                return found
        return None
    return vars(owner).get(attr)


# module:[Class.]attribute, where present: what decides whether and how a test runs, is reported.
WATCHED = """_pytest.python:Function.runtest _pytest.python:Function _pytest.python:pytest_pyfunc_call
_pytest.unittest:TestCaseFunction.runtest _pytest.runner:call_and_report
_pytest.runner:runtestprotocol _pytest.runner:call_runtest_hook _pytest.runner:CallInfo
_pytest.runner:pytest_runtest_makereport _pytest.runner:pytest_runtest_protocol
_pytest.runner:CallInfo.from_call _pytest.reports:TestReport.from_item_and_call
_pytest.skipping:pytest_runtest_makereport _pytest.main:Session.pytest_runtest_logreport
_pytest.assertion.rewrite:AssertionRewritingHook.find_spec _pytest.assertion.rewrite:rewrite_asserts
_pytest.assertion.rewrite:AssertionRewritingHook.exec_module _pytest.assertion.rewrite:_rewrite_test
_pytest.assertion.rewrite:AssertionRewritingHook.load_module""".split()  # noqa: SIM905
for _p in ("pluggy", "_pytest.vendored_packages.pluggy"):  # pluggy 0.x and 1.x module names
    WATCHED += [_p + m + ":_multicall" for m in ("", "._callers", ".callers", "._execution")]
    WATCHED += [_p + m + ":PluginManager._hookexec" for m in ("", "._manager", ".manager")]
    for m in ("", "._hooks", ".hooks", "._caller"):
        WATCHED += [_p + m + ":HookCaller.__call__", _p + m + ":_HookCaller.__call__"]
# unittest's assertion API, which TestCase-style tests run under pytest call: disarming it passes
# every such test (found by `deepswe-eval audit` on swe-mini's mistune, whose tests are TestCases).
WATCHED += ["unittest.case:TestCase." + n for n in ("run", "__call__", "debug", "failureException")]
WATCHED += [
    "unittest.case:TestCase." + n
    for n in sorted(vars(unittest.case.TestCase))
    if n.startswith(("assert", "fail")) or n == "_baseAssertEqual"
]
TEARDOWN_ONLY = ["os:write", "sys:exit"]
# The hooks a test is run and reported through: checked at every report (the rest at the end).
RUN_HOOKS = """pytest_runtest_protocol pytest_runtest_setup pytest_runtest_call pytest_runtest_teardown
pytest_runtest_makereport pytest_runtest_logreport pytest_report_teststatus pytest_pyfunc_call
pytest_runtest_logstart pytest_runtest_logfinish""".split()  # noqa: SIM905


def _under(path, root):
    path = os.path.abspath(path or os.curdir)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _repository_path(path, cwd):
    """A sys.path entry the repository's own files could fill: the working directory or a
    folder inside it, except an environment's package folder kept there (a `.venv` inside the
    repository is ignored by git, so no patch reaches it)."""
    parts = os.path.abspath(path or os.curdir).split(os.sep)
    return _under(path, cwd) and "site-packages" not in parts and "dist-packages" not in parts


def _pytest11():
    """{name: value} of the pytest11 entry points sys.path shows now."""
    try:
        try:
            import importlib.metadata as md
        except ImportError:
            import importlib_metadata as md
        eps = [ep for d in md.distributions() for ep in d.entry_points if ep.group == "pytest11"]
        return dict((ep.name, ep.value) for ep in eps)
    except ImportError:
        try:
            import pkg_resources
        except ImportError:
            return {}
        eps = pkg_resources.WorkingSet(sys.path).iter_entry_points("pytest11")
        return dict((ep.name, ep.module_name) for ep in eps)


def _snapshot(obj):
    """What identifies a callable: the object; for a function also its code, defaults, closure."""
    raw = obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj
    parts = [raw]
    if isinstance(raw, types.FunctionType):
        parts += [raw.__code__, raw.__defaults__]
        for cell in raw.__closure__ or ():
            try:
                parts.append(cell.cell_contents)
            except ValueError:  # an empty cell
                parts.append(None)
    return parts


def _resolve(specs):
    """[(label, owner, attribute, snapshot)] for the specs that exist here."""
    out, seen = [], set()
    for spec in specs:
        module, _, path = spec.partition(":")
        cls, _, attr = path.rpartition(".")
        try:
            owner = importlib.import_module(module)
            owner = getattr(owner, cls) if cls else owner
            value = _static(owner, attr)
        except (ImportError, AttributeError):
            continue
        if (id(owner), attr) not in seen:
            seen.add((id(owner), attr))
            out.append((spec.replace(":", "."), owner, attr, _snapshot(value)))
    return out


def _code_file(obj):
    """The file a callable's code comes from; "" for built-in/frozen modules; None if unknown."""
    while isinstance(obj, (classmethod, staticmethod, types.MethodType, functools.partial)):
        obj = obj.func if isinstance(obj, functools.partial) else obj.__func__
    obj = getattr(obj, "__code__", None) if isinstance(obj, types.FunctionType) else obj
    if isinstance(obj, types.CodeType):
        return obj.co_filename
    if isinstance(obj, type):
        module = sys.modules.get(obj.__module__)
        if obj.__module__ in sys.builtin_module_names or obj.__module__.startswith("_frozen"):
            return ""
        return getattr(module, "__file__", None)
    return None


def _trust(touched, since):
    """verdict(obj): None when obj's code is trusted, else why not."""
    files, isfile, realpath, stat = {}, os.path.isfile, os.path.realpath, os.stat

    def verdict(obj):
        path = _code_file(obj)
        if path == "":
            return None
        if path not in files:
            if path is None or not isfile(path):
                files[path] = "code from no file (%s)" % (path,)
            elif realpath(path) in touched:
                files[path] = "code from a changed file " + path
            else:
                st = stat(path)
                late = max(st.st_mtime, st.st_ctime) > since
                files[path] = ("code from a file written during the run " + path) if late else None
        return files[path]

    return verdict


def _canaries(items, graded, seed, pos, Module, Function):
    """[(role, item)]: a passing, an erroring and a failing test in the module of the first
    graded item (else of the first item), named and placed as its own tests are."""
    pairs = [(i, i.getparent(Module)) for i in items]
    pairs = [(i, m) for i, m in pairs if m is not None]
    ids = [(pos(i.nodeid), m) for i, m in pairs]
    hits = [m for n, m in ids if any(n == g or n.startswith((g + "[", g + "::")) for g in graded)]
    module = (hits or [m for _, m in pairs] or [None])[0]
    if module is None:
        return []
    mod, rng = module.obj, random.Random(seed)
    mine = [i for i, m in pairs if m is module]
    names = set(dir(mod)) | set(i.name for i in mine)
    text = " ".join([n.split("[")[0] for n in names if n.startswith("test")] + [mod.__name__])
    words = sorted(
        # words that can start a name: `1` from `test_1` would make `def test_x(1_add)`
        set(
            w for w in re.split(r"[^A-Za-z0-9]+|_", text) if w[:1].isalpha() and w.lower() != "test"
        )
    )
    words = words or ["case", "value", "basic"]
    fixtures = getattr(getattr(module.session, "_fixturemanager", None), "_arg2fixturedefs", {})

    def fresh(prefix, taken):
        for n in range(1000):
            name = prefix + "_".join(rng.sample(words, min(len(words), 1 + n % 3)))
            name += "_%d" % n if n >= 50 else ""
            # an identifier, never a keyword: `with` alone would make `def test_x(with)`
            if name not in taken and name.isidentifier() and not keyword.iskeyword(name):
                taken.add(name)
                return name

    codes = [getattr(getattr(i, "obj", None), "__code__", None) for i in mine]
    first = min([c.co_firstlineno for c in codes if c] or [1])
    path = mod.__file__[:-1] if mod.__file__.endswith((".pyc", ".pyo")) else mod.__file__
    # `request` is a fixture pytest provides without a definition (six's tests have the word)
    missing = fresh("", set(fixtures) | names | {"request", "self", "cls"})
    bodies = [("pass", "():\n    pass\n"), ("error", "(%s):\n    pass\n" % missing)]
    bodies.append(("fail", "():\n    raise AssertionError('assert 0 == 1')\n"))
    out, make = [], getattr(Function, "from_parent", None)
    for role, body in bodies:
        name, ns = fresh("test_", names), {}
        exec(compile("\n" * (first - 1) + "def " + name + body, path, "exec"), ns)
        func = types.FunctionType(ns[name].__code__, mod.__dict__, name)
        setattr(mod, name, func)  # where pytest found the module's own tests
        if make:
            out.append((role, make(module, name=name, callobj=func)))
        else:
            out.append((role, Function(name, parent=module, callobj=func)))
    rng.shuffle(out)
    return out


def _plugin(emit, settings, cwd, since, installed):
    """The grader's plugin, its state kept in closures; and a `check(final)` to call at the end."""
    import pytest
    from _pytest.python import Function, Module

    touched = set(os.path.realpath(os.path.join(cwd, p)) for p in settings.get("touched", []))
    graded, seed = settings.get("graded", []), str(settings.get("seed", ""))
    verdict = _trust(touched, since)
    state = {"config": None, "pm": None, "exec": None, "ran": 0, "said": set(), "roles": {}}
    state["meta_path"] = set(id(f) for f in sys.meta_path)
    watched, late = _resolve(WATCHED), _resolve(TEARDOWN_ONLY)

    def tampered(reason):
        if reason not in state["said"]:
            state["said"].add(reason)
            emit(MARK + "TAMPERED " + reason)

    def pos(nodeid):
        rel = getattr(state["config"], "cwd_relative_nodeid", None)
        return rel(nodeid) if rel is not None else nodeid

    judged = {}

    def judge(fn):
        """verdict(fn), remembered per function and code object (a swapped __code__ is new)."""
        key = (fn, getattr(fn, "__code__", None))
        try:
            return judged[key]
        except (KeyError, TypeError):
            why = verdict(fn)
        with contextlib.suppress(TypeError):
            judged[key] = why
        return why

    def check(final, full=False):
        """At each report: the watched callables, the hooks a test runs and reports through,
        import hooks. `full` (after collection and at the end) also every other hook, every
        plugin and entry point: checking those at each report cost pytest runs 2-4x their time."""
        for label, owner, attr, snap in watched + (late if final else []):
            now = _snapshot(owner if attr is None else _own(owner, attr))
            new = (
                now if len(now) != len(snap) else [x for k, x in enumerate(now) if x is not snap[k]]
            )
            if any(verdict(x) for x in new):  # a swap to installed code (pytest-django) is fine
                tampered(label + " replaced")
        pm, config = state["pm"], state["config"]
        if pm is None:
            return
        debug = getattr(getattr(config, "option", None), "debug", None)
        if not debug and getattr(pm, "_inner_hookexec", None) is not state["exec"]:
            tampered("pluginmanager hook execution replaced")
        names = sorted(vars(pm.hook)) if full else RUN_HOOKS
        for name in names:
            caller = getattr(pm.hook, name, None)
            if caller is None:
                continue
            impls = getattr(caller, "_nonwrappers", []) + getattr(caller, "_wrappers", [])
            if hasattr(caller, "get_hookimpls"):  # pluggy 0.8 and later
                impls = caller.get_hookimpls()
            for impl in impls:
                why = judge(impl.function)
                if why:
                    tampered("hook %s implemented by %s" % (name, why))
            if name in ours and ours[name] not in [i.function for i in impls]:
                tampered("the grader's hook %s removed" % name)
        for finder in sys.meta_path:
            why = None if id(finder) in state["meta_path"] else verdict(type(finder))
            if why:
                tampered("import hook %r: %s" % (type(finder).__name__, why))
        if not full:
            return
        for plugin in pm.get_plugins():
            where = getattr(plugin, "__file__", None)
            if where and os.path.realpath(where) in touched:
                tampered("plugin loaded from a changed file: " + where)
        for plugin, _dist in getattr(pm, "list_plugin_distinfo", list)():
            name = pm.get_name(plugin)
            value = installed.get(name, "")
            if not value or (
                ":" not in value and getattr(plugin, "__name__", value) != value.strip()
            ):
                tampered("entry-point plugin %s is not the environment's" % name)

    def finish():
        if not state["ran"] and "none" not in state["said"]:
            state["said"].add("none")
            emit(MARK + "NO-CANARIES no test ran")
        check(True, full=True)

    class Grader(object):
        __slots__ = ()

        def pytest_plugin_registered(self, plugin, manager):
            if state["pm"] is None:
                state["pm"], state["exec"] = manager, getattr(manager, "_inner_hookexec", None)

        def pytest_configure(self, config):
            state["config"] = config

        def pytest_collectreport(self, report):
            if report.failed:
                emit("ERROR " + pos(report.nodeid or "."))

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, session, config, items):
            try:
                made = _canaries(items, graded, seed, pos, Module, Function) if items else []
            except Exception as exc:  # never end the session; a run without canaries is not trusted
                tampered(
                    "the grader's canaries could not be made: %s: %s" % (type(exc).__name__, exc)
                )
                made = []
            if items and not made:
                emit(MARK + "NO-CANARIES no test in a Python module")
            state["roles"].update((item.nodeid, role) for role, item in made)
            items[:0] = [item for _, item in made]
            if made and getattr(config.option, "maxfail", 0):
                # -x, --maxfail: the fail and error canaries are not the tests' failures
                config.option.maxfail += 2
            check(False, full=True)  # what collection registered, before any test runs

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_protocol(self, item, nextitem):
            state["stop"] = (item.session.shouldstop, item.session.shouldfail)
            why = verdict(_static(item, "runtest", None))
            if why:
                tampered("runtest of %s: %s" % (type(item).__name__, why))

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(self, report):
            xfail = hasattr(report, "wasxfail")
            if report.when == "call":
                if report.passed:
                    word = "XPASS" if xfail else "PASSED"
                else:
                    word = "FAILED" if report.failed else ("XFAIL" if xfail else "SKIPPED")
            elif report.failed:
                word = "ERROR"  # setup or teardown
            elif report.skipped:
                word = "XFAIL" if xfail else "SKIPPED"
            else:
                word = None
            role = state["roles"].get(report.nodeid)
            state["ran"] += 1
            if role is not None:
                if word:
                    emit(MARK + "CANARY %s %s" % (role, word))
                session, stop = state.get("session"), state.get("stop", (True, True))
                if session is not None and not any(stop):
                    session.shouldstop = session.shouldfail = False  # --sw, -x: canaries don't stop
            elif word:
                emit(word + " " + pos(report.nodeid))
            if report.when != "setup":  # after the call and the teardown: two of three reports
                check(report.when == "teardown")

        @pytest.hookimpl(trylast=True)
        def pytest_sessionstart(self, session):
            state["session"] = session

        def pytest_sessionfinish(self, session, exitstatus):
            finish()

    grader = Grader()
    ours = dict((n, getattr(grader, n)) for n in dir(Grader) if n.startswith("pytest_"))
    watched += [("launcher " + n, Grader, n, _snapshot(_static(Grader, n))) for n in ours]
    watched += [
        ("launcher " + f.__name__, f, None, _snapshot(f))
        for f in (emit, check, verdict, finish, tampered)
    ]
    return grader, finish


def _writer(fd, write=os.write):
    def emit(text):
        data = (text.replace("\n", " ") + "\n").encode("utf-8", "replace")
        while data:
            data = data[write(fd, data) :]

    return emit


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: deepswe_pytest.py SETTINGS [pytest args...]\n")
        return 64
    since, cwd, here = time.time(), os.getcwd(), os.path.dirname(os.path.abspath(__file__))
    with open(argv[1]) as f:
        settings = json.load(f)
    with contextlib.suppress(OSError):
        os.unlink(argv[1])  # it holds the nonce
    fd, nonce, args = int(settings["report_fd"]), str(settings["nonce"]), argv[2:]
    os.set_inheritable(fd, False)  # not to the tests' subprocesses
    emit, close = _writer(fd), os.close
    emit(STARTED)

    # pytest from the environment alone, then the path `python -m pytest` would have.
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if not _under(p, here) and not _repository_path(p, cwd)]
    import pytest  # noqa: E402

    installed = _pytest11()
    grader, finish = _plugin(emit, settings, cwd, since, installed)
    sys.path[:] = [cwd] + [p for p in saved if not _under(p, here)]
    sys.argv = [getattr(pytest, "__file__", "pytest")] + args
    emit(HEADER)
    code = int(pytest.main(args, plugins=[grader]))
    finish()
    emit("=" * 10 + " " + RETURNED + " " + str(code) + " " + nonce + " " + "=" * 10)
    close(fd)
    return code


if __name__ == "__main__":
    _exit(main(sys.argv))
