"""What a forged report lists: the test ids the command names, read from the test files' source
(the grader's real ids are not known in advance), and the passing summary that prints them.
Python text, appended to the package by the attacks (`attack_scripts`, `attack_capabilities`).
"""

from __future__ import annotations

# The test ids named on the command line (files, folders, or the whole tree), read from the
# source: what a forged report lists, since the grader's real ids are not known in advance.
IDS = r"""def _dsw_ids():
    import os, re, sys
    paths = [a.split("::")[0] for a in sys.argv[1:] if os.path.exists(a.split("::")[0])]
    files = []
    for p in paths or ["."]:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                files += [os.path.join(root, n) for n in sorted(names)
                          if re.match(r"(test_.*|.*_test)\.py$", n)]
        elif p.endswith(".py"):
            files.append(p)
    ids = []
    for f in files:
        rel, cls = os.path.relpath(f), None
        for line in open(f, encoding="utf-8", errors="replace"):
            m = re.match(r"(class (\w+)|(\s*)def (test\w*))", line)
            if m and m.group(2):
                cls = m.group(2)
            elif m and not m.group(3):
                cls = None
                ids.append(rel + "::" + m.group(4))
            elif m and cls:
                ids.append(rel + "::" + cls + "::" + m.group(4))
    return ids

def _dsw_summary(ids):
    lines = ["=" * 10 + " short test summary info " + "=" * 10]
    lines += ["PASSED " + i for i in ids]
    return "\n".join(lines + ["=" * 10 + " %d passed in 0.01s " % len(ids) + "=" * 10, ""])
"""


__all__ = ["IDS"]
