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
The watch: the launcher registers its watched callables ("watch") before any repository code
runs; the vault keeps its own copy and, at every pass and at the end, finds each the same object
(for a function the same code, defaults and closure) or replaced by trusted code, judged by the
seal's own Trust (a private class over a private copy of this module's globals): the launcher's
own checks are reachable from the plugin pytest holds, and could be disarmed.
The private scope: the seal's Trust, the vault and the capability checks read a copy of this
module's globals made before any repository code runs (_sealed_scope), with their own builtins,
copies of os, sys and types, the kernel's resolution of a path (_kernel_paths), an HMAC of
hashlib's C objects (_hmac_sha256) and pytest's rewriting done where no code under test ran, in
the launcher before any repository code or in a child interpreter (_clean_rewriter): what they read,
the code under test cannot rebind (os.path.realpath, builtins.open, ast.parse each once made the
package's own function pass for pytest's).
The pytest watch: what the pytest launcher alone once decided (its state is reachable, and was
emptied), the vault decides itself from pytest's objects read as stored (_pytest_watch): the
function pytest is about to call for a graded test, the hook implementations a test runs through
and pluggy's hook execution, as pytest calls each test and at each pass.
What it cannot stop: ctypes reaches memory without an audit event once imported (`ctypes.cast`),
so code that finds OpenSSL's HMAC state in the process's memory can forge a report; module and
class attributes can be rebound without an event (the launchers check those by identity). Frames:
`f_back` is read without an event, and a trace or profile function the code under test sets is
called for the launcher's own frames, where (Python 3.8-3.12) what it writes to `f_locals` is
copied back into them; from Python 3.13 `f_locals` writes through with no tracer at all. The
reproduction's launcher refuses setting a trace or profile function (`tracing=False`); the others
cannot refuse it outright (coverage.py's own tests set one), so the seal refuses one of the code
under test's from the moment a test of a protected file begins (pytest about to call it, or the
first part unittest's run begins: traced_from, where one already set is tampered) until its
report is posted, and while pytest makes and logs any report (the window its "window" posts
open and close); the launchers check that none of the repository's is running at each report.
A Python signal handler runs between any two bytecodes, this hook's among them, on top of the
frame running then, from whose closures the vault's state is reached: no handler set after the
seal runs while a frame of the private scope is on the stack (it is raised again once the hook has
returned), and what the code under test reaches of the guard holds nothing of the seal's
(_guard_signals). Not held: a gc callback (`gc.callbacks`), a finalizer or a weakref callback of
cyclic garbage runs when a collection does, the hook's and the vault's bytecodes among those
moments, and walks its own frame's `f_back` into them.
Against 3.13's write-through (and a tracer's write on older Pythons), each launcher
posts "arm" from its main frame before any test runs: the vault keeps that frame's locals and, at
the closing post, finds each the same object or the run tampered; the pytest launcher on 3.13
also holds ("frames") the locals of every frame waiting for each test phase and for collection,
compared when it returns (what a test could rebind: `CallInfo.from_call`'s `cls`, which makes the
call's outcome). Not held: generator frames suspended off the stack (reached through `gi_frame`),
a thread that rebinds a frame's local after its phase returned and before it is read (a race),
and the unittest launcher's frames on 3.13 beyond its main (its pass needs the parts the vault saw).
unittest's own outcome objects are reachable from the test's frame (`self._outcome`), so for a test
unittest's run runs, the vault does not believe a pass it did not see: `watch_parts` wraps
`_Outcome.testPartExecutor`, and the vault reads from the thread, when each part ends, whether an
exception escaped it; a PASSED needs three parts seen ending, none raising (the "part" and
"expect" posts, the launchers' only).

Standalone: the standard library only, in the syntax of the oldest Python a task image may have.
"""

import _imp
import functools
import hashlib
import inspect
import marshal
import os
import sys
import time
import types

EVENT = "deepswe.grader"
STARTED = "# deepswe-grader report v3"
HEADER = "=" * 27 + " short test summary info " + "=" * 28
MARK = "# deepswe-grader: "
SEALED = hasattr(sys, "addaudithook")
_sys_module = sys
# An object's address, as id() gives it but without id()'s audit event (the checks ask often).
_addr = object.__hash__
# A passing test that unittest's own TestCase.run runs ends three parts at least: setUp, the test,
# tearDown (and each cleanup): Python 3.8 to 3.13 alike.
PARTS = 3
# The events that set a trace or profile function (the all-threads ones from Python 3.12), or a
# sys.monitoring callback (3.12: one reads and, from 3.13, writes the frames it is called for).
TRACING = (
    "sys.settrace",
    "sys.setprofile",
    "sys._settraceallthreads",
    "sys._setprofileallthreads",
    "sys.monitoring.register_callback",
)


class Trust(object):
    """Which code is whose: the runner's and the grader's files, the protected repository files, and
    code that provably comes from a file (equal to what compiling that file gives)."""

    def __init__(self, workdir, protected, runner_dirs, grader_dir, changed=()):
        self.workdir = os.path.realpath(workdir)
        self.protected = set(os.path.realpath(os.path.join(workdir, p)) for p in protected)
        # every repository path the patch changed
        self.changed = set(os.path.realpath(os.path.join(workdir, p)) for p in changed)
        self.runner_dirs = [os.path.realpath(d).rstrip(os.sep) + os.sep for d in runner_dirs]
        self.grader_dir = os.path.realpath(grader_dir).rstrip(os.sep) + os.sep
        # the owner root's files show here: 0, or in the user namespace the tests may run in
        # (tester.py), the overflow uid every id outside it shows as (the tester's own files
        # show as 0 there); root made the grader's folder
        try:
            self.root_uid = os.stat(self.grader_dir).st_uid
        except OSError:
            self.root_uid = 0
        # what only root reads: the settings, the report as root keeps it
        self.private = self.grader_dir + "private"
        self.rewrite = None  # set by the pytest launcher: path -> code, as pytest rewrites it
        self.clean = None  # the seal's own: [interpreter, folders, _clean_rewriter's pair]
        self._codes, self._judged = {}, {}
        # per code object (kept, so its id is never reused): its file's real path, and whether it
        # is the repository's / a repository test file's. A code object's file name never changes,
        # so the first answer stands; it runs at every test part, where realpath's lstat per
        # path component made up a third of the launcher's own time.
        self._paths, self._repo, self._tests = {}, {}, {}
        # path -> runner_file's / grader_file's answer, where it cannot change (_kept)
        self._runner, self._grader, self._stable = {}, {}, {}
        self.loaded = {}  # a grader file's real path -> its code objects (remember_grader)
        # _addr(code) -> code: the runner's code objects there were before any repository code
        # ran (remember_runner), the runner's whoever compiles what under its file names later
        self.known = {}

    def remember_runner(self, modules):
        """Every function's and method's code of the runner's modules loaded now: trusted as
        they are, without compiling their files to find them there."""
        for module in modules:
            if not isinstance(module, types.ModuleType):
                continue
            where = vars(module).get("__file__") or ""  # no getattr: lazy modules import on it
            if not where or not self.runner_file(where):
                continue
            if self.is_protected(os.path.realpath(where)):
                continue
            for code in module_codes(module):
                self.known[_addr(code)] = code

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
        return self._kept(self._grader, path, lambda real: real.startswith(self.grader_dir))

    def runner_file(self, path):
        return self._kept(self._runner, path, self._roots)

    def _kept(self, memo, path, judge):
        """judge(the real path of `path`), kept in `memo` where it cannot change: a "no" (the
        stricter answer), and a "yes" for a path that is its own real path, whose every folder
        is root's and not the tester's to replace or move. The vault asks at every post and the
        launcher per module: realpath's lstat per component, or the kernel's open, ran thousands
        of times a run."""
        found = memo.get(path) if isinstance(path, str) else None
        if found is not None:
            return found
        real = os.path.realpath(path)
        found = bool(judge(real))
        if isinstance(path, str) and (not found or real == path):
            memo[path] = found
        return found

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
        """Whether compiling `path` gives `code`: the grader's files as they were loaded
        (remember_grader), then as written, then (only then: rewriting costs a parse and a
        compile) as pytest rewrites it; a graded file under pytest the other way round (its
        rewrite is made once already, and its code is the rewrite's)."""
        if code in self.loaded.get(path, ()):
            return True
        if self.rewrite is not None and path in self.protected:  # pytest runs its rewrite
            return code in self._codes_by(path, 1) or code in self._codes_by(path, 0)
        return code in self._codes_by(path, 0) or code in self._codes_by(path, 1)

    def remember_grader(self, modules, frame):
        """The code objects of the grader's files as Python loaded them before any repository
        code ran (the modules' functions and methods, nested ones too, and the code of the frames
        on the stack now: the launcher's own module code): what compiling those root-owned files
        gives, found without compiling them again (a launcher run compiled its 110 KB twice)."""
        found = set()
        for module in modules:
            if not isinstance(module, types.ModuleType):
                continue
            where = vars(module).get("__file__") or ""  # no getattr: lazy modules import on it
            if where and self.grader_file(where):
                for code in module_codes(module):
                    _walk(code, found)
        while frame is not None:
            _walk(frame.f_code, found)
            frame = frame.f_back
        for code in found:  # by the name holds is asked with: the code's own file name
            if self.grader_file(code.co_filename):
                self.loaded.setdefault(code.co_filename, set()).add(code)

    def codes_of(self, path):
        """Every code object compiling the file at `path` gives (as it is, and as pytest rewrites
        it)."""
        return self._codes_by(path, 0) | self._codes_by(path, 1)

    def from_its_file(self, code):
        """Whether `code` is code its own file holds (what a fake file name cannot give)."""
        key = _addr(code)
        if key not in self._judged:
            path = code.co_filename
            self._judged[key] = (code, os.path.isfile(path) and self.holds(path, code))
        return self._judged[key][1]

    def code_path(self, code):
        """The real path of the file `code` names, looked up once per code object (a frozen
        module's name, `<frozen posixpath>`, as it is)."""
        found = self._paths.get(_addr(code))
        if found is None or found[0] is not code:
            name = code.co_filename
            real = self._stable.get(name) if isinstance(name, str) else None
            if real is None:
                real = name if _frozen_name(name) else os.path.realpath(name)
                if real == name and self._roots(real):  # kept by name (_kept's reasons)
                    self._stable[name] = real
            found = self._paths[_addr(code)] = (code, real)
        return found[1]

    def _roots(self, real):
        """Whether `real` is a protected file or in the runner's or the grader's folders: root's,
        each folder above it too, none the tester's to replace or move."""
        return self.is_protected(real) or any(
            real.startswith(d) for d in self.runner_dirs + [self.grader_dir]
        )

    def frozen(self, code):
        """Whether `code` is code of the frozen module its file name names (Python 3.11 on
        freezes os, posixpath and others into the interpreter): what the interpreter's own frozen
        bytes give, not merely the name (any code can be compiled under it)."""
        name = _frozen_name(code.co_filename)
        if not name:
            return False
        key = (code.co_filename, "frozen")
        if key not in self._codes:
            found = set()
            try:
                top = _imp.get_frozen_object(name)
            except Exception:  # not frozen in this interpreter
                top = None
            if top is not None:
                _walk(top, found)
            self._codes[key] = found
        return code in self._codes[key]

    def _once(self, memo, code, judge):
        found = memo.get(_addr(code))
        if found is None or found[0] is not code:
            found = memo[_addr(code)] = (code, judge(code))
        return found[1]

    def test_code(self, code):
        """Whether `code` is a repository test file's own (a tests/test/testing/r2e_tests folder,
        test_*.py, *_test.py, conftest.py), as its file holds it (judged once per code object)."""
        return self._once(self._tests, code, self._test_code)

    def _test_code(self, code):
        path = self.code_path(code)
        if not self.in_repository(path):
            return False
        rel = path[len(self.workdir) + 1 :].split(os.sep)  # under it: in_repository
        in_tests = any(p in ("tests", "test", "testing", "r2e_tests") for p in rel[:-1])
        name = rel[-1]
        named = name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")
        if path in self.changed and not self.is_protected(path):
            return False
        return (in_tests or named) and self.from_its_file(code)

    def repository_code(self, code):
        """Code the repository (the patch) controls: from a repository file that is not
        protected, from a file root does not own, or not provably from its file (judged once per
        code object)."""
        return self._once(self._repo, code, self._repository_code)

    def _repository_code(self, code):
        if self.known.get(_addr(code)) is code:
            return False  # the runner's, loaded before any repository code ran
        if _frozen_name(code.co_filename):
            return not self.frozen(code)
        path = self.code_path(code)
        if self.in_repository(path) and not self.is_protected(path):
            return True
        try:
            owner = os.stat(path).st_uid
        except OSError:
            return True  # code from no file: exec'd text
        return owner != self.root_uid or not self.from_its_file(code)


def _hmac_sha256(key, sha256=hashlib.sha256, _bytes=bytes, _len=len):
    """HMAC-SHA256 (RFC 2104) as (update, hexdigest) over hashlib's own hash objects, whose types
    no code can change: hmac.HMAC is a Python class, and a method of it rebound by the code under
    test (no audit event sees a class attribute stored) would be handed the vault's MAC state."""
    block = 64
    if _len(key) > block:
        key = sha256(key).digest()
    key = key + b"\0" * (block - _len(key))
    inner = sha256(_bytes(b ^ 0x36 for b in key))
    outer = _bytes(b ^ 0x5C for b in key)

    def hexdigest():
        return sha256(outer + inner.digest()).hexdigest()

    return inner.update, hexdigest


class _Frozen(object):
    """A module's attributes as they were when the seal was made (its own copy: rebinding the
    module's later changes nothing here), some replaced."""

    def __init__(self, attrs, **replaced):
        self.__dict__.update(attrs)
        self.__dict__.update(replaced)


def _kernel_paths(
    _open=os.open,
    _close=os.close,
    _readlink=os.readlink,
    _stat=os.stat,
    _getcwd=os.getcwd,
    _isinstance=isinstance,
    _str=str,
    _OSError=OSError,
    _len=len,
    _path_flags=getattr(os, "O_PATH", 0) | getattr(os, "O_CLOEXEC", 0),
    _fallback=os.path.realpath,
):
    """(path functions, busy): the few of os.path the seal's judgments use, made of the builtins
    bound here. `realpath` asks the kernel (an O_PATH descriptor's /proc/self/fd link): the shared
    os.path, and every module function it calls, can be rebound by the code under test (no audit
    event sees a module attribute stored) to place its own file in the runner's folder. `busy()`:
    this thread is inside realpath, whose own open the seal's "open" check lets through."""
    from _thread import get_ident as _ident

    resolving = set()
    kernel = _path_flags and os.path.isdir("/proc/self/fd")

    def split(path):
        cut = path.rfind("/") + 1
        head, tail = path[:cut], path[cut:]
        if head and head != "/" * _len(head):
            head = head.rstrip("/")
        return head, tail

    def join(path, *more):
        for part in more:
            if part.startswith("/"):
                path = part
            elif not path or path.endswith("/"):
                path = path + part
            else:
                path = path + "/" + part
        return path

    def realpath(path):
        if not _isinstance(path, _str):
            path = _str(path)
        if not kernel:
            return _fallback(path)
        if not path.startswith("/"):
            path = join(_getcwd(), path)
        me = _ident()
        resolving.add(me)
        try:
            fd = _open(path, _path_flags)
        except _OSError:
            fd = None
        finally:
            resolving.discard(me)
        if fd is None:  # not there (yet): its folder resolved, the rest as written
            head, tail = split(path)
            if not tail or head == path:
                return head or "/"
            base = realpath(head)
            if tail == ".":
                return base
            if tail == "..":
                return split(base)[0] or "/"
            return join(base, tail)
        try:
            return _readlink("/proc/self/fd/%d" % fd)
        finally:
            _close(fd)

    def isfile(path):
        try:
            return (_stat(path).st_mode & 0o170000) == 0o100000
        except _OSError:
            return False

    def busy():
        return _ident() in resolving

    functions = _Frozen(
        {},
        realpath=realpath,
        isfile=isfile,
        join=join,
        split=split,
        dirname=lambda path: split(path)[0],
        basename=lambda path: path[path.rfind("/") + 1 :],
    )
    return functions, busy


def _own(
    owner,
    attr,
    _mro=type.__dict__["__mro__"].__get__,
    _dict=type.__dict__["__dict__"].__get__,
    _vars=vars,
    _isinstance=isinstance,
    _type=type,
    _missing=object(),
):
    """What `owner.attr` is defined as, running no descriptor or __getattr__: what
    inspect.getattr_static finds for a module or a class, at a tenth of its cost (the launchers'
    checks and the vault's run it at every report). Builtins are bound here."""
    if _isinstance(owner, _type):
        for klass in _mro(owner):
            found = _dict(klass).get(attr, _missing)
            if found is not _missing:
                return found
        return None
    return _vars(owner).get(attr)


def _snap(obj):
    """What identifies a callable (as the launchers' _snapshot): the object; for a function also
    its code, defaults and closure's contents."""
    raw = obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj
    parts = [raw]
    if isinstance(raw, types.FunctionType):
        parts += [raw.__code__, raw.__defaults__]
        for cell in raw.__closure__ or ():
            try:
                parts.append(cell.cell_contents)
            except ValueError:
                parts.append(None)
    return parts


def _sealed_scope():
    """(scope, busy): a private copy of this module's globals, for the seal's own judgments (its
    Trust, the vault, the capability checks), made before any repository code runs. Each function
    of the module is copied to read it, and it holds its own builtins, its own copies of os, sys
    and types, and the kernel's path functions (_kernel_paths): rebinding a builtin, a module
    attribute or a function of this module later changes nothing for what reads this scope."""
    import builtins

    paths, busy = _kernel_paths()
    scope = dict(globals())
    scope["__builtins__"] = dict(vars(builtins))
    scope["os"] = _Frozen(vars(os), path=paths, sep="/")
    scope["sys"] = _Frozen(vars(sys))
    scope["types"] = _Frozen(vars(types))
    scope["_imp"] = _Frozen(vars(_imp))
    mine = globals()
    copies = {}
    for name, value in list(scope.items()):
        if isinstance(value, types.FunctionType) and value.__globals__ is mine:
            copies[value] = scope[name] = types.FunctionType(
                value.__code__, scope, value.__name__, None, value.__closure__
            )
    for original, copy in copies.items():  # defaults naming this module's functions: the copies
        if original.__defaults__:
            copy.__defaults__ = tuple(copies.get(d, d) for d in original.__defaults__)
    scope["Trust"] = _private_class(Trust, scope)
    return scope, busy


def _private_class(klass, scope):
    """A private copy of `klass` whose functions read `scope`."""
    body = {}
    for name, value in vars(klass).items():
        if isinstance(value, types.FunctionType):
            value = types.FunctionType(
                value.__code__, scope, value.__name__, value.__defaults__, value.__closure__
            )
        body[name] = value
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    return type(klass.__name__, (object,), body)


def _compiled(path):
    with open(path, "rb") as f:
        source = f.read()
    return compile(source, path, "exec", dont_inherit=True, optimize=sys.flags.optimize)


def module_codes(module):
    """The code objects of a module's functions and of its classes' methods (nested ones too)."""
    out, seen = [], set()

    def add(obj):
        # type checks only: getattr on an arbitrary module global can run its code (six.moves
        # imports a module on attribute access)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, property):
            obj = obj.fget
        if not isinstance(obj, types.FunctionType):
            return
        stack = [obj.__code__]
        while stack:
            c = stack.pop()
            if _addr(c) not in seen:
                seen.add(_addr(c))
                out.append(c)
                stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]

    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr in list(vars(value).values()):
                add(attr)
        else:
            add(value)
    return out


def rewritten(rewrite_test, path, config, whole=False):
    """The code pytest's `_rewrite_test` makes of the file at `path`, across pytest's signatures
    (3.x to 9.x); None where none fits. `whole`: what `_rewrite_test` returned (the file's stat
    or source hash, then the code)."""
    calls = [lambda: rewrite_test(config, __import__("py").path.local(path))]  # pytest < 5
    try:
        from pathlib import Path

        calls = [
            lambda: rewrite_test(Path(path), config),
            lambda: rewrite_test(path, config),
        ] + calls
    except ImportError:
        pass
    for call in calls:
        try:
            made = call()
            return made if whole else made[1]
        except Exception:  # another pytest's signature
            continue
    return None


def _frozen_name(path):
    """`<frozen posixpath>` -> "posixpath"; "" for any other file name."""
    if path.startswith("<frozen ") and path.endswith(">"):
        return path[8:-1]
    return ""


def _walk(code, found):
    found.add(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _walk(const, found)


def _clean_rewriter(
    executable,
    search,
    flag,
    _spawn=getattr(os, "posix_spawn", None),
    _pipe=os.pipe,
    _read=os.read,
    _write=os.write,
    _close=os.close,
    _waitpid=os.waitpid,
    _OSError=OSError,
    _Exception=Exception,
    _loads=marshal.loads,
    _fstat=os.fstat,
    _here=os.path.abspath(__file__),
):
    """(rewrite, prefetch): rewrite(path) -> the code pytest's assertion rewriting makes of
    the file at `path`, as a pytest no code under test touched makes it, or None. A child
    interpreter (`executable -I`, this file run as a script, the folders `search` after its own)
    reads the paths on its stdin and writes each code marshalled. The rewriting in this process runs
    pytest's code and the ast and pathlib it calls, all of which the code under test can rebind
    (a shared ast.parse made to give, for a file root owns, the package's own function), so the
    seal's Trust never asks it. `flag`: the run's enable_assertion_pass_hook. prefetch(paths)
    rewrites those files in this process (the graded files, called before any repository code
    runs); any other file gets a child interpreter of its own on first need, read at once."""
    argv = [executable, "-I", _here, "--rewrite", "1" if flag else "0"] + list(search)
    done = {}  # path -> code or None

    def start(paths):
        if _spawn is None:
            return None
        r_in, w_in = _pipe()
        r_out, w_out = _pipe()
        try:
            actions = [
                (os.POSIX_SPAWN_DUP2, r_in, 0),
                (os.POSIX_SPAWN_DUP2, w_out, 1),
                (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
            ]
            pid = _spawn(executable, argv, {"PATH": "/usr/bin:/bin"}, file_actions=actions)
        except _OSError:
            for fd in (r_in, w_in, r_out, w_out):
                _close(fd)
            return None
        _close(r_in)
        _close(w_out)
        data = "\0".join(paths).encode("utf-8", "surrogateescape")
        try:
            while data:
                data = data[_write(w_in, data) :]
        except _OSError:
            pass
        _close(w_in)
        return (list(paths), pid, r_out, ident(r_out))

    def ident(fd):
        try:
            st = _fstat(fd)
        except _OSError:
            return None
        return (st.st_dev, st.st_ino)

    def finish(job):
        paths, pid, r_out, mine = job
        chunks = []
        # a descriptor closed meanwhile (a test's closerange) may since name another file
        while ident(r_out) == mine:
            chunk = _read(r_out, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        if ident(r_out) == mine:
            _close(r_out)
        else:
            chunks = []
        _waitpid(pid, 0)
        if not chunks:
            return  # not read: each path gets a child of its own when asked
        data, at = b"".join(chunks), 0
        for path in paths:  # each: 8 hex digits of length, then the marshalled code
            try:
                size = int(data[at : at + 8], 16)
                code = _loads(data[at + 8 : at + 8 + size]) if size else None
            except _Exception:  # cut short (read away by another reader of this process)
                code, size = None, len(data)
            at += 8 + size
            done[path] = code

    def prefetch(paths):
        # rewritten now, in this process, before any repository code ran: pytest is imported and
        # untouched. Returns {path: (stat or source hash, code)} for those files, the very code
        # objects the Trust compares with (handed to pytest, which need not rewrite them again:
        # deepswe_pytest._hand_over).
        made = _rewrite_codes([p for p in paths if p not in done], flag)
        for path, whole in made.items():
            done[path] = whole[1] if whole is not None else None
        return dict((p, w) for p, w in made.items() if w is not None)

    def rewrite(path):
        if path not in done:
            job = start([path])
            if job is None:
                return None
            finish(job)
        return done.get(path)

    return rewrite, prefetch


def _serve_rewrite(argv):
    """The child _clean_rewriter starts for one file: argv [flag, folders...]; NUL-separated
    paths on stdin; the answers on stdout (_rewrite_into)."""
    os.chdir("/")
    sys.path.extend(argv[1:])
    paths = sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0")
    _rewrite_into(paths, argv[0] == "1", 1)


def _rewrite_codes(paths, flag):
    """{path: what pytest's assertion rewriting returns for the file (its stat or source hash,
    then its code), or None}, made in this process: call it only where no code under test ran (a
    child interpreter, or the launcher before any repository code)."""
    from _pytest.assertion import rewrite as rewriting

    class Config(object):
        # what pytest's rewriting asks of a config, across its versions: the one ini value, and
        # older versions' trace
        def getini(self, name):
            return flag if name == "enable_assertion_pass_hook" else None

        def __getattr__(self, name):
            return self

        def __call__(self, *args, **kwargs):
            return None

    config, rewrite_test, out = Config(), rewriting._rewrite_test, {}
    for path in paths:
        made = rewritten(rewrite_test, path, config, whole=True)
        ok = isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], types.CodeType)
        out[path] = made if ok else None
    return out


def _rewrite_into(paths, flag, fd, _write=os.write):
    """For each path, 8 hex digits of length and the code pytest's assertion rewriting makes of
    it marshalled (length 0: it could not), written to `fd` (the child's answer)."""
    made = _rewrite_codes(paths, flag)
    for path in paths:
        data = marshal.dumps(made[path][1]) if made[path] is not None else b""
        blob = ("%08x" % len(data)).encode() + data
        while blob:
            blob = blob[_write(fd, blob) :]


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


def _watcher(
    judge,
    _mro=type.__dict__["__mro__"].__get__,
    _dict=type.__dict__["__dict__"].__get__,
    _vars=vars,
    _isinstance=isinstance,
    _len=len,
    _type=type,
    _function=types.FunctionType,
    _wrappers=(classmethod, staticmethod),
    _method=types.MethodType,
    _snap=_snap,
    _enumerate=enumerate,
    _all=all,
    _any=any,
    _bool=bool,
    _object=object,
    _ValueError=ValueError,
    _depth=4,
    own=_own,
):
    """(changed, trusted): changed(entries) -> the label of the first watched callable that
    something other than trusted code replaced, or None; trusted(obj): whether what calling `obj`
    runs is none of the repository's code. Entries are (label, owner, attribute or None,
    snapshot: the object, and for a function its code, defaults and closure's contents),
    registered by the launcher before any repository code ran and kept by the vault alone;
    `judge` is the seal's own Trust. Builtins are bound here: rebinding them later changes
    nothing."""

    def same(obj, snap):
        raw = obj.__func__ if _isinstance(obj, _wrappers) else obj
        if raw is not snap[0]:
            return False
        if _len(snap) == 1:
            return True
        # its code and defaults: their stores are refused for a watched function (the seal's
        # setattr check), so they are not read here (each read is an audit event)
        cells = raw.__closure__ or ()
        if _len(cells) != _len(snap) - 3:
            return False
        for k, cell in _enumerate(cells):
            try:
                value = cell.cell_contents
            except _ValueError:
                value = None
            if value is not snap[3 + k]:
                return False
        return True

    def trusted(obj, depth=_depth):
        # what runs when `obj` is called: its functions' code, none the repository's
        raw = obj.__func__ if _isinstance(obj, _wrappers) else obj
        raw = raw.__func__ if _isinstance(raw, _method) else raw
        if _isinstance(raw, _function):
            inner = [v for v in _snap(raw)[3:] if _isinstance(v, _function)] if depth else []
            return not judge.repository_code(raw.__code__) and _all(
                trusted(v, depth - 1) for v in inner
            )
        klass = raw if _isinstance(raw, _type) else _type(raw)
        codes = [
            (v.__func__ if _isinstance(v, _wrappers) else v).__code__
            for k in _mro(klass)
            if k is not _object
            for v in _dict(k).values()
            if _isinstance(v.__func__ if _isinstance(v, _wrappers) else v, _function)
        ]
        return _bool(codes) and not _any(judge.repository_code(c) for c in codes)

    def changed(entries):
        for label, owner, attr, snap in entries:
            obj = owner if attr is None else own(owner, attr)
            if obj is None or (not same(obj, snap) and not trusted(obj)):
                return label
        return None

    return changed, trusted


def _field(obj, name, _own=_own, _type=type, _member=types.MemberDescriptorType, _vars=vars):
    """`obj.name` as stored, a slot's value or the instance dict's entry, running no property,
    descriptor or __getattr__ of anyone's; None when absent."""
    found = _own(_type(obj), name)
    if isinstance(found, _member):
        try:
            return found.__get__(obj)
        except AttributeError:
            return None
    try:
        return _vars(obj).get(name)
    except TypeError:
        return None


def _pytest_watch(judge, trusted, pm, hooks, ours, since, on_call=None, _stat=os.stat):
    """(check(key, at_call), post(args)): what the pytest launcher alone once decided, decided by
    the vault from pytest's own objects read as stored (_field): the function pytest is about to
    call for a test collected from a protected file is that file's (or a repository test file's
    the patch did not change, through decorators whose closure calls what they name as wrapped),
    every implementation of the hooks a test is run and reported through is trusted code and the
    grader's own are among them, and pluggy's hook execution is the one there was before any
    repository code ran. (Import hooks are not judged here: the repository's own may be honest,
    six's for six.moves, and one that swaps a graded test's function is seen by the check of the
    function itself.) The
    launcher's own checks of the same are reachable from the plugin pytest holds (its Trust, the
    sets its closures share, its caches), so code under test could empty them.
    A test run by pytest's own Function.runtest (as it was before any repository code ran) passes
    only if the vault saw pytest about to call it; `on_call(key)` (why not, or None) is asked
    then, for a test of a protected file."""
    hookexec = _field(pm, "_inner_hookexec")
    python = _sys_module.modules.get("_pytest.python")
    function = _field(python, "Function") if python is not None else None
    runtest = _own(function, "runtest") if isinstance(function, type) else None
    protected = [(p[len(judge.workdir) + 1 :], p) for p in judge.protected]
    # key -> item; _addr(item) -> (item, key); key -> why not, as pytest was about to call it
    items, keys, calls = {}, {}, {}

    def protected_of(key):
        name = key.split("::")[0]
        for rel, real in protected:
            if rel == name or rel.endswith("/" + name):
                return real
        return None

    def written(path):
        try:
            st = _stat(path)
        except OSError:
            return True
        return max(st.st_mtime, st.st_ctime) > since

    def graded(key, item):
        path = protected_of(key)
        if path is None:
            return None
        fn, why = _field(item, "_obj"), "the graded test %s does not run its file's code" % key
        # what pytest reads to call it (`item.obj`): its getter must be trusted code, or the
        # function stored above need not be the one called
        getter = _own(type(item), "obj")
        if isinstance(getter, property):
            getter = getter.fget
        if getter is not None and not trusted(getter):
            return "the graded test %s is looked up by the code under test" % key
        if fn is None and _own(type(item), "_getobj") is None:
            return None  # not a Python object's item (a doctest): nothing here calls a function
        for _ in range(8):
            raw = fn.__func__ if isinstance(fn, types.MethodType) else fn
            if not isinstance(raw, types.FunctionType):
                return why
            code = raw.__code__
            where = judge.code_path(code)
            if where == path:
                return None if judge.holds(path, code) else why
            if judge.test_code(code) and not written(where):
                return None  # a repository test file's own: a mixin, a generator
            inner = _field(raw, "__wrapped__")
            if not closes_over(raw, inner):
                return why
            # a decorator: an installed one, or the repository's own from a file the patch did
            # not change and nothing wrote during the run (scikit-learn's ignore_warnings)
            if judge.in_repository(where):
                if where in judge.changed or written(where) or not judge.from_its_file(code):
                    return why
            elif judge.repository_code(code):
                return why
            fn = inner
        return why

    judged = {}  # hook name -> the functions last judged trusted, as a tuple

    def same(a, b):
        return len(a) == len(b) and all(a[k] is b[k] for k in range(len(a)))

    def hooks_why():
        now = _field(pm, "_inner_hookexec")
        if now is not hookexec and not trusted(now):
            return "pluggy's hook execution replaced"
        relay = _field(pm, "hook")
        for name in hooks:
            caller = _field(relay, name) if relay is not None else None
            if caller is None:
                continue
            impls = _field(caller, "_hookimpls")
            if impls is None:  # pluggy < 1.1
                impls = (_field(caller, "_nonwrappers") or []) + (_field(caller, "_wrappers") or [])
            functions = tuple(_field(impl, "function") for impl in impls)
            if same(functions, judged.get(name, ())):
                continue  # the same objects as last judged (judging each is most of the cost)
            for fn in functions:
                if not trusted(fn):
                    raw = fn.__func__ if isinstance(fn, types.MethodType) else fn
                    is_function = isinstance(raw, types.FunctionType)
                    where = raw.__code__.co_filename if is_function else type(raw).__name__
                    return "hook %s implemented by the code under test (%s)" % (name, where)
            mine = ours.get(name)
            raws = [f.__func__ if isinstance(f, types.MethodType) else f for f in functions]
            if mine is not None and not any(r is mine for r in raws):
                return "the grader's hook %s removed" % name
            judged[name] = functions
        return None

    def check(key, at_call):
        # as pytest is about to call the test, and again once it passed (a decorator's closure
        # may have been swapped meanwhile: the function it calls is then not the one it names);
        # only for tests of the protected files (the graded ones and root's canaries)
        if protected_of(key) is None:
            return None
        item = items.get(key)
        why = graded(key, item) if item is not None else None
        if at_call:
            calls[key] = why
            if on_call is not None:
                why = why or on_call(key)
        elif key in calls:
            why = calls[key] or why
        elif item is not None and runtest is not None and _own(type(item), "runtest") is runtest:
            # pytest's own runtest calls the function through pytest_pyfunc_call, where the
            # grader's wrapper posts "calling": a pass it never posted was run around the grader
            why = "the graded test %s passed, but the grader never saw pytest call it" % key
        return why or hooks_why()

    def post(args):
        if args[0] == "items" and not items:
            for key, item in args[1]:
                items[key] = item
                keys[_addr(item)] = (item, key)
            return None
        if args[0] == "calling":
            found = keys.get(_addr(args[1]))
            if found is not None and found[0] is args[1]:
                return check(found[1], True)
        return None

    return check, post


def _vault(key, fd, main_frame, runner, shared=None, from_grader=None, judge=None):
    """The report's writer and its rules: handle(kind, args) for each post. `shared["window"]`
    (set by a "window" post from the grader's own code, `from_grader(code)`) is open while pytest
    makes and logs a report: the seal refuses setting a trace function then. `judge`: the seal's
    own Trust, for the watched callables the vault itself checks ("watch")."""
    shared = {} if shared is None else shared
    watch, (replaced, trusted) = [], (_watcher(judge) if judge is not None else (None, None))
    # what pytest's own objects hold, judged by the vault itself ("pytest" posts): made on the
    # first; files written after this are not trusted as the repository's own decorators
    since, pytest_watch = time.time(), []
    mac_update, mac_hexdigest = _hmac_sha256(key)
    # bound here, before any repository code runs: `sys.exc_info = ...` later changes nothing
    write, getframe, exc_info = os.write, sys._getframe, sys.exc_info
    gettrace, getprofile = sys.gettrace, sys.getprofile
    state = {"closed": False, "collected": None, "said": set(), "unreported": 0}
    phases = {}  # (key, phase) -> word, for reports that must be unique
    reported = set()
    shown = {}
    # unittest's test parts the grader watched (watch_parts): key -> [parts that ended without an
    # exception, why the test cannot pass or None, whether unittest's own run ran it]; the stack
    # holds (key, the exception being handled when the part began)
    parts, stack, expected = {}, [], set()

    def line(text):
        data = (text.replace("\n", " ").replace("\r", " ") + "\n").encode("utf-8", "replace")
        mac_update(data)
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
        # unittest's parts decide only the test's own report (pytest's subtest reports are not)
        seen = parts.pop(key, None) if exact is True else None
        if exact is True and (key in expected or (seen is not None and seen[2])):
            expected.discard(key)
            if word == "PASSED":
                if seen is not None and seen[1]:
                    return tampered("%s reported PASSED although %s" % (key[:200], seen[1]))
                if seen is None or seen[0] < PARTS:
                    return tampered(
                        "%s reported PASSED, but the grader did not see its setUp, test and "
                        "tearDown end" % key[:200]
                    )
        if word in ("PASSED", "XPASS") and watch:
            which = replaced(watch)
            if which:
                tampered("%s replaced (seen by the vault at %s)" % (which, key[:200]))
        if word in ("PASSED", "XPASS") and pytest_watch:
            why = pytest_watch[0](key, False)
            if why:
                tampered("%s (seen by the vault at %s)" % (why, key[:200]))
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
        why = changed(state.get("main", ()))
        if why:
            tampered(why + " while the tests ran")
        for key in held:
            tampered("frames held for %s were never checked" % (key,))
        which = replaced(watch) if watch else None
        if which:
            tampered("%s replaced (seen by the vault at the end)" % which)
        keys = state["collected"] or set()
        facts = "collected=%d,unreported=%d,sealed=%d" % (
            len(keys),
            len(keys - reported),
            1 if SEALED else 0,
        )
        head = "deepswe-grader: %s returned %d %s" % (runner, code, facts)
        mac_update(head.encode("utf-8"))
        tail = "=" * 10 + " " + head + " " + mac_hexdigest() + " " + "=" * 10 + "\n"
        data = tail.encode("utf-8")
        while data:
            data = data[write(fd, data) :]
        state["closed"] = True
        os.close(fd)

    def traced_from(what):
        """From here until the launcher closes the window once the test's report is posted (its
        "window" post: a status anyone can post), the seal refuses a trace or profile function of
        the code under test (shared["window"]): one is called for the graded test's frames and
        the runner's, and could jump them (f_lineno) or rewrite their locals. None may be set as
        the test begins either (a reason, or None)."""
        shared["window"] = True
        for name, fn in (("trace", gettrace()), ("profile", getprofile())):
            code = _tracer_code(fn)
            if code is not None and (judge is None or judge.repository_code(code)):
                return "a %s function of the code under test (%s) was set when %s began" % (
                    name,
                    code.co_name,
                    what[:200],
                )
        return None

    def grader_only(what):
        # a post only the grader's own code may make: the caller of sys.audit
        if from_grader is None or not from_grader(getframe(3).f_code):
            tampered("%s posted by something other than the launcher" % what)
            return False
        return True

    def part(args):
        # ("enter", key, why, by_run) when unittest begins a test part, ("exit",) when it ends:
        # an exception being handled at its end that was not at its beginning escaped the part
        # (read from the thread's state here, not from any frame the code under test can write)
        if not grader_only("a test part"):
            return
        if args[0] == "watching":  # the watch is installed: expect posts count from now on
            state["watching"] = True
            return
        if args[0] == "enter":
            _, key, why, by_run = args
            if type(key) is not str:
                return tampered("a test part posted for a key that is not a string")
            seen = parts.setdefault(key, [0, None, False])
            seen[1] = seen[1] or why
            seen[2] = seen[2] or by_run is True
            if by_run is True:
                why = traced_from(key)
                if why:
                    tampered(why)
            stack.append((key, exc_info()[1]))
            return
        if not stack:
            return tampered("a test part ended that never began")
        key, outer = stack.pop()
        seen = parts.setdefault(key, [0, None, False])
        now = exc_info()[1]
        if now is outer:
            seen[0] += 1
        elif not seen[1]:
            seen[1] = "its code raised %s" % type(now).__name__

    def expect(args):
        # (key,): the test is run by unittest's own run, so passing needs its parts seen ending
        ok = grader_only("a test's expected parts") and type(args[0]) is str
        if ok and state.get("watching"):
            expected.add(args[0])

    held = {}  # key -> [(frame, name, value)]: the locals of frames suspended meanwhile

    def frames(args):
        # ("hold", key, frames) from the launcher: the locals of `frames`, which stay suspended
        # until ("same", key) comes, as they are now; then each must still be what it was. From
        # Python 3.13 a frame's f_locals writes through: code under test that walks up its
        # stack could rebind what pytest's suspended frames use once the test returns.
        if not grader_only("a hold of frames"):
            return
        what, key = args[0], args[1]
        if what == "hold":
            if key in held:
                return tampered("frames held twice for %s" % (key,))
            held[key] = [(f, n, v) for f in args[2] for n, v in locals_of(f).items()]
            return
        pairs = held.pop(key, None)
        if pairs is None:
            return tampered("frames checked that were never held (%s)" % (key,))
        why = changed(pairs)
        if why:
            tampered("%s while %s ran" % (why, key))

    def locals_of(frame):
        try:
            return dict(frame.f_locals)
        except Exception:  # a frame that ended: nothing to hold
            return {}

    def changed(pairs):
        missing = object()
        for frame, name, value in pairs:
            if locals_of(frame).get(name, missing) is not value:
                code = frame.f_code
                return "the local %s of %s (%s) was rebound" % (
                    name,
                    code.co_name,
                    code.co_filename,
                )
        return None

    def watch_(args):
        # ("watch", entries): the launcher's watched callables, before any repository code ran;
        # ("rewrite", fn): pytest's assertion rewriting for the seal's own Trust, watched too
        if not grader_only("a watch of callables") or judge is None:
            return
        if args[0] == "rewrite":
            # pytest is configured: the seal's Trust rewrites as a clean pytest does (the
            # launcher's rewriter, args[1], runs code the code under test can rebind)
            if judge.rewrite is None and judge.clean is not None:
                flag = len(args) > 2 and args[2] is True
                if flag:  # not what the prefetch assumed: its codes would not match
                    judge.clean[2] = _clean_rewriter(judge.clean[0], judge.clean[1], flag)
                judge.rewrite = judge.clean[2][0]
            return
        if watch:
            return tampered("callables watched twice")
        watch.extend((e[0], e[1], e[2], tuple(e[3])) for e in args[1])
        for entry in watch:  # whose code and defaults the seal refuses to see replaced
            shared.setdefault("watched", set()).add(object.__hash__(entry[3][0]))

    def pytest_(args):
        # ("pm", manager, hook names, {name: the grader's own hook function}) once, before any
        # repository code ran; ("items", ((key, item), ...)) once collected; ("calling", item)
        # as pytest is about to call a test function
        if not grader_only("pytest's facts") or judge is None or not SEALED:
            return  # below Python 3.8 the vault is reachable: nothing to gain from its checks
        if args[0] == "pm" and not pytest_watch:
            pytest_watch.extend(
                _pytest_watch(judge, trusted, args[1], args[2], args[3], since, traced_from)
            )
        elif pytest_watch:
            why = pytest_watch[1](args)
            if why:
                tampered("%s (seen by the vault)" % why)

    def arm(args):
        # From the launcher's main frame, before the tests: its locals (the grader's functions
        # and objects its closures share) must be the same when it closes the report.
        if getframe(3) is not main_frame or "main" in state:
            return tampered("the launcher's main frame armed by something other than itself")
        state["main"] = [(main_frame, n, v) for n, v in locals_of(main_frame).items()]

    def window(args):
        (is_open,) = args
        caller = getframe(3).f_code
        if type(is_open) is not bool or from_grader is None or not from_grader(caller):
            return tampered("the report window was moved by something other than the launcher")
        shared["window"] = is_open

    kinds = {
        "window": window,
        "part": part,
        "expect": expect,
        "status": status,
        "collected": collected,
        "collect_error": collect_error,
        "finish": finish,
        "reproduction": reproduction,
        "frames": frames,
        "arm": arm,
        "watch": watch_,
        "pytest": pytest_,
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


def _seal(trust, tampered, tracing=True, shared=None, busy=None):
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
        # exact types: `isinstance` reads `__class__`, a property of the code under test's that
        # would run here (sys.audit takes any arguments)
        obj, name = args[0], args[1]
        if type(obj) is not types.FunctionType or type(name) is not str:
            return
        path = obj.__code__.co_filename
        # __code__ of any runner's, grader's or protected function; defaults only of the grader's
        # (which binds what it needs as defaults): tests copy functions and set their defaults
        # (boltons' funcutils)
        watched = object.__hash__(obj) in shared.get("watched", ())
        if name == "__code__" and (watched or trust.runner_file(path)):
            refuse("%s of %s (%s) replaced" % (name, obj.__qualname__, path))
        if name in ("__defaults__", "__kwdefaults__") and (watched or trust.grader_file(path)):
            refuse("%s of %s (%s) replaced" % (name, obj.__qualname__, path))

    def open_(args):
        # exact types (a subclass's own methods, or `__class__` read by isinstance, would run
        # here): a str or bytes subclass read through the base type's C methods
        path, kind = args[0], type(args[0])
        if kind is not str and kind is not bytes:
            if issubclass(kind, str):
                path = str.__str__(path)
            elif issubclass(kind, bytes):
                path = bytes(path)
            else:
                return  # a descriptor or a path object (the kernel's modes hold the files)
        if type(path) is bytes:
            path = path.decode("utf-8", "replace")
        if busy is not None and busy():
            return  # the kernel's resolution of a path the seal asked for
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
                if owner != trust.root_uid:
                    refuse("bytecode of %s that root did not write (%s)" % (source, path))

    def ctypes_(name):
        def check(args):
            if asked_by_repository():
                refuse("the code under test called ctypes' " + name)

        return check

    frame_type = types.FrameType

    def getattr_(args):
        # what holds the C functions that set a handler unwrapped or make a _signal: the signal
        # desk's frame, create_builtin's code (and a frame running it)
        obj, name = args[0], args[1]
        if type(name) is not str:
            return
        desk, create, create_scope = shared.get("signals", (None, None, None))
        if name == "gi_frame" and obj is desk:
            refuse("reading the frame of the seal's signal desk")
        if name == "__code__" and obj is create:
            refuse("reading the code of the seal's create_builtin")
        if name == "f_code" and type(obj) is frame_type and obj.f_globals is create_scope:
            refuse("reading the code of the seal's create_builtin")

    checks = {
        "object.__getattr__": getattr_,
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
                refuse(
                    "the code under test called %s while a graded test ran or pytest made a report"
                    % name
                )

        return check

    for name in TRACING:
        checks[name] = always(name) if not tracing else traced(name)
    return checks


def _source_of(pyc):
    """`a/__pycache__/b.cpython-311-pytest-8.3.4.pyc` -> `a/b.py`; under a pycache prefix the
    same, the prefix's folders mirroring the source's."""
    folder, name = os.path.split(pyc)
    # the live module's (the seal's private scope has a copy of sys: the prefix can change)
    prefix = getattr(_sys_module, "pycache_prefix", None)
    real = os.path.realpath(prefix) if prefix else None
    if real and pyc.startswith(real + os.sep):
        base = folder[len(real) :]
    elif os.path.basename(folder) == "__pycache__":
        base = os.path.dirname(folder)
    else:
        return None
    return os.path.join(base, name.split(".")[0] + ".py")


def callable_code(fn, _static=inspect.getattr_static):
    """The code a trace or profile function runs (a function, a bound method, an instance of a
    class with __call__); None for built-in code (coverage's C tracer) or no function.
    (`_static` bound before any repository code runs: the seal refuses replacing defaults.)"""
    if fn is None:
        return None
    raw = getattr(fn, "__func__", fn)
    code = getattr(raw, "__code__", None)
    if isinstance(code, types.CodeType):
        return code
    call = _static(type(fn), "__call__", None)
    return getattr(getattr(call, "__func__", call), "__code__", None)


def _tracer_code(fn, _partial=functools.partial):
    """The code a trace or profile function runs, read as stored (no attribute of its own runs:
    the vault asks): a function, a bound method, functools.partial of either, an instance of a
    class whose __call__ is a function; None for built-in code (coverage's C tracer)."""
    for _ in range(8):
        kind = type(fn)
        if fn is None:
            return None
        if kind is types.FunctionType:
            return fn.__code__
        if kind is types.MethodType:
            fn = fn.__func__
        elif isinstance(fn, _partial):  # partial's own member, not a subclass's property
            fn = _own(_partial, "func").__get__(fn)
        else:
            call = _own(kind, "__call__")
            return call.__code__ if type(call) is types.FunctionType else None
    return None


def closes_over(wrapper, inner):
    """Whether `inner` is a function `wrapper`'s closure holds (what it calls, not a name it
    shows)."""
    if not isinstance(inner, types.FunctionType):
        return False
    for cell in getattr(wrapper, "__closure__", None) or ():
        try:
            if cell.cell_contents is inner:
                return True
        except ValueError:  # an empty cell
            continue
    return False


def test_calls(trust, test, static=inspect.getattr_static):
    """Why unittest's calls of `test`'s setUp, method, tearDown and cleanups do not go through
    trusted code (the runner's, an installed package's, a protected file's or a repository test
    file's own), or None: a `_callTestMethod` the code under test rebinds could swallow the test's
    exception before the part it runs in ends."""
    for name in ("_callSetUp", "_callTestMethod", "_callTearDown", "_callCleanup"):
        found = static(test, name, None)
        fn = getattr(found, "__func__", found)
        if fn is None:
            continue
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType):
            return "%s of %s is not a function" % (name, type(test).__name__)
        if trust.repository_code(code) and not trust.test_code(code):
            return "%s of %s is the code under test's (%s)" % (
                name,
                type(test).__name__,
                code.co_filename,
            )
    return None


def watch_parts(post, key_of, genuine):
    """Watch the parts of every test unittest's own run runs (setUp, the test, tearDown, each
    cleanup and subTest: what `_Outcome.testPartExecutor` wraps), for the vault's rule that a test
    reported PASSED was seen ending each part without an exception. A unittest test's outcome is
    kept in objects the code under test reaches from its own frame (`self._outcome`: setting its
    `expecting_failure` turns the failure into a pass); the exception escaping a part is not: it is
    read from the thread's state by the vault when the part ends. `key_of(test)` names the test as
    the launcher's status posts do; `genuine(test, method)` says why the test method run()
    is about to run is not the graded test's own code (or None). Returns [(owner, name, value)] to
    check by identity with the launcher's other watched callables; nothing below Python 3.8."""
    import unittest.case

    outcome = getattr(unittest.case, "_Outcome", None)
    original = vars(outcome).get("testPartExecutor") if outcome is not None else None
    run = vars(unittest.case.TestCase).get("run")
    if not SEALED or original is None or not isinstance(run, types.FunctionType):
        return []
    run_code, getframe = run.__code__, sys._getframe

    class Part(object):
        __slots__ = ("inner",)

        def __init__(self, inner):
            self.inner = inner

        def __enter__(self):
            return self.inner.__enter__()

        def __exit__(self, typ, value, tb):
            post("part", "exit")
            return self.inner.__exit__(typ, value, tb)

    methods = (vars(Part)["__enter__"], vars(Part)["__exit__"])

    def testPartExecutor(self, test_case, *args, **kwargs):
        test = getattr(test_case, "test_case", test_case)  # a subTest's own test
        caller = getframe(1)
        by_run = caller.f_code is run_code
        why = genuine(test, caller.f_locals.get("testMethod") if by_run else None)
        # checked here, where the with statement is about to look them up
        if (vars(Part).get("__enter__"), vars(Part).get("__exit__")) != methods:
            why = why or "the grader's watch of test parts was replaced"
        post("part", "enter", key_of(test), why, by_run)
        return Part(original(self, test_case, *args, **kwargs))

    outcome.testPartExecutor = testPartExecutor
    post("part", "watching")
    return [
        (outcome, "testPartExecutor", testPartExecutor),
        (Part, "__enter__", methods[0]),
        (Part, "__exit__", methods[1]),
    ]


def read_settings(fd):
    """The settings root passed on descriptor `fd` (JSON), the descriptor closed."""
    import json

    with os.fdopen(fd, "r") as f:
        return json.load(f)


def _harmless(fn):
    """`fn` over globals that hold nothing, not even builtins: what the code under test reaches
    from it (`__globals__`, `__builtins__`, its frame's) is what its closure and defaults hold."""
    return types.FunctionType(
        fn.__code__, {"__builtins__": {}}, fn.__name__, fn.__defaults__, fn.__closure__
    )


def _signal_entries(ask, key, doc_set, doc_get):
    """The `signal` and `getsignal` put on a `_signal` module: each asks the desk, which alone
    holds the C functions, and answers with the handler as set."""

    def signal(signalnum, handler):
        return ask(("set", key, signalnum, handler))

    def getsignal(signalnum):
        return ask(("get", key, signalnum, None))

    signal, getsignal = _harmless(signal), _harmless(getsignal)
    signal.__doc__, getsignal.__doc__ = doc_set, doc_get
    return signal, getsignal


def _desk_door(send, lock, busy):
    """(ask, ask_now): a request to the desk, one thread at a time; `ask` waits for another
    thread's (and raises `busy` after 10 s: the desk's own thread asking again) and answers with
    the desk's value, `ask_now` returns None at once if the desk is taken, else the desk's
    answer; each raises the desk's error."""
    acquire, let_go = lock.acquire, lock.release

    def ask_now(request, wait=False):
        if not (acquire(True, 10) if wait else acquire(False)):
            if wait:
                raise busy("deepswe grader: the seal's signal desk did not answer in 10 s")
            return None
        try:
            answer = send(request)
        finally:
            let_go()
        if answer[0] == 1:
            raise answer[1]
        return answer

    def ask(request):
        return ask_now(request, True)[1]

    ask_now = _harmless(ask_now)  # before `ask` is made: its closure holds this one
    return _harmless(ask), ask_now


def _signal_wrapper(ask_now, given, defer):
    """The function set as a handler in place of `given`: the desk says whether a frame of the
    seal's is below the frame interrupted (then the signal is deferred) and which frame to hand."""

    def handler(signum, frame):
        answer = ask_now(("frame", frame, None, None))
        if answer is None or answer[0] == 2:  # the desk taken, or a frame of the seal's below
            defer(signum)
            return None
        return given(signum, answer[1])

    return _harmless(handler)


_CREATE_MARK = b"deepswe-seal: the C create_builtin"
_CREATE_SOURCE = """
def create_builtin(spec):
    name = ask(("name", spec, None, None))
    if name == "_signal":
        return ask(("signal-module", None, None, None))
    return %r(Spec(name=name))
""" % (_CREATE_MARK,)


def _create_entry(ask, real_create):
    """(create_builtin, its globals): `_imp.create_builtin` for the code under test. A module's
    own initialisation may import another builtin module, so this runs outside the desk (which
    would wait on itself) and holds the C function as a constant of its own code: reached only
    through `__code__` or a frame's `f_code`, both refused for it (the seal's
    "object.__getattr__"). The desk reads the spec's name (exact types: no code of the code under
    test's runs there) and makes a `_signal` itself; the C function is handed a spec of that
    name, so that no property of a spec class makes it read another."""
    import builtins
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # calling a bytes constant: a SyntaxWarning, meant
        module = compile(_CREATE_SOURCE, "<deepswe-seal create_builtin>", "exec")
    (code,) = [c for c in module.co_consts if type(c) is types.CodeType]
    consts = tuple(
        real_create if type(c) is bytes and c == _CREATE_MARK else c for c in code.co_consts
    )
    # a module's C initialisation reads the running frame's builtins (__import__, getattr):
    # the process's own, as any frame of the code under test has them
    # the spec handed to the C function: a SimpleNamespace holding the name the desk read, whose
    # type the code under test cannot give a `name` property (a class of ours could be given one)
    scope = {"__builtins__": builtins, "ask": ask, "Spec": types.SimpleNamespace}
    return types.FunctionType(code.replace(co_consts=consts), scope, "create_builtin"), scope


def _signal_desk(modules, real_create, public, private, deferred, lock):
    """A generator, the one holder of the C functions that set a handler or make a `_signal`
    (`modules`: [(set, get)] by key) and of the private scope; its frame is reached only through
    `gi_frame` (refused: the seal's "object.__getattr__") or from code running on it (no signal
    handler does: deferred). Sent (kind, a, b, c), answers (0, value), (1, error to raise) or, for
    a frame, (2, None): defer."""
    import _signal
    import importlib.machinery
    import signal as signal_module

    spec_type, function, frame_type = (
        importlib.machinery.ModuleSpec,
        types.FunctionType,
        types.FrameType,
    )
    numbers, plain = type(signal_module.SIGINT), type(signal_module.SIG_DFL)
    single_phase = sys.version_info < (3, 10)
    made = {}

    send = yield
    ask, ask_now = _desk_door(send, lock, RuntimeError)
    answer = None

    def placed(frame):
        # (a frame of the private scope below: defer, the frame to hand: the one below the
        # outermost frame of the seal's module, else `frame` itself), in one walk
        below, here = frame, frame
        while here is not None:
            found = here.f_globals
            here = here.f_back
            if found is private:
                return True, None
            if found is public:
                below = here
        return False, below

    def guard(module):
        real = (module.signal, module.getsignal)
        modules.append(real)
        module.signal, module.getsignal = _signal_entries(
            ask, len(modules) - 1, real[0].__doc__, real[1].__doc__
        )

    def as_set(handler):
        return made.get(handler, handler) if type(handler) is function else handler

    def checked(signalnum):
        # exact types, compared by identity: no method of the code under test's runs here
        if type(signalnum) is not int and type(signalnum) is not numbers:
            raise TypeError("signal number must be an int")
        return signalnum

    def spec_name(spec):
        if type(spec) is not spec_type:
            raise TypeError("create_builtin takes a ModuleSpec")
        attrs = vars(spec)
        for key in attrs:
            if type(key) is not str:
                raise TypeError("create_builtin takes a ModuleSpec")
        name = attrs.get("name")
        if type(name) is not str:
            raise TypeError("create_builtin takes a ModuleSpec with a str name")
        return name

    guard(_signal)
    answer = ask  # the first answer: the door the exposed functions ask through
    while True:
        request = yield answer
        try:
            if type(request) is not tuple or len(request) != 4 or type(request[0]) is not str:
                raise TypeError("not a request")
            kind, a, b, c = request
            if kind in ("set", "get") and type(a) is not int:
                raise TypeError("not a request")
            if kind == "frame":
                if a is not None and type(a) is not frame_type:
                    raise TypeError("not a frame")
                deferring, below = placed(a)
                answer = (2, None) if deferring else (0, below)
            elif kind == "set":
                handler = c
                if callable(handler):
                    handler = _signal_wrapper(ask_now, c, deferred.append)
                    made[handler] = c
                elif type(handler) is not int and type(handler) is not plain:
                    raise TypeError("signal handler must be signal.SIG_IGN, SIG_DFL or a callable")
                answer = (0, as_set(modules[a][0](checked(b), handler)))
            elif kind == "get":
                answer = (0, as_set(modules[a][1](checked(b))))
            elif kind == "name":
                answer = (0, spec_name(a))
            elif kind == "signal-module":
                if single_phase:
                    # before 3.10 the runtime hands back this same module, its dict refilled
                    # with the C functions the guard replaced: the module as it is, instead
                    answer = (0, _signal)
                    continue
                module = real_create(types.SimpleNamespace(name="_signal"))
                if type(vars(module).get("signal")) is not function:
                    guard(module)
                answer = (0, module)
            else:
                raise TypeError("not a request")
        except BaseException as error:  # noqa: B036 (a generator that raised would be gone)
            answer = (1, error.with_traceback(None))  # its traceback held this frame


def _guard_signals(seal_globals):
    """((desk, create_builtin, its globals), deferred, release): from now on no Python signal handler runs while a frame of the
    seal's private scope (its hook, the vault, the checks) is on the stack. A handler runs between
    any two bytecodes, the hook's among them, on top of the frame it interrupted: its own frame's
    `f_back` (or the frame it is handed) leads, through f_locals and closures (no audit event), to
    the vault's writer. So `_signal.signal` sets a wrapper instead of the handler; called while a
    frame of the private scope's code is below the frame interrupted, the wrapper calls nothing
    and adds the signal to `deferred`. The hook, as it returns, hands the runtime `release()`: an
    object whose only reference the runtime drops once the hook has returned, and whose weak
    references' callbacks, C functions all (no frame, so no bytecode for a handler to run at),
    raise each deferred signal again: `_thread.interrupt_main(signum)` from 3.10 (no syscall, no
    audit event); `os.kill` of this process before (which, unlike 3.11's, does not run the handler
    itself). The handler then runs at the next bytecode of the code that raised the event, and an
    exception it raises goes there, as it would have. Otherwise the wrapper hands the handler the
    frame below the seal's outermost frame (found through `f_globals` and `f_back`: no audit
    event), else the frame itself. What the code under test can reach of all this (`_signal.signal`,
    `getsignal`, the wrappers, `_imp.create_builtin`, their globals, closures and frames) holds
    nothing of the seal's: each is `_harmless`, and the C setters, `_imp.create_builtin` and the
    private scope are held by `_signal_desk` alone. `getsignal` and the handler `signal` returns
    give the handler as set; arguments are taken by exact type only. (Imported here: the private
    scope's _imp, os and sys are copies.)"""
    import _imp
    import _signal
    import _thread
    import operator
    import os
    import signal
    import sys
    import weakref

    public, private = seal_globals
    interrupt = getattr(_thread, "interrupt_main", None) if sys.version_info >= (3, 10) else None
    kill, getpid, partial, deferred = os.kill, os.getpid, functools.partial, []
    nsig = getattr(signal, "NSIG", 65)
    lock = _thread.allocate_lock()
    desk = _signal_desk([], _imp.create_builtin, public, private, deferred, lock)
    next(desk)
    ask = desk.send(desk.send)
    for name in ("signal", "getsignal"):  # functools.wraps (3.8-3.10) kept the C function
        if "__wrapped__" in vars(getattr(signal, name)):
            getattr(signal, name).__wrapped__ = getattr(_signal, name)
    _imp.create_builtin, create_scope = _create_entry(ask, _imp.create_builtin)

    class Token:
        pass

    class Trip(weakref.ref):
        pass

    fire = operator.methodcaller("fire")

    def release():
        token, trips, signals = Token(), [], set()
        while deferred:  # pop, not a copy and a clear: a signal deferred meanwhile is kept
            try:
                signum = deferred.pop()
            except IndexError:  # the hook released them in another thread
                break
            # the list is reachable (a wrapper's closure): only a signal number is taken, by exact
            # type, so that no __hash__ of the code under test's runs here
            if type(signum) is int and 0 < signum < nsig:
                signals.add(signum)
        for signum in signals:
            trip = Trip(token, fire)
            trip.fire = partial(interrupt, signum) if interrupt else partial(kill, getpid(), signum)
            trips.append(trip)
        token.trips = trips  # they live as long as the token; its death calls them
        return token

    return (desk, _imp.create_builtin, create_scope), deferred, release


def _hook(handle, checks, ours, deferred, release, tampered):
    """The audit hook, made in the private scope (a signal wrapper knows its frames by their
    globals): the vault's posts to `handle`, capability events to their check; returns, when
    signals came while it ran, the object whose release raises them again (_guard_signals).
    Nothing raised here may leave without the run tampered: an exception's traceback holds this
    hook's frames, and through them the vault (a post of the wrong shape, a check's own error).
    A check the code under test's recursion left no room for is made again with 200 frames more
    (the limit put back after, where the runtime allows it)."""
    getlimit, setlimit = sys.getrecursionlimit, sys.setrecursionlimit

    def checked(check, args):
        try:
            check(args)
        except RecursionError:
            limit = getlimit()
            setlimit(limit + 200)
            try:
                check(args)
            finally:
                try:  # noqa: SIM105 (no context manager's frames here)
                    setlimit(limit)
                except RecursionError:  # 3.12 on: not below the depth running now
                    pass

    def hook(event, args):
        if event == ours:
            try:
                if args and type(args[0]) is str:
                    handle(args[0], args[1:])
                else:
                    tampered("a post to the grader whose kind is not a string")
            except BaseException:
                tampered("the grader's vault failed on a post")
                raise
        else:
            check = checks.get(event)
            if check is not None:
                try:
                    checked(check, args)
                except PermissionError:
                    raise  # refused, and tampered already
                except BaseException:
                    tampered("the seal's check of %s failed" % event)
                    raise
        if deferred:  # nothing between this test and the return runs a handler
            return release()
        return None

    return hook


def install(settings, runner, runner_dirs, tracing=True, handoff=None):
    """The vault (and from Python 3.8 the seal) for this process; returns (post, trust, tampered):
    post(kind, *args) reports through the vault, trust judges code. Called from the launcher's
    main function (its frame is the only one that may close the report). `tracing` False: no trace
    or profile function may be set (the reproduction's launcher). `handoff` (the pytest
    launcher's, a dict): filled with {path: (stat or source hash, code)} of the graded files as
    the seal's own rewriting made them, for pytest to load instead of rewriting them again."""
    fd = int(settings["report_fd"])
    os.set_inheritable(fd, False)  # not to the tests' subprocesses

    def made():
        return Trust(
            os.getcwd(),
            settings.get("protected", []),
            runner_dirs,
            settings["grader_dir"],
            settings.get("changed", []),
        )

    # Two of them: the launcher's (its checks are reachable from the plugin pytest holds, so the
    # code under test could change what it knows) and the seal's own, which only the hook's
    # closure refers to: every judgment the hook and the vault make is the seal's. It, the vault
    # and the capability checks read a private scope (_sealed_scope): rebinding Trust's methods
    # (no audit event sees a class attribute stored), this module's helpers, a builtin or the
    # shared os.path later changes nothing for them.
    scope, busy = _sealed_scope()
    trust, sealed = (
        made(),
        scope["Trust"](
            os.getcwd(),
            settings.get("protected", []),
            runner_dirs,
            settings["grader_dir"],
            settings.get("changed", []),
        ),
    )
    # the seal's own rewriting (a clean child interpreter), started now for the graded files so
    # that it runs beside pytest's start
    search = sorted(set(os.path.dirname(d) for d in runner_dirs))
    sealed.clean = [sys.executable, search, scope["_clean_rewriter"](sys.executable, search, False)]
    if SEALED and runner == "pytest.main":
        codes = sealed.clean[2][1](sorted(sealed.protected))
        if handoff is not None:
            handoff.update(codes)
    sealed.remember_runner(list(sys.modules.values()))
    sealed.remember_grader(list(sys.modules.values()), sys._getframe())
    shared = {"window": False}
    grader_file, from_its_file = sealed.grader_file, sealed.from_its_file

    def from_grader(code):
        return grader_file(code.co_filename) and from_its_file(code)

    handle, tampered = scope["_vault"](
        bytes.fromhex(settings["key"]), fd, sys._getframe(1), runner, shared, from_grader, sealed
    )
    if not SEALED:  # Python < 3.8: no audit hooks

        def post(kind, *args):
            handle(kind, args)

        return post, trust, tampered
    checks = scope["_seal"](sealed, tampered, tracing, shared, busy)
    shared["signals"], deferred, release = scope["_guard_signals"]((globals(), scope))
    sys.addaudithook(scope["_hook"](handle, checks, EVENT, deferred, release, tampered))
    return (
        functools.partial(sys.audit, EVENT),
        trust,
        lambda reason: sys.audit(EVENT, "tampered", reason),
    )


if __name__ == "__main__" and sys.argv[1:2] == ["--rewrite"]:
    _serve_rewrite(sys.argv[2:])
