"""Which files new in the repository would shadow a module the environment already has.

    <python> deepswe_shadow.py REPO PATH...   (PATH relative to REPO, each a file the patch added)

Prints each PATH whose module, imported by its top-level name, is also importable without the
repository: a new `pytest.py`, `pluggy.py`, `doctest.py` or `pytest_timeout.py` at a folder that
can be on sys.path (one that is not a package: the repository's root, `src/`, a test folder
pytest inserts) would be imported instead of the environment's own.

Standalone: the standard library only, the syntax of the oldest Python a task image may have.
"""

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


def main(argv):
    repo = os.path.abspath(argv[1])
    here = os.path.dirname(os.path.abspath(__file__))

    def outside(p):
        p = os.path.abspath(p or os.curdir)
        parts = p.split(os.sep)
        inside = p == repo or p.startswith(repo + os.sep)
        packages = "site-packages" in parts or "dist-packages" in parts
        return p != here and (not inside or packages)

    sys.path[:] = [p for p in sys.path if outside(p)]
    for rel in argv[2:]:
        name = module_name(repo, rel)
        if name is None:
            continue
        try:
            known = name in sys.builtin_module_names or importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            known = False
        if known:
            sys.stdout.write(rel + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
