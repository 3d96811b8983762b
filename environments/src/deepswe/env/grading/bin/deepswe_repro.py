"""The grader's reproduction launcher: the issue's reproduction run as a plain script, its result
reported through the grader's seal.

Copied into the grading sandbox (outside the repository) with deepswe_seal.py and run as the
tester, from an empty folder, as
    <python> deepswe_repro.py SETTINGS_FD CODE_FILE REPOSITORY
SETTINGS_FD is a descriptor on the same settings as deepswe_pytest.py's (read and closed before
any repository code runs); CODE_FILE holds the reproduction, read before the seal is installed;
REPOSITORY is the repository's folder (what `Trust` calls the repository's code). The code runs
as `__main__` in this process, as `python -c` would run it (the empty folder first on sys.path),
its standard output captured; then the launcher's main frame posts one line through the vault:

    # deepswe-grader report v3
    ===... short test summary info ...===           (HEADER)
    # deepswe-grader: REPRODUCTION {"last": ..., "raised": ..., "exception": ..., ...}
    # deepswe-grader: TAMPERED <reason>             (the seal's refusals, if any)
    ========== deepswe-grader: reproduction returned 0 <facts> <mac> ==========

What the code under test prints after that (an atexit handler, a thread) is never read: root
reads up to the closing line, and checks its MAC. The result line is taken only from this file's
main frame, once: a post from anywhere else is tampered. What the code printed while it ran, and
whether it raised, stay its own behaviour: a user running the script sees the same.

Standalone: the standard library and deepswe_seal.py, the syntax of the oldest Python a task image
may have.
"""

import io
import os
import sys

import deepswe_seal as seal

_exit = sys.exit


# What the result is made with, bound before the code under test runs (it may rebind any module
# attribute, builtins' included, but not a function's defaults: the seal keeps the grader's).
_NAME = type.__dict__["__name__"].__get__
_MRO = type.__dict__["__mro__"].__get__


def _report(out, error, _type=type, _str=str, _name=_NAME, _mro=_MRO, _tuple=tuple):
    """(last, raised, exception, types): the last non-empty line printed, whether it raised, the
    exception as Python prints its last line, the names of its class and bases (as the types hold
    them: a metaclass property that says otherwise is not asked). Synthesis's harness reports the
    same (deepswe.data.swemini.snippet); `raised` is what no message can hide."""
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    last = lines[-1] if lines else None
    if error is None:
        return last, False, None, ()
    cls = _type(error)
    name = "".join((_name(cls),))
    try:
        text = "".join((_str(error),))  # a str, never a subclass of it
    except BaseException:  # a __str__ that raises: the class name alone
        text = ""
    exception = "%s: %s" % (name, text) if text else name
    return last, True, exception, _tuple("".join((_name(c),)) for c in _mro(cls))


def main(argv, _report=_report):
    if len(argv) != 4:
        sys.stderr.write("usage: deepswe_repro.py SETTINGS_FD CODE_FILE REPOSITORY\n")
        return 64
    here = os.path.dirname(os.path.abspath(__file__))
    settings = seal.read_settings(int(argv[1]))
    with open(argv[2]) as f:
        code = compile(f.read(), "<reproduction>", "exec", dont_inherit=True)
    empty = os.getcwd()
    os.chdir(argv[3])  # the seal's Trust takes the working directory as the repository
    # No trace or profile function: it would be called for this frame too, and could rewrite
    # what it holds once the code returns (deepswe_seal.py, "What it cannot stop").
    post = seal.install(settings, "reproduction", [], tracing=False)[0]
    os.chdir(empty)
    del settings  # the key is the vault's alone
    # As `python -c` runs code: the working directory first on sys.path, never this file's.
    sys.path[:] = [""] + [p for p in sys.path[1:] if os.path.abspath(p or os.curdir) != here]
    sys.argv = ["-c"]
    out, stdout = io.StringIO(), sys.stdout
    getvalue = out.getvalue
    post("arm")  # this frame's locals, from here on the same until the report closes
    sys.stdout = out
    try:
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    except BaseException as exc:  # SystemExit too: the script ended there
        error = exc
    else:
        error = None
    finally:
        sys.stdout = stdout
    post("reproduction", *_report(getvalue(), error))
    post("finish", 0)
    return 0


if __name__ == "__main__":
    _exit(main(sys.argv))
