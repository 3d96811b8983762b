"""The grader's seal: what proves a report genuine, and the capabilities a takeover needs, kept from
the code under test that shares the test process.

Imported by the grader's launchers (deepswe_pytest.py, deepswe_unittest.py, deepswe_repro.py) from
their own folder
before any repository code runs:

    settings (an inherited descriptor: read, closed) -> install(settings) -> post(kind, ...)

The vault. Root gives each run a random key, on a descriptor the launcher reads and closes before
any repository code runs (no file, argument or environment variable holds it). From Python 3.8 the
key lives only in the closure of an audit hook (PEP 578): the runtime keeps the hook, nothing the
process can reach refers to it (gc enumeration, which would find it, is refused below), it cannot
be removed, and it runs untraced. The launchers hand it what to report as audit events
(`sys.audit(EVENT, kind, ...)`); it writes each line to the report pipe and folds it into an
HMAC-SHA256 keyed with the key; the closing line carries the MAC of everything before it, and
root, holding the key, checks it (`deepswe.env.grading.owned.read_report`). So:
- a line written to the pipe by anything else (os.write on the descriptor, a relay dup2'd over it
  that drops or rewrites lines) breaks the MAC: the run is tampered;
- a line posted through the hook by the code under test must agree with the launcher's own post:
  each test's outcome for each phase is taken once, and a second, different one is tampered; the
  tests collected are posted once (a second list is tampered), and the closing line says how many
  of them were never reported;
- the closing line is written only for a post from the launcher's own main frame, the one object
  the code under test cannot make: a run cut short (os._exit, a killed process) has none and is
  rejected; one closed early by the code under test is tampered.
Below Python 3.8 there is no audit hook: the vault is a closure of the launcher (its key reachable
through gc or frames), and nothing below is sealed. The report says which (`sealed=0|1`).

The seal: the same hook refuses (PermissionError) and records as tampered what a takeover needs and
no fix or test does, where the code asking is the repository's (`Trust.repository_code`):
- enumerating objects (`gc.get_objects/get_referrers/get_referents`) and other threads' frames
  (`sys._current_frames`): the only ways to the hook's closure;
- adding an audit hook; ctypes' audited memory reads (`string_at`, `wstring_at`, `from_address`)
  and symbol look-ups;
- replacing the code of a function of the runner's (pytest, pluggy, unittest), of the grader's,
  or of a protected file (the graded tests, every conftest.py), or the defaults of the grader's;
- opening the grader's folder, any `/proc/<pid>/mem`, or bytecode of a protected file that root
  did not write (pytest's assertion-rewrite cache: the tester cannot write the protected folders'
  `__pycache__`, root made them; a cache elsewhere, through `sys.pycache_prefix`, is this).
What it cannot stop: ctypes reaches memory without an audit event once imported (`ctypes.cast`),
so code that finds OpenSSL's HMAC state in the process's memory can forge a report; module and
class attributes can be rebound without an event (the launchers check those by identity). Frames:
`f_back` is read without an event, and a trace or profile function the code under test sets is
called for the launcher's own frames, where (Python 3.8-3.12) what it writes to `f_locals` is
copied back into them; from Python 3.13 `f_locals` writes through with no tracer at all. The
reproduction's launcher refuses setting a trace or profile function (`tracing=False`); the pytest
launcher cannot refuse it outright (coverage.py's own tests set one), so it refuses it only while
pytest makes and logs a report (the window its "window" posts open and close) and checks that none
of the repository's is running when the window opens; the unittest launcher does neither yet, and
3.13's write-through is open in all three.

Standalone: the standard library only, in the syntax of the oldest Python a task image may have.
"""

import functools
import hashlib
import hmac
import os
import sys
import types

EVENT = "deepswe.grader"
STARTED = "# deepswe-grader report v3"
HEADER = "=" * 27 + " short test summary info " + "=" * 28
MARK = "# deepswe-grader: "
SEALED = hasattr(sys, "addaudithook")
# The events that set a trace or profile function (the all-threads ones from Python 3.12).
TRACING = (
    "sys.settrace",
    "sys.setprofile",
    "sys._settraceallthreads",
    "sys._setprofileallthreads",
)


class Trust(object):
    """Which code is whose: the runner's and the grader's files, the protected repository files, and
    code that provably comes from a file (equal to what compiling that file gives)."""

    def __init__(self, workdir, protected, runner_dirs, grader_dir):
        self.workdir = os.path.realpath(workdir)
        self.protected = set(os.path.realpath(os.path.join(workdir, p)) for p in protected)
        self.runner_dirs = [os.path.realpath(d).rstrip(os.sep) + os.sep for d in runner_dirs]
        self.grader_dir = os.path.realpath(grader_dir).rstrip(os.sep) + os.sep
        # what only root reads: the settings, the report as root keeps it
        self.private = self.grader_dir + "private"
        self.rewrite = None  # set by the pytest launcher: path -> code, as pytest rewrites it
        self._codes, self._judged = {}, {}

    def in_repository(self, path):
        """Whether `path` (real) is the repository's: under the working directory, but for an
        environment's package folders kept there (R2E-Gym's /testbed/.venv)."""
        parts = path.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return path == self.workdir or path.startswith(self.workdir + os.sep)

    def is_protected(self, path):
        """Whether `path` (real) is a protected repository file: a graded file, or a conftest.py
        (root's while the tests run, tester.py)."""
        if path in self.protected:
            return True
        return os.path.basename(path) == "conftest.py" and self.in_repository(path)

    def grader_file(self, path):
        return os.path.realpath(path).startswith(self.grader_dir)

    def runner_file(self, path):
        path = os.path.realpath(path)
        return self.is_protected(path) or any(
            path.startswith(d) for d in self.runner_dirs + [self.grader_dir]
        )

    def _codes_by(self, path, how):
        """The code objects compiling `path` gives, as written (how 0) or as pytest rewrites it
        (how 1); an empty set when it cannot be read or compiled."""
        key = (path, how)
        if key not in self._codes:
            make = _compiled if how == 0 else self.rewrite
            found = set()
            try:
                top = make(path) if make else None
            except Exception:  # a file that does not compile, or a rewriter that fails
                top = None
            if top is not None:
                _walk(top, found)
            self._codes[key] = found
        return self._codes[key]

    def holds(self, path, code):
        """Whether compiling `path` gives `code`: as written first, then (only then: rewriting
        costs a parse and a compile) as pytest rewrites it."""
        return code in self._codes_by(path, 0) or code in self._codes_by(path, 1)

    def codes_of(self, path):
        """Every code object compiling the file at `path` gives (as it is, and as pytest rewrites
        it)."""
        return self._codes_by(path, 0) | self._codes_by(path, 1)

    def from_its_file(self, code):
        """Whether `code` is code its own file holds (what a fake file name cannot give)."""
        key = id(code)
        if key not in self._judged:
            path = code.co_filename
            self._judged[key] = (code, os.path.isfile(path) and self.holds(path, code))
        return self._judged[key][1]

    def repository_code(self, code):
        """Code the repository (the patch) controls: from a repository file that is not
        protected, from a file root does not own, or not provably from its file."""
        path = os.path.realpath(code.co_filename)
        if self.in_repository(path) and not self.is_protected(path):
            return True
        try:
            owner = os.stat(path).st_uid
        except OSError:
            return True  # code from no file: exec'd text
        return owner != 0 or not self.from_its_file(code)


def _compiled(path):
    with open(path, "rb") as f:
        source = f.read()
    return compile(source, path, "exec", dont_inherit=True, optimize=sys.flags.optimize)


def _walk(code, found):
    found.add(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _walk(const, found)


def _caller(skip_dirs):
    """The code object of the nearest Python frame outside this file and `skip_dirs` (the ctypes
    package, importlib's): who asked for what the hook is checking."""
    frame, here = sys._getframe(1), _caller.__code__.co_filename
    while frame is not None:
        path = frame.f_code.co_filename
        mine = path == here or path.startswith("<frozen")
        if not mine and not any(path.startswith(d) for d in skip_dirs):
            return frame.f_code
        frame = frame.f_back
    return None


def hexes(text):
    """`text` as its UTF-8 bytes in hex; "-" for None."""
    return "-" if text is None else text.encode("utf-8", "replace").hex()


def _vault(key, fd, main_frame, runner, shared=None, from_grader=None):
    """The report's writer and its rules: handle(kind, args) for each post. `shared["window"]`
    (set by a "window" post from the grader's own code, `from_grader(code)`) is open while pytest
    makes and logs a report: the seal refuses setting a trace function then."""
    shared = {} if shared is None else shared
    mac = hmac.new(key, digestmod=hashlib.sha256)
    write, getframe = os.write, sys._getframe
    state = {"closed": False, "collected": None, "said": set(), "unreported": 0}
    phases = {}  # (key, phase) -> word, for reports that must be unique
    reported = set()
    shown = {}

    def line(text):
        data = (text.replace("\n", " ").replace("\r", " ") + "\n").encode("utf-8", "replace")
        mac.update(data)
        while data:
            data = data[write(fd, data) :]

    def tampered(reason):
        if reason not in state["said"]:
            state["said"].add(reason)
            line(MARK + "TAMPERED " + reason)

    def status(args):
        # (key, phase, word, exact): one test's outcome in one phase. An exact report (pytest's own
        # TestReport, unittest's results) is taken once: a second, different one is tampered.
        key, phase, word, exact = args
        if not (type(key) is str and type(phase) is str and type(word) is str):
            return tampered("a report posted with values that are not strings")
        collected = state["collected"]
        if collected is not None and key not in collected:
            return tampered("a report for a test that was not collected: " + key[:200])
        if exact is True:
            before = phases.get((key, phase))
            if before is not None and before != word:
                return tampered("%s reported %s, then %s (%s)" % (key[:200], before, word, phase))
            phases[(key, phase)] = word
        reported.add(key)
        if word:
            line(word + " " + shown.get(key, key))

    def collected(args):
        # [(key, shown), ...]: what the runner will run, once; `shown` is the id the summary prints.
        (pairs,) = args
        if state["collected"] is not None:
            return tampered("the tests collected were posted twice")
        keys = set()
        for pair in pairs:
            if type(pair) is not tuple or len(pair) != 2:
                return tampered("a collected test posted with values that are not strings")
            key, show = pair
            if type(key) is not str or type(show) is not str:
                return tampered("a collected test posted with values that are not strings")
            keys.add(key)
            shown[key] = show
        state["collected"] = keys

    def collect_error(args):
        (where,) = args
        if type(where) is str:
            line("ERROR " + where)

    def reproduction(args):
        # (last, raised, exception, types): the reproduction's result (deepswe_repro.py), once,
        # and only from the launcher's main frame, as the closing line.
        if getframe(3) is not main_frame:
            return tampered("a reproduction result posted by something other than the launcher")
        last, raised, exception, types_ = args
        if not (
            type(last) in (str, type(None))
            and type(raised) is bool
            and type(exception) in (str, type(None))
            and type(types_) is tuple
            and all(type(t) is str for t in types_)
        ):
            return tampered("a reproduction result posted with values of the wrong types")
        if state.get("result"):
            return tampered("a second reproduction result")
        state["result"] = True
        # each text as UTF-8 in hex ("-": none): root reads it back without a parser
        hexed = [hexes(last), "1" if raised else "0", hexes(exception)]
        hexed.append(",".join(hexes(t) for t in types_) or "-")
        line(MARK + "REPRODUCTION " + " ".join(hexed))

    def finish(args):
        # Only from the launcher's main frame: the closing line ends what root reads.
        (code,) = args
        # finish <- handle <- the hook (or post, below 3.8) <- the caller of sys.audit
        if getframe(3) is not main_frame or type(code) is not int:
            return tampered("the report was closed by something other than the launcher")
        keys = state["collected"] or set()
        facts = "collected=%d,unreported=%d,sealed=%d" % (
            len(keys),
            len(keys - reported),
            1 if SEALED else 0,
        )
        head = "deepswe-grader: %s returned %d %s" % (runner, code, facts)
        mac.update(head.encode("utf-8"))
        tail = "=" * 10 + " " + head + " " + mac.hexdigest() + " " + "=" * 10 + "\n"
        data = tail.encode("utf-8")
        while data:
            data = data[write(fd, data) :]
        state["closed"] = True
        os.close(fd)

    def window(args):
        (is_open,) = args
        caller = getframe(3).f_code
        if type(is_open) is not bool or from_grader is None or not from_grader(caller):
            return tampered("the report window was moved by something other than the launcher")
        shared["window"] = is_open

    kinds = {
        "window": window,
        "status": status,
        "collected": collected,
        "collect_error": collect_error,
        "finish": finish,
        "reproduction": reproduction,
        "tampered": lambda args: tampered(args[0]) if type(args[0]) is str else None,
    }

    def handle(kind, args):
        if state["closed"]:
            return
        run = kinds.get(kind)
        if run is not None:
            run(args)

    line(STARTED)
    line(HEADER)
    return handle, tampered


def _seal(trust, tampered, tracing=True, shared=None):
    """The capability events: event -> check(args), each raising PermissionError to refuse.
    `tracing` False: setting a trace or profile function is refused too, whoever asks; else
    refused where the repository asks (through the standard library too: threading's
    settrace_all_threads) while `shared["window"]` is open."""
    shared = {} if shared is None else shared
    stdlib = os.path.dirname(os.__file__) + os.sep
    stat_ = os.stat
    ctypes_dir = os.path.dirname(os.__file__) + os.sep + "ctypes" + os.sep
    machinery = [os.path.dirname(os.__file__) + os.sep + "importlib" + os.sep, ctypes_dir]

    def refuse(what):
        tampered(what)
        raise PermissionError("deepswe grader: %s is sealed while the tests run" % what)

    def asked_by_repository():
        code = _caller(machinery)
        return code is None or trust.repository_code(code)

    def enumeration(name):
        def check(args):
            if asked_by_repository():
                refuse("the code under test called " + name)

        return check

    def always(name):
        return lambda args: refuse("the code under test called " + name)

    def setattr_(args):
        obj, name = args[0], args[1]
        if not isinstance(obj, types.FunctionType):
            return
        path = obj.__code__.co_filename
        # __code__ of any runner's, grader's or protected function; defaults only of the grader's
        # (which binds what it needs as defaults): tests copy functions and set their defaults
        # (boltons' funcutils)
        if name == "__code__" and trust.runner_file(path):
            refuse("%s of %s (%s) replaced" % (name, obj.__qualname__, path))
        if name in ("__defaults__", "__kwdefaults__") and trust.grader_file(path):
            refuse("%s of %s (%s) replaced" % (name, obj.__qualname__, path))

    def open_(args):
        path = args[0]
        if isinstance(path, bytes):
            path = path.decode("utf-8", "replace")
        if not isinstance(path, str):
            return  # a descriptor
        real = os.path.realpath(path)
        if real == trust.private or real.startswith(trust.private + os.sep):
            refuse("opening the grader's private files (%s)" % path)
        if real.startswith("/proc/") and real.endswith("/mem"):
            refuse("opening process memory (%s)" % path)
        if real.endswith(".pyc"):
            source = _source_of(real)
            if source is not None and trust.is_protected(source):
                try:
                    owner = stat_(real).st_uid
                except OSError:
                    return
                if owner != 0:
                    refuse("bytecode of %s that root did not write (%s)" % (source, path))

    def ctypes_(name):
        def check(args):
            if asked_by_repository():
                refuse("the code under test called ctypes' " + name)

        return check

    checks = {
        "sys._current_frames": always("sys._current_frames"),
        "sys.addaudithook": always("sys.addaudithook"),
        "object.__setattr__": setattr_,
        "open": open_,
    }
    for name in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
        checks[name] = enumeration(name)
    for name in ("ctypes.string_at", "ctypes.wstring_at", "ctypes.cdata", "ctypes.dlsym"):
        checks[name] = ctypes_(name)

    def asker_past_stdlib():
        # the nearest frame that is not this file's nor the standard library's (threading's
        # settrace_all_threads sets a trace function the repository gave it)
        frame, here = sys._getframe(2), asker_past_stdlib.__code__.co_filename
        while frame is not None:
            path = frame.f_code.co_filename
            in_stdlib = path.startswith(stdlib) and "-packages" + os.sep not in path
            if path != here and not path.startswith("<frozen") and not in_stdlib:
                return frame.f_code
            frame = frame.f_back
        return None

    def traced(name):
        def check(args):
            if not shared.get("window"):
                return
            code = asker_past_stdlib()
            if code is None or trust.repository_code(code):
                refuse("the code under test called %s while pytest made a report" % name)

        return check

    for name in TRACING:
        checks[name] = always(name) if not tracing else traced(name)
    return checks


def _source_of(pyc):
    """`a/__pycache__/b.cpython-311-pytest-8.3.4.pyc` -> `a/b.py`; under a pycache prefix the
    same, the prefix's folders mirroring the source's."""
    folder, name = os.path.split(pyc)
    prefix = getattr(sys, "pycache_prefix", None)
    if prefix and pyc.startswith(os.path.realpath(prefix) + os.sep):
        base = os.sep + os.path.relpath(folder, os.path.realpath(prefix))
    elif os.path.basename(folder) == "__pycache__":
        base = os.path.dirname(folder)
    else:
        return None
    return os.path.join(base, name.split(".")[0] + ".py")


def read_settings(fd):
    """The settings root passed on descriptor `fd` (JSON), the descriptor closed."""
    import json

    with os.fdopen(fd, "r") as f:
        return json.load(f)


def install(settings, runner, runner_dirs, tracing=True):
    """The vault (and from Python 3.8 the seal) for this process; returns (post, trust, tampered):
    post(kind, *args) reports through the vault, trust judges code. Called from the launcher's
    main function (its frame is the only one that may close the report). `tracing` False: no trace
    or profile function may be set (the reproduction's launcher)."""
    fd = int(settings["report_fd"])
    os.set_inheritable(fd, False)  # not to the tests' subprocesses
    trust = Trust(os.getcwd(), settings.get("protected", []), runner_dirs, settings["grader_dir"])
    shared = {"window": False}

    def from_grader(code):
        return trust.grader_file(code.co_filename) and trust.from_its_file(code)

    handle, tampered = _vault(
        bytes.fromhex(settings["key"]), fd, sys._getframe(1), runner, shared, from_grader
    )
    if not SEALED:  # Python < 3.8: no audit hooks

        def post(kind, *args):
            handle(kind, args)

        return post, trust, tampered
    checks = _seal(trust, tampered, tracing, shared)

    def hook(event, args):
        if event == EVENT:
            handle(args[0], args[1:])
            return
        check = checks.get(event)
        if check is not None:
            check(args)

    sys.addaudithook(hook)
    return (
        functools.partial(sys.audit, EVENT),
        trust,
        lambda reason: sys.audit(EVENT, "tampered", reason),
    )
