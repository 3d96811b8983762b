"""swe-mini's procedural bugs: every operator edits exactly the bytes it should."""

from __future__ import annotations

import ast
import difflib

from deepswe.data.swemini.mutate import mutation_sites, mutation_sites_where

SOURCE = '''"""Module docstring."""
LIMIT = 10  # module level: never mutated


def clamp(x, lo=0, hi=10, strict=False):
    """Clamp x."""
    if x < lo and not strict:
        return lo
    else:
        return min(x, hi)


def window(items, n):
    total = len(items) + 1
    items.append(n)
    return items[n:total]


def check(name):
    # "é" before a node: ast columns are UTF-8 byte offsets
    s = "é"; return name == s or name is None
'''


def _sites():
    return mutation_sites("pkg/mod.py", SOURCE.encode())


def _by_kind(kind):
    return [m for m in _sites() if m.kind == kind]


def _changed_lines(m) -> list[str]:
    new = m.apply(SOURCE.encode()).decode()
    diff = difflib.unified_diff(SOURCE.splitlines(), new.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_every_mutant_compiles_and_changes_the_code():
    sites = _sites()
    assert len(sites) > 15
    for m in sites:
        new = m.apply(SOURCE.encode())
        assert new != SOURCE.encode()
        ast.parse(new)


def test_module_level_code_and_docstrings_are_never_mutated():
    for m in _sites():
        assert m.function, m
        assert "LIMIT" not in "".join(_changed_lines(m)), m
        assert "docstring" not in m.original.lower() and "Clamp x" not in m.original


def test_comparison_flip_edits_only_the_operator_token():
    (lt,) = [m for m in _by_kind("flip_comparison") if m.original == "<"]
    assert lt.replacement == "<="
    assert _changed_lines(lt) == [
        "-    if x < lo and not strict:",
        "+    if x <= lo and not strict:",
    ]


def test_operators_inside_non_ascii_lines_use_byte_offsets():
    eq = [m for m in _by_kind("flip_comparison") if m.function == "check" and m.original == "=="]
    assert len(eq) == 1
    assert _changed_lines(eq[0])[1] == '+    s = "é"; return name != s or name is None'


def test_boolean_operator_swap_and_not_drop():
    (swap,) = [m for m in _by_kind("swap_boolean_operator") if m.function == "clamp"]
    assert _changed_lines(swap)[1] == "+    if x < lo or not strict:"
    (drop,) = _by_kind("drop_not")
    assert _changed_lines(drop)[1] == "+    if x < lo and strict:"


def test_drop_condition_removes_one_operand():
    drops = {_changed_lines(m)[1] for m in _by_kind("drop_condition")}
    assert drops == {"+    if x < lo:", "+    if not strict:"}


def test_constants_defaults_and_slices_shift_by_one():
    defaults = {(m.original, m.replacement) for m in _by_kind("default_arg")}
    assert defaults == {("0", "1"), ("10", "9"), ("False", "True")}
    assert {(m.original, m.replacement) for m in _by_kind("shift_constant")} >= {("1", "2")}
    slices = {m.replacement for m in _by_kind("shift_slice")}
    assert slices == {"n + 1", "total - 1"}


def test_drop_statement_deletes_whole_lines_only():
    dropped = [m for m in _by_kind("drop_statement") if m.function == "window"]
    assert [_changed_lines(m) for m in dropped] == [
        ["-    total = len(items) + 1"],
        ["-    items.append(n)"],
    ]


def test_swap_if_else_swaps_the_bodies_and_keeps_the_condition():
    (swap,) = _by_kind("swap_if_else")
    new = swap.apply(SOURCE.encode()).decode()
    assert (
        "    if x < lo and not strict:\n        return min(x, hi)\n    else:\n        return lo\n"
        in new
    )


def test_wrong_return_values():
    returns = {(m.function, m.replacement) for m in _by_kind("wrong_return")}
    assert ("clamp", "None") in returns
    assert ("check", "not (name == s or name is None)") in returns


def test_sites_are_sorted_and_unique():
    sites = _sites()
    keys = [m.key for m in sites]
    assert len(keys) == len(set(keys))
    assert sites == sorted(sites, key=lambda m: (m.path, m.start, m.end, m.kind, m.replacement))


def test_sites_where_are_the_sites_the_filter_keeps():
    """deepswe-verify's candidate kinds ask for the sites of one function or one line."""

    def keep(m):
        return m.function == "window"

    where = mutation_sites_where("pkg/mod.py", SOURCE.encode(), keep)
    assert where == [m for m in _sites() if keep(m)] and where
