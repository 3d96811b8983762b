"""The grader's pytest launcher: pytest run by the grader, reported through the grader's seal.

Copied into the grading sandbox (outside the repository) with deepswe_seal.py and run as
    <python> [options] deepswe_pytest.py SETTINGS_FD [pytest args...]
in place of `<python> -m pytest [pytest args...]`, in the same working directory. SETTINGS_FD is a
descriptor root opened on the settings (JSON: {"report_fd", "key", "grader_dir", "protected":
[the graded files and conftests, repository paths], "touched": [paths the patch changed, but the
task's own], "changed": [every path the patch changed]}); they
are read and the descriptor closed before any repository code runs. The report goes to the pipe
`report_fd` through the vault (deepswe_seal.py: every line folded into an HMAC root checks):

    # deepswe-grader report v3
    ===... short test summary info ...===           (HEADER)
    PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS <id>   each test's outcome, in pytest's -rA words
    ERROR <path>                                   a collection error
    # deepswe-grader: TAMPERED <reason>               once per reason
    ========== deepswe-grader: pytest.main returned <code> <facts> <mac> ==========

pytest comes from the environment alone (no repository path on sys.path while it is imported),
then the working directory goes first, as `python -m pytest` puts it. The run is the grader's:
`-x`/`--maxfail` do not stop it (a failure already decides; root's canaries, written into a
graded file, must all run), and where pytest-xdist is installed it runs in this one process
(`-n 0 --dist no` after the row's own options: a worker is a process the grader does not own).
What each check defends against:
- Canaries are root's (deepswe.env.grading.canaries): tests written into the graded file's own
  source, named from its words, one a copy of a graded test that must fail. This file does not
  know them, so nothing the code under test can read here tells them apart.
- The vault (deepswe_seal.py): lines only the launcher's posts make, each outcome once, the tests
  collected once, the report closed only from this file's main frame; from Python 3.8 the seal
  refuses gc enumeration, other threads' frames, audit hooks, code swaps of the runner's, the
  grader's and the graded tests' functions, and reading bytecode of protected files root did not
  write.
- The graded tests' own code: each test collected from a protected file must run code that
  compiling that root-owned file gives (as written, or as pytest rewrites it): a function swapped
  in the module, a forged rewrite cache or a module planted in sys.modules is tampered.
- Watched callables: pytest's and pluggy's runner internals, this file's plugin, os.write and
  sys.exit, compared with what they were before repository code ran, after each test's teardown
  and at the end. A replacement is TAMPERED unless
  its code is the code of an installed file, compared by content, not by the file name it claims
  (pytest-django swaps TestCaseFunction.runtest with its own code).
- Hook implementations of every hook, import hooks added to sys.meta_path, and each item's
  runtest must be such code too, from a file the patch did not change and nothing wrote since this
  process started; the repository's own conftest.py (root's) passes.
- TestCase items: unittest's parts are watched (deepswe_seal.watch_parts): such a test reported
  passed needs its setUp, test and tearDown seen ending without an exception.
- pytest11 entry points: a plugin loaded from one that the environment without the repository
  does not have (a `<pkg>.dist-info` in the repository) is TAMPERED; so is any plugin module
  loaded from a changed file.
What this cannot stop: the code under test shares the process. An attack that tells the canaries
from the graded tests by what they do, or rebinds pytest's module attributes during one test and
puts them back before the next report, is not caught here.

Standalone: the standard library, deepswe_seal.py and the environment's own pytest (3.x to 9.x),
in the syntax of the oldest Python a task image may have (3.5: no f-strings, no annotations).
"""

import contextlib
import functools
import importlib
import importlib.util
import inspect
import os
import sys
import time
import types
import unittest.case

import deepswe_seal as seal

_exit, _static = sys.exit, inspect.getattr_static
_addr = object.__hash__  # id() without its audit event
# From Python 3.13 a frame's f_locals writes through (PEP 667): code under test that walks up
# its stack can rebind what pytest's suspended frames use once the test returns.
_WRITE_THROUGH = sys.version_info >= (3, 13)
_RUN_CODE = unittest.case.TestCase.run.__code__
_UNITTEST_DIR = os.path.dirname(os.path.realpath(unittest.case.__file__))


# What `owner.attr` is defined as, running no descriptor (the seal's, as the vault uses it).
_own = seal._own


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
# The standard library's context manager pytest's call-phase wrappers run each test inside (its
# capture and logging plugins' generator context managers): an __exit__ that returns True
# swallows the test's failure. From Python 3.8 to 3.12 a class attribute store raises no audit
# event, so these are checked by identity.
WATCHED += [
    "contextlib:_GeneratorContextManager." + n for n in ("__init__", "__enter__", "__exit__")
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


# What identifies a callable: the object; for a function also its code, defaults and closure's
# contents (the vault's own definition, which it keeps for its watch).
_snapshot = seal._snap


def _unchanged(obj, snap):
    """Whether `obj` is what `snap` (a _snapshot) recorded, part by part, without making a new
    snapshot (the check at every report is most of what it costs)."""
    raw = obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj
    if raw is not snap[0]:
        return False
    if len(snap) == 1:
        return True
    # Sealed, a watched function's code and defaults cannot be stored (the seal refuses it), and
    # each read of them is an audit event: read them only where nothing is sealed.
    if not seal.SEALED and (raw.__code__ is not snap[1] or raw.__defaults__ is not snap[2]):
        return False
    cells = raw.__closure__ or ()
    if len(cells) != len(snap) - 3:
        return False
    for k, cell in enumerate(cells):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            value = None
        if value is not snap[3 + k]:
            return False
    return True


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
        if (_addr(owner), attr) not in seen:
            seen.add((_addr(owner), attr))
            out.append((spec.replace(":", "."), owner, attr, _snapshot(value)))
    return out


def _code_of(obj):
    """The code object a callable runs; "" for built-in code; a class's module file as a str."""
    while isinstance(obj, (classmethod, staticmethod, types.MethodType, functools.partial)):
        obj = obj.func if isinstance(obj, functools.partial) else obj.__func__
    if isinstance(obj, types.FunctionType):
        return obj.__code__
    if isinstance(obj, types.CodeType):
        return obj
    if isinstance(obj, type):
        for name in ("find_spec", "find_module", "exec_module"):
            found = _own(obj, name)
            if isinstance(found, (types.FunctionType, classmethod, staticmethod)):
                return _code_of(found)
        if obj.__module__ in sys.builtin_module_names or obj.__module__.startswith("_frozen"):
            return ""
        return getattr(sys.modules.get(obj.__module__), "__file__", None) or None
    return None


def _verdict(trust, touched, since, known):
    """verdict(obj): None when obj's code is trusted, else why not. `known` holds the code objects
    of what ran before any repository code (trusted as they are)."""
    realpath, stat = os.path.realpath, os.stat
    files = {}

    def by_file(path):
        if path not in files:
            if not os.path.isfile(path):
                files[path] = "code from no file (%s)" % (path,)
            elif realpath(path) in touched:
                files[path] = "code from a changed file " + path
            else:
                st = stat(path)
                late = max(st.st_mtime, st.st_ctime) > since
                files[path] = ("code from a file written during the run " + path) if late else None
        return files[path]

    def verdict(obj):
        code = _code_of(obj)
        if code == "":
            return None
        if code is None:
            return "code from no file"
        path = code if isinstance(code, str) else code.co_filename
        why = by_file(path)
        if why or not isinstance(code, types.CodeType) or known.get(_addr(code)) is code:
            return why
        return None if trust.from_its_file(code) else "code not its file's, named " + path

    return verdict


def _pass_hook(config):
    """The run's enable_assertion_pass_hook (pytest >= 5), which changes what rewriting makes."""
    try:
        return bool(config.getini("enable_assertion_pass_hook"))
    except Exception:  # an older pytest: no such ini value
        return False


def _rewriter(rewrite_test, config):
    """path -> the code pytest's assertion rewriting makes of it (its own `_rewrite_test`, as
    captured before repository code ran), across pytest's signatures."""
    return functools.partial(seal.rewritten, rewrite_test, config=config)


def _hand_over(made, pass_hook):
    """pytest's assertion rewriting of the graded files, done once: the seal rewrote them as the
    launcher started, before any repository code ran, and its Trust compares each graded test's
    code with those objects; pytest is handed the same objects instead of rewriting each file
    again (the rewrite was most of what the seal added to a run). A file pytest names otherwise,
    or a run whose enable_assertion_pass_hook changes the rewriting, is rewritten as before. Code
    the code under test made pytest load instead is what the seal checks in any case."""
    from _pytest.assertion import rewrite as rewriting

    original = getattr(rewriting, "_rewrite_test", None)
    if original is None or not made:
        return
    pairs = tuple(made.items())

    def _rewrite_test(*args, **kwargs):
        if kwargs or len(args) != 2:
            return original(*args, **kwargs)
        # (fn, config) from pytest 5 on; (config, fn) before
        fn, config = args[::-1] if hasattr(args[0], "getini") else args
        found = dict(pairs).get(str(fn))
        if found is None or pass_hook(config):
            return original(*args, **kwargs)
        return found  # what pytest's own returned then: (the file's stat or hash, the code)

    rewriting._rewrite_test = _rewrite_test


# The code objects of a module's functions and methods (the seal's, which remembers the runner's).
_module_codes = seal.module_codes


def _test_file(path, cwd):
    """Whether `path` is a repository test file (a tests/test/testing folder, test_*.py,
    *_test.py, conftest.py): where a graded test's mixin or generator may live."""
    rel = os.path.relpath(path, cwd).split(os.sep)
    name = rel[-1]
    in_tests = any(p in ("tests", "test", "testing", "r2e_tests") for p in rel[:-1])
    return (
        in_tests or name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")
    )


def _test_function(item):
    obj = getattr(item, "obj", None)
    obj = getattr(obj, "__func__", obj)
    return obj if isinstance(obj, types.FunctionType) else None


def _plugin(post, tampered, trust, settings, cwd, since, installed):
    """The grader's plugin, its state kept in closures; and a `check(final)` to call at the end."""
    import pytest
    from _pytest.assertion import rewrite as _rw
    from _pytest.reports import TestReport

    # the seal's helpers, held by this plugin's closures (a module attribute rebound later is
    # not what they call; the closures are among the watched callables)
    callable_code, closes_over, test_calls = seal.callable_code, seal.closes_over, seal.test_calls
    touched = set(os.path.realpath(os.path.join(cwd, p)) for p in settings.get("touched", []))
    # every path the patch changed, the task's own files (the gold patch's) included
    changed = set(os.path.realpath(os.path.join(cwd, p)) for p in settings.get("changed", []))
    rewrite_test = getattr(_rw, "_rewrite_test", None)
    known = {}  # _addr(code) -> code: what was registered before any repository code ran
    verdict = _verdict(trust, touched, since, known)
    state = {"config": None, "pm": None, "exec": None}
    state["prefix"] = getattr(sys, "pycache_prefix", None)  # as it was before repository code
    state["meta_path"] = set(_addr(f) for f in sys.meta_path)
    watched, late = _resolve(WATCHED), _resolve(TEARDOWN_ONLY)
    genuine = {}

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

    item_paths = {}

    def item_path(item):
        """The real path of the file `item` was collected from ("" for none), looked up once per
        item and path: a graded file's folders are root's and sticky (tester.py), so the tester
        cannot move a link into them."""
        fspath = getattr(item, "path", None) or getattr(item, "fspath", None)
        name = str(fspath) if fspath is not None else ""
        found = item_paths.get(_addr(item))
        if found is None or found[0] is not item or found[1] != name:
            found = (item, name, os.path.realpath(name) if name else "")
            item_paths[_addr(item)] = found
        return found[2]

    def graded_code(item):
        """Why a test collected from a protected file does not run code its file holds, or None:
        the graded file's own (as written or as pytest rewrites it), or a repository test file's
        that the patch did not change (a mixin it inherits, a generator that made it), reached
        through a decorator's `__wrapped__` where its closure calls what it names. Reported only
        for a test that passes (`passing_code`): unittest.skip's wrapper calls nothing, and skips.
        Sealed (Python 3.8 on), the vault decides this itself (deepswe_seal._pytest_watch), out
        of the code under test's reach, and this copy is not run: it would rewrite each graded
        file a second time in this process."""
        if seal.SEALED:
            return None
        path = item_path(item)
        fn = _test_function(item) if trust.is_protected(path) else None
        if fn is None:
            return None
        if genuine.get(item.nodeid, fn) is not fn:
            return "the graded test %s was replaced" % item.nodeid
        genuine[item.nodeid] = fn
        for _ in range(8):
            code = fn.__code__
            where = trust.code_path(code)
            if where == path:
                if trust.holds(path, code):
                    return None
                break
            inner = getattr(fn, "__wrapped__", None)
            if trust.in_repository(where):
                if _test_file(where, cwd) and verdict(fn) is None:
                    return None
                # The repository's own decorator (scikit-learn's ignore_warnings) is followed as
                # an installed one is, when the patch changed nothing in its file, nothing wrote
                # the file during the run, its code is the file's, and the function it names as
                # wrapped is the one its closure calls.
                if where in changed or verdict(fn) is not None or not closes_over(fn, inner):
                    break
            elif verdict(fn) is not None or not closes_over(fn, inner):
                # installed code that is not its file's, or that does not call what it names as
                # wrapped (any installed function given a `__wrapped__` would pass for a wrapper)
                break
            fn = inner
            if not isinstance(fn, types.FunctionType):
                break
        return "the graded test %s does not run its file's code" % item.nodeid

    def testcase_of(item):
        test = getattr(item, "_testcase", None) or getattr(item, "instance", None)
        return test if isinstance(test, unittest.case.TestCase) else None

    def unittest_run(item):
        """For a unittest TestCase item: "unittest" when its run is unittest's own (its parts
        watched: passing needs them seen ending), "other" for trusted code (tornado's, which calls
        unittest's; twisted's, which does not), or why its run is the code under test's; None
        for any other item."""
        test = testcase_of(item)
        if test is None:
            return None
        found = _static(test, "run", None)
        code = getattr(getattr(found, "__func__", found), "__code__", None)
        if code is _RUN_CODE or (
            isinstance(code, types.CodeType)
            and os.path.dirname(trust.code_path(code)) == _UNITTEST_DIR
        ):
            return "unittest"
        why = verdict(found)
        return "the run of %s: %s" % (item.nodeid[:200], why) if why else "other"

    def genuine_method(test, method):
        """Why the test method unittest's run is about to run for the current item is not the
        graded test's own (or its calls not trusted code), or None."""
        why = test_calls(trust, test)
        item = state.get("items", {}).get(state.get("current"))
        if why or method is None or item is None:
            return why
        fn = getattr(method, "__func__", method)
        if fn is not _test_function(item):
            path = item_path(item)
            code = getattr(fn, "__code__", None)
            if trust.is_protected(path) and not (code is not None and trust.holds(path, code)):
                return "the graded test %s ran other code than its own" % item.nodeid[:200]
        return graded_code(item)

    # unittest's test parts (TestCase items): a pass needs each seen ending without an exception
    watched += [
        ("unittest " + getattr(owner, "__name__", "?") + "." + name, owner, name, _snapshot(value))
        for owner, name, value in seal.watch_parts(
            post, lambda test: state.get("current") or "", genuine_method
        )
    ]

    def check(final, full=False):
        """At each report: the watched callables, the hooks a test runs and reports through,
        import hooks. `full` (after collection and at the end) also every other hook, every
        plugin and entry point: checking those at each report cost pytest runs 2-4x their time."""
        for label, owner, attr, snap in watched + (late if final else []):
            obj = owner if attr is None else _own(owner, attr)
            if _unchanged(obj, snap):
                continue
            now = _snapshot(obj)
            new = (
                now if len(now) != len(snap) else [x for k, x in enumerate(now) if x is not snap[k]]
            )
            if any(verdict(x) for x in new):
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
            why = None if _addr(finder) in state["meta_path"] else verdict(type(finder))
            if why:
                tampered("import hook %r: %s" % (type(finder).__name__, why))
        if getattr(sys, "pycache_prefix", None) != state.get("prefix"):
            tampered("sys.pycache_prefix changed")
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
        check(True, full=True)

    def remember_plugins(pm):
        """Before any conftest: every hook implementation registered so far is the
        environment's (pytest's own plugins, entry points, -p), and so is every function of the
        runner's modules loaded so far (the plugins pytest registers later are their classes)."""
        for caller in vars(pm.hook).values():
            impls = getattr(caller, "_nonwrappers", []) + getattr(caller, "_wrappers", [])
            if hasattr(caller, "get_hookimpls"):
                impls = caller.get_hookimpls()
            for impl in impls:
                code = getattr(impl.function, "__code__", None)
                if code is not None:
                    known[_addr(code)] = code
        for module in list(sys.modules.values()):
            if not isinstance(module, types.ModuleType):
                continue
            where = vars(module).get("__file__") or ""  # no getattr: lazy modules import on it
            if trust.runner_file(where) and not trust.is_protected(os.path.realpath(where)):
                for code in _module_codes(module):
                    known[_addr(code)] = code

    getframe = sys._getframe
    hook_dir = ""
    if _WRITE_THROUGH:  # pluggy's folder
        hook_dir = os.path.dirname(sys.modules[type(pytest.hookimpl).__module__].__file__)
        hook_dir = os.path.realpath(hook_dir) + os.sep

    def waiting(frame):
        """The frames that wait for the hook call running the launcher's wrapper: the stack
        above it, but for pluggy's frames of that call (they dispatch the hook meanwhile)."""
        while frame is not None and trust.code_path(frame.f_code).startswith(hook_dir):
            frame = frame.f_back
        out = []
        while frame is not None:
            out.append(frame)
            frame = frame.f_back
        return out

    class Grader(object):
        __slots__ = ()

        def pytest_plugin_registered(self, plugin, manager):
            if state["pm"] is None:
                state["pm"], state["exec"] = manager, getattr(manager, "_inner_hookexec", None)
                # the same facts, for the vault's own checks (deepswe_seal._pytest_watch)
                mine = dict((n, vars(Grader)[n]) for n in RUN_HOOKS if n in vars(Grader))
                post("pytest", "pm", manager, tuple(RUN_HOOKS), mine)

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_pyfunc_call(self, pyfuncitem):
            # a wrapper: no other implementation can call the test without it. The vault reads
            # the function pytest calls, and refuses a tracer of the code under test until the
            # test's report is posted
            post("pytest", "calling", pyfuncitem)
            yield

        @pytest.hookimpl(tryfirst=True)
        def pytest_load_initial_conftests(self, early_config):
            if state["pm"] is not None:
                remember_plugins(state["pm"])

        @pytest.hookimpl(tryfirst=True)
        def pytest_configure(self, config):
            state["config"] = config
            if rewrite_test is not None:
                trust.rewrite = _rewriter(rewrite_test, config)
                post("watch", "rewrite", trust.rewrite, _pass_hook(config))  # for the seal's
            if getattr(config.option, "maxfail", 0):
                config.option.maxfail = 0  # the grader's run: -x does not stop it

        def pytest_collectreport(self, report):
            if report.failed:
                post("collect_error", pos(report.nodeid or "."))

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, session, config, items):
            post("collected", tuple((item.nodeid, pos(item.nodeid)) for item in items))
            post("pytest", "items", tuple((item.nodeid, item) for item in items))
            state["items"] = dict((item.nodeid, item) for item in items)
            for item in items:
                graded_code(item)  # each graded test's function as collected, remembered
            check(False, full=True)  # what collection registered, before any test runs

        if _WRITE_THROUGH:
            # Each phase and the collection: the frames waiting for it to return hold the same
            # values when it does (the vault keeps them and compares, deepswe_seal.py).

            @pytest.hookimpl(hookwrapper=True, tryfirst=True)
            def pytest_collection(self, session):
                post("frames", "hold", "collection", waiting(getframe(1)))
                yield
                post("frames", "same", "collection")

            @pytest.hookimpl(hookwrapper=True, tryfirst=True)
            def pytest_runtest_setup(self, item):
                post("frames", "hold", (item.nodeid, "setup"), waiting(getframe(1)))
                yield
                post("frames", "same", (item.nodeid, "setup"))

            @pytest.hookimpl(hookwrapper=True, tryfirst=True)
            def pytest_runtest_call(self, item):
                post("frames", "hold", (item.nodeid, "call"), waiting(getframe(1)))
                yield
                post("frames", "same", (item.nodeid, "call"))

            @pytest.hookimpl(hookwrapper=True, tryfirst=True)
            def pytest_runtest_teardown(self, item, nextitem):
                post("frames", "hold", (item.nodeid, "teardown"), waiting(getframe(1)))
                yield
                post("frames", "same", (item.nodeid, "teardown"))

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_protocol(self, item, nextitem):
            state["current"] = item.nodeid  # whose unittest parts the watch sees
            why = verdict(_static(item, "runtest", None))
            if why:
                tampered("runtest of %s: %s" % (type(item).__name__, why))
            state["graded"] = graded_code(item)  # as the test is about to run

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            # A trace or profile function is called for pytest's frames, and on 3.8-3.12 what it
            # writes to their f_locals is copied back (the report's outcome among them): one of
            # the repository's may not be running while a report is made and logged, and the
            # seal refuses setting one until the report is posted (the window).
            for what, fn in (("trace", sys.gettrace()), ("profile", sys.getprofile())):
                code = callable_code(fn)
                if code is not None and trust.repository_code(code):
                    tampered(
                        "a %s function of the code under test (%s) was running when pytest made "
                        "the report of %s" % (what, code.co_name, item.nodeid[:200])
                    )
            post("window", True)
            yield

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(self, report):
            xfail = hasattr(report, "wasxfail")
            if getattr(report, "outcome", None) not in ("passed", "failed", "skipped"):
                word = ""  # a plugin's own outcome (pytest-rerunfailures' "rerun")
            elif report.when == "call":
                if report.passed:
                    word = "XPASS" if xfail else "PASSED"
                else:
                    word = "FAILED" if report.failed else ("XFAIL" if xfail else "SKIPPED")
            elif report.failed:
                word = "ERROR"  # setup or teardown
            elif report.skipped:
                word = "XFAIL" if xfail else "SKIPPED"
            else:
                word = ""
            if report.when == "call":  # again once it ran: a wrapper's closure swapped meanwhile
                item = state.get("items", {}).get(report.nodeid)
                why = graded_code(item) if item is not None else None
                if state.get("current") == report.nodeid:
                    why = state.get("graded") or why
                if why and word in ("PASSED", "XPASS"):
                    tampered(why)
                how = unittest_run(item) if item is not None else None
                if how == "unittest":
                    post("expect", report.nodeid)
                elif how and how != "other":
                    tampered(how)
            post("status", report.nodeid, report.when, word, type(report) is TestReport)
            post("window", False)
            if report.when == "teardown" and not seal.SEALED:  # once a test: after its last
                check(True)  # report (sealed, the vault checks the same at each pass itself)

        def pytest_sessionfinish(self, session, exitstatus):
            finish()

    grader = Grader()
    ours = dict((n, getattr(grader, n)) for n in dir(Grader) if n.startswith("pytest_"))
    watched += [("launcher " + n, Grader, n, _snapshot(_static(Grader, n))) for n in ours]
    watched += [
        ("launcher " + f.__name__, f, None, _snapshot(f))
        for f in (check, verdict, finish, graded_code, post, tampered)
        if isinstance(f, types.FunctionType)
    ]
    # The vault keeps its own copy and checks it at each pass and at the end: `check` below is
    # reachable from the plugin pytest holds, the vault is not.
    post("watch", "callables", tuple(watched))
    return grader, finish


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: deepswe_pytest.py SETTINGS_FD [pytest args...]\n")
        return 64
    since, cwd, here = time.time(), os.getcwd(), os.path.dirname(os.path.abspath(__file__))
    settings = seal.read_settings(int(argv[1]))
    args = argv[2:]
    # pytest from the environment alone, then the path `python -m pytest` would have.
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if not _under(p, here) and not _repository_path(p, cwd)]
    import pluggy

    try:
        import pytest  # noqa: E402
    except ImportError:
        sys.path[:] = saved
        spec = importlib.util.find_spec("pytest")
        if spec is not None and spec.origin and _repository_path(os.path.dirname(spec.origin), cwd):
            # pytest-dev/pytest's own rows: the runner is the code under test
            sys.stderr.write(
                "deepswe-grader: pytest is the repository's own (%s): strict rules cannot run the "
                "code under test as their runner; grade this task under swebench rules\n"
                % spec.origin
            )
            return 78
        raise

    runner_dirs = [os.path.dirname(m.__file__) for m in (pytest, pluggy, unittest.case)]
    runner_dirs.append(os.path.dirname(importlib.import_module("_pytest").__file__))
    handoff = {}
    post, trust, tampered = seal.install(settings, "pytest.main", runner_dirs, handoff=handoff)
    _hand_over(handoff, _pass_hook)
    installed = _pytest11()
    grader, finish = _plugin(post, tampered, trust, settings, cwd, since, installed)
    del settings  # the key is the vault's alone
    if any(name.startswith("xdist") for name in installed):
        # pytest-xdist (turned on by a row's addopts: aiohttp's `-n auto`) would run the tests in
        # workers the grader does not own: the grader's run is one process
        args = args + ["-n", "0", "--dist", "no"]
    sys.path[:] = [cwd] + [p for p in saved if not _under(p, here)]
    sys.argv = [getattr(pytest, "__file__", "pytest")] + args
    post("arm")  # this frame's locals, from here on the same until the report closes
    code = int(pytest.main(args, plugins=[grader]))
    finish()
    post("finish", code)
    return code


if __name__ == "__main__":
    _exit(main(sys.argv))
