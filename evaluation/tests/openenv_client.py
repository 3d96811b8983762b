"""A client process of the OpenEnv server tests (test_openenv_server.py): one session of the
unmodified openenv client. `python openenv_client.py URL TASK_ID gold` plays the task's gold
patch through the tools and prints the final observation as JSON; `... hang` resets, takes one
step, prints "stepped" and sleeps until killed; `... hold` does the same but waits for a line on
stdin instead, then submits (finish) and prints the final observation as JSON."""

from __future__ import annotations

import json
import sys
import time

from deepswe.env.policies.scripted import GoldPolicy
from deepswe.eval.openenv.client import SWEEnvClient
from deepswe.eval.openenv.models import SWEAction


def main(url: str, task_id: str, mode: str, gold_patch: str = "") -> None:
    with SWEEnvClient(base_url=url, message_timeout_s=300).sync() as env:
        result = env.reset(task_id=task_id)
        chat = list(result.observation.messages)
        if mode in ("hang", "hold"):
            env.step(
                SWEAction(
                    message="<function=execute_bash>\n<parameter=cmd>true</parameter>\n</function>"
                )
            )
            print("stepped", flush=True)
            if mode == "hang":
                time.sleep(600)
            sys.stdin.readline()
            result = env.step(SWEAction(tool="finish", parameters={"command": "submit"}))
        policy = GoldPolicy(gold_patch)
        while not result.done:
            reply = policy.reply(chat, timeout=60).text
            result = env.step(SWEAction(message=reply))
            chat += [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": result.observation.text},
            ]
        print(json.dumps({"outcome": result.observation.outcome, "reward": result.reward}))


if __name__ == "__main__":
    main(*sys.argv[1:4], sys.stdin.read() if sys.argv[3] == "gold" else "")
