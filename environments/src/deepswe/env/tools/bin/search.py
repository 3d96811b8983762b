#!/usr/bin/env python3
# ruff: noqa: UP004, UP015, UP024, UP031, UP032
"""search: find a term in the files of a directory, or the matching lines of one file.

Runs inside task sandboxes under the image's own python3 (3.6 or newer), standard library only.
Messages, the 100-file limit, the `./relative (N matches)` lines and the python-only default
follow R2E-Gym's src/r2egym/agenthub/tools/search.py, the search DeepSWE-Preview was trained
with (its --python_only flag defaults to on and nothing turns it off). Independent
implementation; deliberate difference: files are listed in sorted order, not os.walk order.
"""

import argparse
import io
import os
import subprocess
import sys

MAX_FILES = 100  # more matching files than this: ask to narrow the search


def utf8_argv(text):
    # Python 3.6 under a C locale decodes argv as ASCII with surrogate escapes; recover UTF-8.
    return os.fsencode(text).decode("utf-8", "surrogateescape")


def count_matches(path, term):
    try:
        with open(path, "r", encoding="utf-8", errors="ignore") as handle:
            return sum(1 for line in handle if term in line)
    except (OSError, UnicodeError):
        return 0  # unreadable files are skipped, as in R2E-Gym


def search_directory(term, directory, python_only):
    directory = os.path.realpath(directory)
    if not os.path.isdir(directory):
        print("Directory '{}' not found or not a directory.".format(directory))
        return 1
    matches = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or (python_only and not name.endswith(".py")):
                continue
            path = os.path.join(root, name)
            count = count_matches(path, term)
            if count:
                matches.append((path, count))
    if not matches:
        print('No matches found for "{}" in {}'.format(term, directory))
        return 0
    if len(matches) > MAX_FILES:
        print(
            'More than {} files matched for "{}" in {}. Please narrow your search.'.format(
                len(matches), term, directory
            )
        )
        return 0
    total = sum(count for _, count in matches)
    print('Found {} matches for "{}" in {}:'.format(total, term, directory))
    for path, count in matches:
        relative = os.path.relpath(path, start=os.getcwd())
        if not relative.startswith("./"):
            relative = "./" + relative
        print("{} ({} matches)".format(relative, count))
    print('End of matches for "{}" in {}'.format(term, directory))
    return 0


def search_file(term, path):
    path = os.path.realpath(path)
    if not os.path.isfile(path):
        print("File '{}' not found or is not a file.".format(path))
        return 1
    try:
        # R2E-Gym runs `grep -n TERM FILE`: the term is a basic regular expression.
        proc = subprocess.Popen(
            ["grep", "-n", term, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = proc.communicate()
        code = proc.returncode
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
    except OSError:  # no grep in the image: fixed-string matching instead
        lines = []
        with open(path, "r", encoding="utf-8", errors="ignore") as handle:
            for number, line in enumerate(handle, 1):
                if term in line:
                    lines.append("{}:{}".format(number, line.rstrip("\n")))
        out, err, code = "\n".join(lines), "", 0 if lines else 1
    if code == 1:
        print('No matches found for "{}" in {}'.format(term, path))
        return 0
    if code != 0:
        print("Error executing grep:\n{}".format(err))
        return code
    print('Matches for "{}" in {}:'.format(term, path))
    print(out.strip())
    return 0


def main():
    parser = argparse.ArgumentParser(prog="search", description="Search files for a term.")
    parser.add_argument("--search_term", required=True, help="Term to search for.")
    parser.add_argument("--path", default=".", help="File or directory (default: .).")
    parser.add_argument(
        "--python_only",
        default=True,
        type=lambda text: text.strip().lower() in ("true", "1", "yes"),
        help="Directory search only looks at .py files (default: true).",
    )
    args = parser.parse_args()
    term, path = utf8_argv(args.search_term), utf8_argv(args.path)
    if os.path.isfile(path):
        return search_file(term, path)
    return search_directory(term, path, args.python_only)


if __name__ == "__main__":
    if hasattr(sys.stdout, "buffer"):  # UTF-8 output whatever the image's locale
        sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace")
    sys.exit(main())
