#!/usr/bin/env python3
# ruff: noqa: UP004, UP015, UP024, UP031, UP032
"""execute_bash: run a shell command and print its output in [STDOUT] / [STDERR] blocks.

Runs inside task sandboxes under the image's own python3 (3.6 or newer), standard library only.
Follows R2E-Gym's src/r2egym/agenthub/tools/r2egym/execute_bash.py, the tool DeepSWE-Preview
was trained with: commands whose first word is git, ipython, jupyter or nohup are refused, the
command runs through /bin/sh (subprocess shell=True), and the tool exits with the command's
status. The per-action timeout is the sandbox's job, not this script's. Independent
implementation; output bytes are decoded as UTF-8 whatever the image's locale, and stdin is
closed (R2E-Gym's docker exec attached none).
"""

import argparse
import io
import os
import subprocess
import sys
import threading

BLOCKED_COMMANDS = ("git", "ipython", "jupyter", "nohup")
# Kept per stream; the rest is read and dropped, so `yes` or `cat /dev/urandom` runs into the
# sandbox's timeout instead of filling the sandbox's memory (R2E-Gym kept everything).
MAX_CAPTURE_BYTES = 8 * 1024 * 1024


def _drain(pipe, kept):
    """Read `pipe` to its end, keeping at most MAX_CAPTURE_BYTES in `kept` (a bytearray)."""
    while True:
        chunk = pipe.read(65536)
        if not chunk:
            return
        room = MAX_CAPTURE_BYTES - len(kept)
        if room > 0:
            kept.extend(chunk[:room])


def main():
    parser = argparse.ArgumentParser(prog="execute_bash", description="Execute a bash command.")
    parser.add_argument("--cmd", required=True, help="The command to execute, e.g. 'ls -la'.")
    args = parser.parse_args()
    # Python 3.6 under a C locale decodes argv as ASCII with surrogate escapes; recover UTF-8.
    cmd = os.fsencode(args.cmd).decode("utf-8", "surrogateescape")

    # Like R2E-Gym, an empty command fails here with IndexError (a traceback, exit status 1).
    first_word = cmd.strip().split()[0]
    if first_word in BLOCKED_COMMANDS:
        print(
            "Bash command '{}' is not allowed. Please use a different command or tool.".format(
                first_word
            )
        )
        return 1

    proc = subprocess.Popen(
        cmd,
        shell=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = bytearray(), bytearray()
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out)),
        threading.Thread(target=_drain, args=(proc.stderr, err)),
    ]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    proc.wait()
    out = bytes(out).decode("utf-8", "replace").strip()
    err = bytes(err).decode("utf-8", "replace").strip()
    # R2E-Gym's exact layout: print(x, "\n") leaves "x \n\n" after the stdout block.
    if proc.returncode != 0:
        print("Error executing command:\n")
    print("[STDOUT]\n")
    print(out, "\n")
    print("[STDERR]\n")
    print(err)
    return proc.returncode


if __name__ == "__main__":
    if hasattr(sys.stdout, "buffer"):  # UTF-8 output whatever the image's locale
        sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace")
    sys.exit(main())
