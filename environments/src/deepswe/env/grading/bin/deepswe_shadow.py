"""Which files new in the repository would shadow a module the tests could otherwise import.

    <python> -I deepswe_shadow.py REPO --paths-from LIST   (LIST: a file of NUL-ended paths)
    <python> deepswe_shadow.py REPO PATH...

Each PATH (relative to REPO) is a file the patch added. Prints each one whose module, imported by
its top-level name, is also importable from anywhere but the folder the new file sits in:
- from the environment (the interpreter's sys.path outside the repository, and site-packages
  wherever they are, PYTHONPATH's entries included): a new `pytest.py`, `pluggy.py`,
  `doctest.py` or `pytest_timeout.py` would be imported instead of the environment's own;
- from another of the repository's folders on sys.path (its root, which `python -m pytest`
  puts first, and what a .pth file or PYTHONPATH adds, `src/` say) holding a module or a
  regular package of that name: a fixed copy of `src/isodate/` added as `isodate/` at the root
  would be imported instead of the repository's own package.
A file inside a package (a folder holding `__init__.py`, the repository's root excepted) is
never imported by its top-level name. When a new package shadows, every PATH under its folder
is printed too, so that all of it is put back.

The grader runs it as root with the task's interpreter, isolated (`-I`: site-packages and their
.pth files as the tests see them, but no PYTHON* variable, user site or script folder the patch
could fill): nothing the patch wrote runs, and nothing is imported from the folders searched
(PYTHONPATH is read here, as text). Paths are bytes in and bytes out, one a line.

Standalone: the standard library only, the syntax of the oldest Python a task image may have
(3.5).
"""

import importlib.machinery
import importlib.util
import os
import sys

SUFFIXES = (".py", ".pyc", ".so", ".pyd")


def module_name(repo, rel):
    """The top-level name `rel` is imported by, or None (inside a package, not a module)."""
    full = os.path.join(repo, rel)
    folder, base = os.path.split(full)
    if base == "__init__.py":
        folder, base = os.path.split(folder)  # a new package: its folder's name
    elif not base.endswith(SUFFIXES):
        return None
    if folder != repo and os.path.exists(os.path.join(folder, "__init__.py")):
        # Inside a package: imported as pkg.name, never by its top-level name. The
        # repository's root is on sys.path whatever it holds (a root `__init__.py` included).
        return None
    name = base.split(".")[0]
    return name if name.isidentifier() else None


def place(repo, rel):
    """(top-level name, the folder it is imported from, the new package's folder or None) for
    the new file `rel`, or None when it is not imported by a top-level name."""
    full = os.path.join(repo, rel)
    folder, base = os.path.split(full)
    package = None
    if base == "__init__.py":
        package = folder
        folder, base = os.path.split(folder)  # a new package: its folder's name
    name = module_name(repo, rel)
    return None if name is None else (name, folder, package)


def _real(path):
    return os.path.realpath(os.path.abspath(path or os.curdir))


def _inside(path, top):
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def search_path(repo, here):
    """(the environment's sys.path entries, the repository's folders on sys.path)."""
    pythonpath = os.environ.get("PYTHONPATH", "")
    entries = [p for p in sys.path] + [p for p in pythonpath.split(os.pathsep) if p] + [repo]
    environment, repository = [], []
    for entry in entries:
        real = _real(entry)
        parts = real.split(os.sep)
        packages = "site-packages" in parts or "dist-packages" in parts
        if real == here or real in environment or real in repository:
            continue
        if _inside(real, repo) and not packages:
            repository.append(real)
        else:
            environment.append(real)
    return environment, repository


def _is(spec, full):
    origin = getattr(spec, "origin", None)
    return bool(origin) and os.path.exists(origin) and _real(origin) == _real(full)


def shadows(repo, rel, environment, repository):
    """Whether the new file `rel` shadows a module importable from elsewhere."""
    where = place(repo, rel)
    if where is None:
        return False
    name, folder, _ = where
    full, folder = os.path.join(repo, rel), _real(folder)
    if name in sys.builtin_module_names:
        return True
    saved = sys.path[:]
    sys.path[:] = [p for p in environment if p != folder]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    if spec is not None and not _is(spec, full):
        return True
    for entry in repository:
        if entry == folder:
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, [entry])
        except (ImportError, ValueError):
            spec = None
        # A module or a regular package: a bare folder there (docs/, tests/) is no package.
        if spec is not None and getattr(spec, "has_location", False) and not _is(spec, full):
            return True
    return False


def read_paths(argv):
    """The new files' paths: from the NUL-ended list `--paths-from LIST`, or the arguments."""
    if len(argv) > 3 and argv[2] == "--paths-from":
        with open(argv[3], "rb") as fh:
            return [os.fsdecode(p) for p in fh.read().split(b"\0") if p]
    return argv[2:]


def main(argv):
    repo = _real(argv[1])
    here = _real(os.path.dirname(os.path.abspath(__file__)))
    environment, repository = search_path(repo, here)
    paths = read_paths(argv)
    flagged, packages = set(), []
    for rel in paths:
        try:
            found = shadows(repo, rel, environment, repository)
        except Exception:  # a path that breaks the check is not let through unseen
            found = place(repo, rel) is not None
        if found:
            flagged.add(rel)
            package = place(repo, rel)[2]
            if package is not None:
                packages.append(os.path.normpath(package) + os.sep)
    out = getattr(sys.stdout, "buffer", sys.stdout)
    for rel in paths:
        full = os.path.normpath(os.path.join(repo, rel))
        if rel in flagged or any(full.startswith(p) for p in packages):
            out.write(os.fsencode(rel) + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
