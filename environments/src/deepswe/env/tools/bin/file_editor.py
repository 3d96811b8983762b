#!/usr/bin/env python3
# ruff: noqa: UP004, UP015, UP024, UP031, UP032
"""file_editor: view, create, str_replace, insert and undo_edit (the DeepSWE agent's editor).

Runs inside task sandboxes under the image's own python3 (3.6 or newer), standard library only,
so it avoids dataclasses, capture_output= and other 3.7+ features. One process per call: the
undo history lives in a JSON state file outside the repository.

DeepSWE-Preview was trained with R2E-Gym's editor (src/r2egym/agenthub/tools/r2egym/file_editor.py,
run with its defaults: python_only on, linting off), so the messages, the 10,000-character clip,
the 4-line edit snippets, the automatic condensed view of .py files over 110 lines and the
python-only restriction of `view` follow that file. This is an independent implementation.
Deliberate differences: directory listings are sorted (R2E-Gym prints `find` order) and booleans
parse "true"/"false" properly. Reads are strict UTF-8, unless a chardet wheel is at
$DEEPSWE_EDITOR_DECODER (default /usr/local/lib/deepswe-tools/chardet.whl, written there under
the r2e-gym scaffold, deepswe.env.tools.scaffold): then, as R2E-Gym's `read_file`, each file is
decoded with the encoding chardet guesses from its bytes (UTF-8 when it guesses none).
"""

import argparse
import ast
import io
import json
import os
import sys
import traceback
from pathlib import Path

STATE_FILE = os.environ.get("DEEPSWE_EDITOR_STATE", "/var/tmp/editor_state.json")
SNIPPET_LINES = 4  # context lines around an edit (R2E-Gym SNIPPET_LINES)
MAX_RESPONSE_LEN = 10000  # characters before clipping (R2E-Gym MAX_RESPONSE_LEN)
CONCISE_OVER_LINES = 110  # .py files longer than this are shown condensed by default
TRUNCATED_MESSAGE = (
    "<response clipped><NOTE>To save on context only part of this file has been "
    "shown to you. You should retry this tool after you have searched inside the file "
    "with `grep -n` in order to find the line numbers of what you are looking for.</NOTE>"
)
LINT_ERROR_TEMPLATE = (
    "Your proposed edit has introduced new syntax error(s).\n"
    "Please read this error message carefully and then retry editing the file.\n"
    "ERRORS:\n"
)
CONDENSED_HEADER = (
    "Here is a condensed view for file: {path}; [Note: Useful for understanding file structure "
    "in a concise manner. Please use specific view_range without concise cmd if you want to "
    "explore further into the relevant parts.]\n"
)


class EditorError(Exception):
    """A usage or file-system error, printed as `ERROR: <message>`."""


def clip(text):
    if len(text) <= MAX_RESPONSE_LEN:
        return text
    return text[:MAX_RESPONSE_LEN] + TRUNCATED_MESSAGE


DECODER = os.environ.get("DEEPSWE_EDITOR_DECODER", "/usr/local/lib/deepswe-tools/chardet.whl")
_detect = []  # [chardet.detect] once loaded, [None] when there is no decoder


def guessed_encoding(path):
    """chardet's guess for the file's bytes when a decoder is installed, else UTF-8."""
    if not _detect:
        _detect.append(None)
        if DECODER and os.path.isfile(DECODER):
            sys.path.insert(0, DECODER)  # a pure-Python wheel imports from its zip
            try:
                import chardet

                _detect[0] = chardet.detect
            except Exception:  # an interpreter the wheel does not support: strict UTF-8
                pass
    if _detect[0] is None:
        return "utf-8"
    with open(str(path), "rb") as handle:
        return _detect[0](handle.read())["encoding"] or "utf-8"


def read_text(path):
    # Universal-newline text read, as R2E-Gym's Path.read_text: CRLF files read as LF.
    with open(str(path), "r", encoding=guessed_encoding(path)) as handle:
        return handle.read()


def write_text(path, text):
    with open(str(path), "w", encoding="utf-8") as handle:
        handle.write(text)


def numbered(content, descriptor, first_line=1):
    """R2E-Gym's `_make_output`: clip, expand tabs, number lines as `%6d<TAB>line`."""
    lines = clip(content).expandtabs().split("\n")
    body = "\n".join("{:6}\t{}".format(i + first_line, line) for i, line in enumerate(lines))
    return "Here's the result of running `cat -n` on {}:\n{}\n".format(descriptor, body)


def load_history():
    try:
        with open(STATE_FILE, "r", encoding="utf-8") as handle:
            return dict(json.load(handle))
    except (IOError, OSError) as exc:
        if os.path.exists(STATE_FILE):
            print("Warning: Could not load editor history from {}: {}".format(STATE_FILE, exc))
        return {}
    except ValueError as exc:
        print("Warning: Could not load editor history from {}: {}".format(STATE_FILE, exc))
        return {}


def save_history(history):
    try:
        tmp = STATE_FILE + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(history, handle)
        os.replace(tmp, STATE_FILE)  # atomic: a killed call never leaves half a history
    except (IOError, OSError) as exc:
        print("Warning: Could not write editor history to {}: {}".format(STATE_FILE, exc))


def list_directory(root, python_only):
    """`find -L ROOT -maxdepth 2 -not -path '*/.*' [( -type d -o -name '*.py' )]`, sorted."""
    found = [str(root)]

    def walk(directory, depth):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            if name.startswith("."):
                continue
            full = os.path.join(directory, name)
            is_dir = os.path.isdir(full)  # follows symlinks, like find -L
            if not python_only or is_dir or name.endswith(".py"):
                found.append(full)
            if is_dir and depth < 2:
                walk(full, depth + 1)

    walk(str(root), 1)
    return "\n".join(found) + "\n"


def _is_docstring(stmt):
    if not isinstance(stmt, ast.Expr):
        return False
    value = stmt.value
    legacy_str = getattr(ast, "Str", None)  # Python < 3.8 parses strings as ast.Str
    if legacy_str is not None and isinstance(value, legacy_str):
        return True
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def _last_line(node):
    """Highest 1-based line number in a subtree (for Pythons without end_lineno)."""
    best = getattr(node, "lineno", 0)
    for child in ast.iter_child_nodes(node):
        best = max(best, _last_line(child))
    return best


def elided_lines(path, text):
    """(0-based index, text) pairs with long function bodies and class docstrings elided."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise EditorError("Syntax error for file {}: {}".format(path, exc)) from exc
    ranges = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first, last = node.body[0], node.body[-1]
            start = first.lineno - 1
            if getattr(last, "end_lineno", None):
                end = last.end_lineno - 1
            else:
                doc = ast.get_docstring(node)
                if doc:  # before 3.8 a docstring's lineno is its last line
                    start -= doc.count("\n") + 1
                end = _last_line(last) - 1
            if end - start >= 3:
                ranges.append((start, end))
        if isinstance(node, ast.ClassDef) and node.body and _is_docstring(node.body[0]):
            doc_node = node.body[0]
            if getattr(doc_node, "end_lineno", None):
                start, end = doc_node.lineno - 1, doc_node.end_lineno - 1
            else:
                start, end = node.lineno, _last_line(doc_node) - 1
            if end - start >= 4:
                ranges.append((start + 1, end - 1))
    hidden = set()
    for start, end in ranges:
        hidden.update(range(start, end + 1))
    notes = [
        (start, "... eliding lines {}-{} ...".format(start + 1, end + 1)) for start, end in ranges
    ]
    kept = [(i, line) for i, line in enumerate(text.splitlines()) if i not in hidden]
    return sorted(notes + kept, key=lambda pair: pair[0])  # stable: notes first at a tie


def view(path, view_range, concise, python_only):
    """Returns (output, error)."""
    if path.is_dir():
        listing = list_directory(path, python_only)
        head = "Here's the files and directories up to 2 levels deep in {}, excluding hidden:\n"
        return clip(head.format(path) + listing), ""
    if python_only and path.suffix != ".py":
        # R2E-Gym's message already starts with "ERROR: " and is printed after another
        # "ERROR: ", so the model saw "ERROR: ERROR: Viewing ..."; kept for fidelity.
        return "", (
            "ERROR: Viewing non-Python files is disallowed for saving context. "
            "File '{}' is not a .py file.".format(path.name)
        )
    text = read_text(path)
    if path.suffix == ".py" and not view_range and not concise:
        concise = len(text.splitlines()) > CONCISE_OVER_LINES
    if path.suffix == ".py" and concise:
        lines = elided_lines(path, text)
    else:
        lines = list(enumerate(text.splitlines()))
    if view_range:
        start, end = view_range
        total = len(lines)
        if not 1 <= start <= total:
            return "", "Invalid view_range {}: start line must be in [1, {}]".format(
                view_range, total
            )
        if end != -1 and (end < start or end > total):
            return "", (
                "Invalid view_range {}: end must be >= start and <= {}, or -1 to view until "
                "end.".format(view_range, total)
            )
        lines = [(i, s) for i, s in lines if i + 1 >= start and (end == -1 or i + 1 <= end)]
    if concise:
        head = CONDENSED_HEADER.format(path=path)
    else:
        head = "Here's the result of running `cat -n` on the file: {}:\n".format(path)
    return clip(head + "\n".join("{:6d} {}".format(i + 1, s) for i, s in lines)), ""


class Editor(object):
    def __init__(self, history, lint):
        self.history = history
        self.lint = lint

    def lint_error(self, path, text):
        if not (self.lint and path.suffix == ".py"):
            return ""
        try:
            ast.parse(text, filename=str(path))
        except SyntaxError as exc:
            return LINT_ERROR_TEMPLATE + str(exc)
        return ""

    def read(self, path):
        try:
            return read_text(path)
        except Exception as exc:
            raise EditorError("Failed to read file {}: {}".format(path, exc)) from exc

    def write(self, path, text, previous):
        try:
            write_text(path, text)
        except Exception as exc:
            raise EditorError("Failed to write file {}: {}".format(path, exc)) from exc
        self.history.setdefault(str(path), []).append(previous)

    def create(self, path, file_text):
        if file_text is None:
            raise EditorError("Cannot create file without 'file_text' parameter.")
        error = self.lint_error(path, file_text)
        if error:
            return "", error
        try:
            write_text(path, file_text)
        except Exception as exc:
            raise EditorError("Error creating file at {}: {}".format(path, exc)) from exc
        self.history.setdefault(str(path), []).append("")  # undo of a create empties the file
        return (
            "File created at {}. ".format(path)
            + numbered(file_text, str(path))
            + "Review the file and make sure that it is as expected. Edit the file if necessary."
        ), ""

    def str_replace(self, path, old_str, new_str):
        if old_str is None:
            raise EditorError("Missing required parameter 'old_str' for 'str_replace'.")
        content = self.read(path)
        count = content.count(old_str)
        if count == 0:
            raise EditorError(
                "No occurrences of '{}' found in {} for replacement.".format(old_str, path)
            )
        if count > 1:
            raise EditorError(
                "Multiple occurrences of '{}' found in {}. "
                "Please ensure it is unique before using str_replace.".format(old_str, path)
            )
        new_str = new_str or ""
        updated = content.replace(old_str, new_str)
        error = self.lint_error(path, updated)
        if error:
            return "", error
        self.write(path, updated, content)
        line = content.split(old_str)[0].count("\n")
        first = max(0, line - SNIPPET_LINES)
        last = line + SNIPPET_LINES + new_str.count("\n")
        snippet = "\n".join(updated.split("\n")[first : last + 1])
        return (
            "The file {} has been edited. ".format(path)
            + numbered(snippet, "a snippet of {}".format(path), first + 1)
            + "Review the changes and make sure they are as expected. Edit the file again if necessary."
        ), ""

    def insert(self, path, insert_line, new_str):
        if new_str is None:
            raise EditorError("Missing required parameter 'new_str' for 'insert'.")
        if insert_line is None:
            raise EditorError("Missing required parameter 'insert_line' for 'insert'.")
        content = self.read(path)
        lines = content.split("\n")
        if insert_line < 0 or insert_line > len(lines):
            raise EditorError(
                "Invalid insert_line {}. Must be in [0, {}].".format(insert_line, len(lines))
            )
        new_lines = new_str.split("\n")
        updated = "\n".join(lines[:insert_line] + new_lines + lines[insert_line:])
        error = self.lint_error(path, updated)
        if error:
            return "", error
        self.write(path, updated, content)
        snippet = "\n".join(
            lines[max(0, insert_line - SNIPPET_LINES) : insert_line]
            + new_lines
            + lines[insert_line : insert_line + SNIPPET_LINES]
        )
        return (
            "The file {} has been edited. ".format(path)
            + numbered(
                snippet, "a snippet of the edited file", max(1, insert_line - SNIPPET_LINES + 1)
            )
            + "Review the changes and make sure they are as expected (correct indentation, no "
            "duplicate lines, etc). Edit the file again if necessary."
        ), ""

    def undo_edit(self, path):
        stack = self.history.get(str(path)) or []
        if not stack:
            raise EditorError("No previous edits found for {} to undo.".format(path))
        previous = stack.pop()
        try:
            write_text(path, previous)
        except Exception as exc:
            raise EditorError("Failed to write file {}: {}".format(path, exc)) from exc
        return "Last edit to {} undone successfully. ".format(path) + numbered(
            previous, str(path)
        ), ""


def run(editor, args):
    if args.path is None:
        raise EditorError("Missing required parameter 'path'.")
    path = Path(args.path)
    if args.command == "create":
        if path.exists():
            raise EditorError(
                "File already exists at: {}. Cannot overwrite with 'create'.".format(path)
            )
    elif not path.exists():
        raise EditorError("The path '{}' does not exist.".format(path))
    if path.is_dir() and args.command != "view":
        raise EditorError(
            "The path '{}' is a directory. Only 'view' can be used on directories.".format(path)
        )
    if args.command == "view":
        return view(path, args.view_range, args.concise, args.python_only)
    if args.command == "create":
        return editor.create(path, args.file_text)
    if args.command == "str_replace":
        return editor.str_replace(path, args.old_str, args.new_str)
    if args.command == "insert":
        return editor.insert(path, args.insert_line, args.new_str)
    if args.command == "undo_edit":
        return editor.undo_edit(path)
    raise EditorError(
        "Unrecognized command '{}'. Allowed commands: view, create, str_replace, insert, "
        "undo_edit.".format(args.command)
    )


def view_range_arg(text):
    parts = text.strip().strip("[]()").replace(",", " ").split()
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(
            "Expected two numbers, got: {}".format(text.strip().strip("[]()"))
        )
    try:
        return [int(parts[0]), int(parts[1])]
    except ValueError:
        raise argparse.ArgumentTypeError(
            "Could not convert {} to integers.".format(parts)
        ) from None


def bool_arg(text):
    return text.strip().lower() in ("true", "1", "yes")


def utf8_argv(text):
    # Python 3.6 under a C locale decodes argv as ASCII with surrogate escapes; recover UTF-8.
    return os.fsencode(text).decode("utf-8", "surrogateescape") if text is not None else None


def main():
    parser = argparse.ArgumentParser(prog="file_editor", description="View, create and edit files.")
    parser.add_argument("command", help="view, create, str_replace, insert or undo_edit")
    parser.add_argument("--path", default=None)
    parser.add_argument("--file_text", default=None)
    parser.add_argument("--view_range", type=view_range_arg, default=None)
    parser.add_argument("--old_str", default=None)
    parser.add_argument("--new_str", default=None)
    parser.add_argument("--insert_line", type=int, default=None)
    parser.add_argument("--enable_linting", type=bool_arg, default=False)
    parser.add_argument("--concise", type=bool_arg, default=False)
    parser.add_argument("--python_only", type=bool_arg, default=True)
    args = parser.parse_args()
    for name in ("path", "file_text", "old_str", "new_str"):
        setattr(args, name, utf8_argv(getattr(args, name)))

    editor = Editor(load_history(), args.enable_linting)
    try:
        output, error = run(editor, args)
        print(output)
        if error:
            print("ERROR: " + error)
    except EditorError as exc:
        print("ERROR: {}".format(exc))
    except Exception as exc:
        print("ERROR: Unhandled exception: {}".format(exc))
        traceback.print_exc()
    save_history(editor.history)


if __name__ == "__main__":
    if hasattr(sys.stdout, "buffer"):  # UTF-8 output whatever the image's locale
        sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace")
    main()
