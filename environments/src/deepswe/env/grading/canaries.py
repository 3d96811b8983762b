"""Root's canaries: tests written into a graded file's own source before the run, whose outcome
root knows, so that a run reporting anything else for them was taken over.

    graded file's source + a graded test in it + seed -> plant() -> new source, Canaries

Three tests, named from the words of the file's own test names, placed among its tests:
- *fail*: a copy of a graded test of the file (its decorators, its fixtures, its class), its body
  wrapped so that it always ends in a failed assertion, whatever the code under test does. Before a
  fix it fails where the graded test fails; after one it fails at its end. An attack that makes
  the graded test pass without the fix (flipping its failure, swapping its code, rewriting the
  report) makes its copy pass too, unless it tells the two apart;
- *pass*: a test that passes whatever the code does;
- *error*: a test asking for a fixture nobody defines (pytest), or raising a non-assertion
  exception (unittest): reported ERROR.
Root writes them into the root-owned graded file: the code under test reads them as the file's
own tests (in its source, in its module, run by its runner), and nothing it can read says which
they are (the launchers do not know them). Root reads their outcomes from the report
(`Canaries.role_of`) and drops their lines before the graded section is parsed.

A file that does not parse (with this Python's `ast`) gets none; the report then holds no canary
and none is asked for (`Canaries` is None).
"""

from __future__ import annotations

import ast
import keyword
import posixpath
import random
import re
import shlex
from dataclasses import dataclass, field

from deepswe.data.pyparse import parse

ROLES = ("pass", "fail", "error")


def _parse(text: str) -> ast.Module:
    return parse(text)  # one thread at a time (deepswe.data.pyparse)


_PARAMS = re.compile(r"\[.*\]$")


@dataclass(frozen=True)
class Canaries:
    """Where root's canaries are and what each must report."""

    path: str
    """The repository path of the graded file that holds them."""
    names: dict[str, str]
    """role -> the test's name (a function, or a method of `owners[role]`)."""
    owners: dict[str, str] = field(default_factory=dict)
    """role -> the class holding it, "" for a module-level test."""

    def role_of(self, test_id: str) -> str | None:
        """The role of a reported test id, or None: pytest's `path::[Class::]name[params]` and the
        unittest runners' `module::Class::name` both end in the name (and its class)."""
        bare = _PARAMS.sub("", test_id)
        for role, name in self.names.items():
            owner = self.owners.get(role, "")
            tail = f"::{owner}::{name}" if owner else f"::{name}"
            if bare.endswith(tail) and (owner or bare == f"{self.path}{tail}"):
                return role
        return None


def _words(tree: ast.Module, stem: str) -> list[str]:
    names = [stem]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
    words = {w.lower() for n in names for w in re.split(r"[^A-Za-z0-9]+|_|(?<=[a-z])(?=[A-Z])", n)}
    out = sorted(w for w in words if w[:1].isalpha() and w not in ("test", "tests", "self"))
    return out or ["case", "value", "basic"]


def _taken(tree: ast.Module) -> set[str]:
    return {
        n.id if isinstance(n, ast.Name) else n.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Name, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    } | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}


def _find(tree: ast.Module, test_id: str) -> tuple[ast.AST, ast.ClassDef | None] | None:
    """The def node of a graded test id (`path::name` or `path::Class::name`) and its class."""
    parts = _PARAMS.sub("", test_id).split("::")[1:]
    if len(parts) == 1:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == parts[0]:
                return node, None
    elif len(parts) == 2:
        for cls in tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name == parts[0]:
                for node in cls.body:
                    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
                    if isinstance(node, defs) and node.name == parts[1]:
                        return node, cls
    return None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _copy(lines: list[str], node: ast.AST, name: str, tail: str) -> list[str]:
    """The source of `node` (decorators included) renamed `name`, its body run as a nested
    function inside `try: ... finally: <tail>`, so it fails whatever the body does. Nested: when
    the body ends its locals are gone before the tail fails, so the failure's traceback (which
    pytest keeps in sys.last_traceback until the next failure) holds none of its sockets or
    files, and the garbage it left in cycles is collected there, not later in a graded test
    (aiohttp's unclosed-socket warnings, turned into errors, failed the test after the copy)."""
    first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
    head_stmt = node.body[0]  # a decorated def's body starts at its first decorator
    body_start = (
        min([d.lineno for d in getattr(head_stmt, "decorator_list", [])] + [head_stmt.lineno]) - 1
    )
    # A docstring or a one-line def (`def test(): assert x`): the body starts on the def line.
    if body_start < node.lineno:
        return []
    head = lines[first:body_start]
    k = node.lineno - 1 - first
    head[k] = re.sub(rf"(\bdef\s+){re.escape(node.name)}\b", rf"\g<1>{name}", head[k], count=1)
    body = lines[body_start : node.end_lineno]
    pad = " " * node.body[0].col_offset
    params, call = _signature(node.args)
    is_async = isinstance(node, ast.AsyncFunctionDef)
    inner = [("        " + line) if line.strip() else line for line in body]
    return [
        *head,
        f"{pad}{'async ' if is_async else ''}def _run({params}):",
        *[line[4:] if line.startswith(" " * 4) else line for line in inner],
        f"{pad}try:",
        f"{pad}    {'await ' if is_async else ''}_run({call})",
        f"{pad}finally:",
        f"{pad}    __import__('gc').collect()",
        f"{pad}    {tail}",
    ]


def _signature(args: ast.arguments) -> tuple[str, str]:
    """(the parameter list of a nested function taking what `args` takes, the call passing
    them on)."""
    params, call = [], []
    positional = [*args.posonlyargs, *args.args]
    params += [a.arg for a in positional]
    call += [a.arg for a in positional]
    if args.vararg:
        params.append(f"*{args.vararg.arg}")
        call.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        params.append("*")
    params += [a.arg for a in args.kwonlyargs]
    call += [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    if args.kwarg:
        params.append(f"**{args.kwarg.arg}")
        call.append(f"**{args.kwarg.arg}")
    return ", ".join(params), ", ".join(call)


def plant(
    source: str, path: str, graded: list[str], runner: str, seed: str
) -> tuple[str, Canaries] | None:
    """`source` (the graded file at `path`) with root's three canaries, and where they are; None
    when the file does not parse. `graded`: graded test ids of this file, the first found copied;
    `runner`: "pytest" or "unittest" (a runner script: canaries are TestCase methods)."""
    try:
        tree = _parse(source)
    except (SyntaxError, ValueError):
        return None
    rng = random.Random(seed)
    words, taken = _words(tree, path.rsplit("/", 1)[-1].removesuffix(".py")), _taken(tree)
    # a graded test's name, though its file does not define it (a mixin's method): a canary so
    # named would override it (cachetools' test_deepcopy)
    taken |= {_PARAMS.sub("", g).rsplit("::", 1)[-1] for g in graded}

    def fresh(prefix: str) -> str:
        for n in range(1000):
            name = prefix + "_".join(rng.sample(words, min(len(words), 1 + n % 3)))
            name += f"_{n}" if n >= 50 else ""
            if name not in taken and name.isidentifier():
                taken.add(name)
                return name
        raise ValueError("no fresh name")  # pragma: no cover: 1000 names all taken

    names = {role: fresh("test_") for role in ROLES}
    lines = source.splitlines()
    found = next((f for f in (_find(tree, g) for g in graded) if f is not None), None)
    word = rng.choice(words)
    tail = f"assert len({word!r}) == {len(word) + rng.randint(1, 9)}"  # never true
    copied = _copy(lines, found[0], names["fail"], tail) if found else []
    cls = found[1] if found else None
    owners = {role: "" for role in ROLES}
    inserts: list[tuple[int, list[str]]] = []
    pad = " " * (found[0].col_offset if found else 4)
    if copied:
        # Last in its class, or in the file: what running the body again leaves behind (a socket
        # freed late, garbage collected in the next test) falls after the graded tests there.
        at = cls.end_lineno if cls is not None else len(lines)
        inserts.append((at, ["", "", *copied, ""]))
        owners["fail"] = cls.name if cls else ""
    if runner == "unittest":
        if cls is not None:
            block = _methods(names, bool(copied), words, rng, pad)
            inserts.append((cls.end_lineno, block))
            owners.update({r: cls.name for r in ROLES})
        else:
            case = fresh("").title().replace("_", "") + "Test"
            owners.update({r: case for r in ROLES})
            head = f'class {case}(__import__("unittest").TestCase):'
            inserts.append(
                (len(lines), ["", "", head, *_methods(names, False, words, rng, "    ")])
            )
    else:
        inserts.append((_spot(tree, rng, len(lines)), _functions(names, copied, taken, words, rng)))
    # From the bottom up. At one line the copy is inserted last, so it comes out first: a method
    # copied to the end of a class must stay in the class, above any module-level canary.
    copy = inserts[0][1] if copied else None
    for at, block in sorted(inserts, key=lambda x: (x[0], x[1] is not copy), reverse=True):
        lines[at:at] = block
    planted = "\n".join(lines) + "\n"
    made = Canaries(path=path, names=names, owners=owners)
    return (planted, made) if _placed(planted, made) else None


def _placed(text: str, made: Canaries) -> bool:
    """Whether every canary is where a runner collects it: a module-level function, or a
    method of its class."""
    try:
        tree = _parse(text)
    except SyntaxError:
        return False
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    top = {n.name for n in tree.body if isinstance(n, defs)}
    classes = {
        n.name: {m.name for m in n.body if isinstance(m, defs)}
        for n in tree.body
        if isinstance(n, ast.ClassDef)
    }
    for role, name in made.names.items():
        owner = made.owners.get(role, "")
        if name not in (classes.get(owner, set()) if owner else top):
            return False
    return True


def _spot(tree: ast.Module, rng: random.Random, end: int) -> int:
    """A line after a top-level test (or the end of the file): where module-level canaries go."""
    ends = [
        n.end_lineno
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.name.lower().startswith("test")
    ]
    return rng.choice(ends) if ends else end


def _functions(names, copied, taken, words, rng) -> list[str]:
    """Module-level pass and error canaries (pytest), and a fail one when no test was copied."""
    var = rng.choice(words) + "s"
    while var in taken or not var.isidentifier() or keyword.iskeyword(var):  # `a` + s: `as`
        var += "_"
    missing = rng.choice(words) + "_" + rng.choice(words) + "_data"
    while missing in taken:
        missing += "_"
    items = rng.sample(range(2, 50), 3)
    out = [
        "",
        "",
        f"def {names['pass']}():",
        f"    {var} = {items!r}",
        f"    assert len({var}) == 3",
    ]
    out += ["", "", f"def {names['error']}({missing}):", f"    assert {missing} is not None"]
    if not copied:  # distinct items: sorted is never its own reverse
        out += ["", "", f"def {names['fail']}():", f"    {var} = {items!r}"]
        out += [f"    assert sorted({var}) == sorted({var})[::-1]"]
    return [*out, "", ""]


def _methods(names, copied: bool, words, rng, pad: str) -> list[str]:
    """TestCase methods (indented by `pad`) for a runner script: pass, error, and fail when no
    test was copied."""
    items, body = rng.sample(range(2, 50), 3), pad + "    "
    out = ["", f"{pad}def {names['pass']}(self):", f"{body}self.assertEqual(len({items!r}), 3)"]
    out += ["", f"{pad}def {names['error']}(self):", f"{body}{{}}[{rng.choice(words)!r}]"]
    if not copied:
        out += ["", f"{pad}def {names['fail']}(self):"]
        out += [f"{body}self.assertEqual(sorted({items!r}), sorted({items!r})[::-1])"]
    return [*out, ""]


def target(
    ids: list[str], graded_files: list[str], test_files: dict[str, str], tests_link: str
) -> tuple[str, list[str]] | None:
    """(the repository path of the graded file holding the first graded test found, the graded
    ids there as `path::[Class::]name`). pytest's ids start with the file; R2E-Gym's and the
    unittest runners' do not (`name[params]`, `Class.name`, `module::Class::name`): those are
    looked up in the hidden test files' source (`test_files`, name -> text, under
    `tests_link`)."""
    files = set(graded_files)
    sources = {f"{tests_link}/{n}": text for n, text in test_files.items()}
    for test_id in ids:
        head, _, rest = test_id.partition("::")
        if head in files and head.endswith(".py"):
            return head, [i for i in ids if i.startswith(head + "::")]
        bare = _PARAMS.sub("", rest or head)  # parameters hold dots and brackets
        parts = bare.split("::")[-2:] if rest else bare.split(".")[-2:]
        for path, text in sorted(sources.items()):
            if _defines(text, parts):
                return path, [f"{path}::{'::'.join(parts)}"]
    return None


def _defines(text: str, parts: list[str]) -> bool:
    """Whether a test file's source defines the test `parts` names: [name] at module level, or
    [Class, name]."""
    if not all(p.isidentifier() for p in parts):
        return False
    *cls, name = parts
    method = re.search(rf"^[ \t]+(?:async[ \t]+)?def {re.escape(name)}\(", text, re.M)
    if cls:
        return bool(re.search(rf"^class {re.escape(cls[0])}\b", text, re.M) and method)
    return bool(re.search(rf"^(?:async[ \t]+)?def {re.escape(name)}\(", text, re.M))


def picks_by_name(command: str) -> bool:
    """Whether a test command's pytest line selects its tests by name (`-k`, node ids): canaries
    written into a file would not run. Only what follows pytest counts (an environment variable
    or `-W ignore::Warning` may hold `::`)."""
    for line in command.splitlines():
        try:
            tokens = shlex.split(line)
        except ValueError:
            return True
        names = [posixpath.basename(t) for t in tokens]
        at = next((k for k, n in enumerate(names) if n in ("pytest", "py.test")), None)
        if at is None:
            continue
        args = tokens[at + 1 :]
        if any("::" in t or t == "-k" or (t.startswith("-k") and len(t) > 2) for t in args):
            return True
    return False


__all__ = ["ROLES", "Canaries", "picks_by_name", "plant", "target"]
