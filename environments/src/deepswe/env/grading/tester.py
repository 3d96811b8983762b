"""The tests run as an unprivileged user; their results leave on a pipe that root reads.

Under strict rules the code under test shares the test process, so nothing that decides the
verdict may be within its reach. The reward run (root, through the sandbox's helper) hands the
repository to the tester (uid 65534, `nobody` in Debian and Ubuntu images) and runs the test
command as that user:

    root: the interpreter, site-packages (and an environment kept inside the repository), the
          repository's `.git`, the graded test files and every conftest.py (and the folders
          above them, sticky like /tmp), the grader's folder, the sandbox's helper and its stdout
    tester: the repository's other files, new files anywhere in it, a home of its own, /tmp

so the tests cannot write the environment they run in, run a hook as root through `.git`, read
or write the helper's `/proc/<pid>/fd`, signal root's processes (a `kill -1` ends the tester's
own), or rewrite what they reported: the launcher writes each result to fd 3, a pipe whose other
end is a root `cat` appending to a file in a folder only root can open. What was reported stays
reported; what comes after the launcher's closing line is never read (`report.read_report`).

The settings (the report's key among them) reach the launcher on fd 5, a pipe a root `cat` fills
from a file only root can read: the launcher reads it to the end before any repository code runs,
so a process that inherited the descriptor (an `xvfb-run`'s X server) holds an empty pipe. Each
protected folder gets an empty `__pycache__` of root's: no bytecode the tester writes stands in
for a protected file (the launcher's seal refuses reading any elsewhere).

The privilege drop is done by the image's own `python3` (the helper's interpreter, so present in
every sandbox; isolated, `-I -S`: no environment variable or site file runs code as root) with
`setgroups`, `setgid`, `setuid`: no `setpriv` or `su` needed. Measured on a swe-mini image, the
hand-over (find, chown, the drop) costs about 20 ms a run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from deepswe.env.sandbox import ExecResult, Sandbox, SandboxError

TESTER_UID = 65534
REPORT_FD = 3
SETTINGS_FD = 5
# Only the tester's own processes and files are reachable from here.
_DROP = (
    "import os, sys; os.setgroups([]); os.setgid({uid}); os.setuid({uid}); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def tester_script(grader_dir: str, tests_script: str, workdir: str, hand_over: bool = True) -> str:
    """Bash run as root in `workdir`: give the repository to the tester, run `tests_script` (a
    file in `grader_dir`) as the tester with fd 3 a pipe to `grader_dir/private/report` and fd 5
    a pipe holding `grader_dir/private/settings` (then removed), and exit with the tests'
    status. `hand_over` False: the repository was handed over by an earlier run in this sandbox
    (what it did stays done: the tester cannot take back root's files or their folders)."""
    g, w, uid = shlex.quote(grader_dir), shlex.quote(workdir), TESTER_UID
    drop = shlex.quote(_DROP.format(uid=uid))
    return f"""set -u
chmod 0700 {g}/private && chmod 0600 {g}/private/settings 2>/dev/null
cd {w} || exit 90
{_hand_over(g, uid) if hand_over else ""}# Hidden tests kept under /root (R2E-Gym's layout) and interpreters under it stay root's,
# readable and traversable.
chmod o+x /root 2>/dev/null
test -d /root/r2e_tests && chmod -R o+rX /root/r2e_tests
install -d -m 0755 {g} && install -d -m 0700 {g}/private || exit 92
install -d -o {uid} -g {uid} -m 0700 {g}/home || exit 92
printf '[safe]\\n\\tdirectory = *\\n' > {g}/home/.gitconfig && chown {uid}:{uid} {g}/home/.gitconfig
# Root's reach over their own files, as the reference harnesses ran the tests as root: the tester
# is root of a user namespace of its own, where the sandbox allows one and nothing beyond it (no
# mount namespace, no chroot: sandbox/seccomp.py); else the plain tester.
# Probed once a sandbox: an earlier run's answer is kept in root's private folder.
reach=() r=0
u=(unshare --user --map-root-user)
if [ -f {g}/private/reach ]; then read -r r < {g}/private/reach
elif "${{u[@]}}" true 2>/dev/null && ! "${{u[@]}}" --mount true 2>/dev/null &&
  ! "${{u[@]}}" chroot / true 2>/dev/null; then r=1; fi
[ "$r" = 1 ] && reach=("${{u[@]}}" --)
echo "$r" > {g}/private/reach
exec 4>&1
( HOME={g}/home USER=nobody LOGNAME=nobody python3 -I -S -c {drop} ${{reach[@]+"${{reach[@]}}"}} \\
    bash {g}/{tests_script} \\
    {REPORT_FD}>&1 1>&4 2>&4 4>&- \\
    {SETTINGS_FD}< <(cat {g}/private/settings 2>/dev/null; rm -f {g}/private/settings) \\
  ) | cat > {g}/private/report
exit "${{PIPESTATUS[0]}}"
"""


def _hand_over(g: str, uid: int) -> str:
    """The root script's part that gives the repository to the tester, but for what decides the
    verdict (see tester_script)."""
    return f"""# The repository to the tester, but for git's data and any environment kept inside it.
prune=(-path ./.git -o -name site-packages -o -name dist-packages)
while IFS= read -r -d '' v; do prune+=(-o -path "$(dirname "$v")"); done \\
  < <(find . -path ./.git -prune -o -name pyvenv.cfg -print0)
find . \\( "${{prune[@]}}" \\) -prune -o -exec chown -h {uid}:{uid} {{}} + || exit 91
# ...but not the files that decide which tests run: the graded ones (listed in protected) and
# every conftest.py stay root's, and so does each folder above them, made like /tmp (anyone may
# add a file, nobody may move or remove root's): the tests cannot write, replace or move the
# tests they are graded by.
deepswe_protect() {{
  [ -e "$1" ] || [ -L "$1" ] || return 0
  chown -hR 0:0 "$1" && find "$1" -type d -exec chmod 1777 {{}} + && \\
    find "$1" -type f -exec chmod a+r,go-w {{}} + || return 1
  # its bytecode cache: root's and empty, so the tester cannot put one there
  if [ -d "$1" ]; then _c="$1/__pycache__"; else _c="$(dirname "$1")/__pycache__"; fi
  rm -rf "$_c" && install -d -o 0 -g 0 -m 0755 "$_c" || return 1
  _d=$(dirname "$1")
  while [ "$_d" != "." ] && [ "$_d" != "/" ]; do chown 0:0 "$_d" && chmod 1777 "$_d" || return 1
    _d=$(dirname "$_d"); done
}}
chown 0:0 . && chmod 1777 . || exit 93
while IFS= read -r -d '' p; do deepswe_protect "$p" || exit 93; done \\
  < <(cat {g}/protected 2>/dev/null; find . -path ./.git -prune -o -name conftest.py -print0)
"""


def report_path(grader_dir: str) -> str:
    """Where root keeps what the tests reported."""
    return f"{grader_dir}/private/report"


@dataclass(frozen=True)
class TesterRun:
    """What the tests' run did, what they reported on fd 3, and whether they ran as root of a
    user namespace of their own (root's reach over their own files) or as the plain tester."""

    result: ExecResult
    report: bytes
    root_reach: bool


def run_as_tester(
    sandbox: Sandbox,
    grader_dir: str,
    script: str,
    workdir: str,
    timeout: float,
    protected: list[str] = (),
    settings: str = "{}",
    hand_over: bool = True,
) -> TesterRun:
    """`script` (bash) run as the tester in `workdir`: its result and what it wrote to fd 3.
    `protected` (repository paths: the graded files) stay root's, as every conftest.py does;
    `settings` reach the tests on fd 5 (SETTINGS_FD). SandboxError when the tester could not be
    set up (no report was ever opened). `hand_over` False: an earlier run in this sandbox gave
    the repository to the tester already (tester_script)."""
    sandbox.write_file(f"{grader_dir}/private/settings", settings)
    sandbox.write_file(f"{grader_dir}/protected", "".join(f"./{p}\0" for p in protected))
    sandbox.write_file(f"{grader_dir}/tests.sh", script)
    tests = sandbox.run(
        tester_script(grader_dir, "tests.sh", workdir, hand_over), cwd=workdir, timeout=timeout
    )
    try:
        reach = sandbox.read_file(f"{grader_dir}/private/reach").strip() == b"1"
        report = sandbox.read_file(report_path(grader_dir))
    except SandboxError:
        if tests.timed_out:
            return TesterRun(tests, b"", False)
        tail = " ".join(tests.stdout[-300:].split())
        raise SandboxError(
            f"the tests could not be started as the tester (exit {tests.exit_code}): {tail}"
        ) from None
    return TesterRun(tests, report, reach)


__all__ = [
    "REPORT_FD",
    "SETTINGS_FD",
    "TESTER_UID",
    "TesterRun",
    "report_path",
    "run_as_tester",
    "tester_script",
]
