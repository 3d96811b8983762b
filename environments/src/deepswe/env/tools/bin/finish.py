#!/usr/bin/env python3
# ruff: noqa: UP004, UP015, UP024, UP031, UP032
"""finish: end the episode (`finish submit [--result TEXT]`).

Follows R2E-Gym's src/r2egym/agenthub/tools/finish.py: `submit` prints <<<Finished>>> and the
result text is accepted but not used. The agent loop ends the episode on any `finish` call and
shows the model "<<< Finished >>>" (R2E-Gym's Observation), so this script mainly exists so
that every tool in the prompt is a real command in the sandbox.
"""

import argparse
import sys


def main():
    parser = argparse.ArgumentParser(prog="finish", description="Finish the task.")
    parser.add_argument("command", nargs="?", default="submit", help="Only `submit` is supported.")
    parser.add_argument("--result", default="", help="Final message (optional).")
    args = parser.parse_args()
    if args.command != "submit":
        print("Unknown command '{}'. Only `submit` is supported.".format(args.command))
        return 1
    print("<<<Finished>>>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
