"""The test-writing episode: the project's agent loop, tools and sandbox, with a test-generation
prompt in place of the fix-the-issue one, against any policy (an OpenAI-compatible endpoint in
practice: `PolicySpec(name="openai", base_url=..., model=...)`).

The agent is asked for /testbed/test_issue.py printing "Issue reproduced" / "Issue resolved" /
"Other issues" (the format of R2E-Gym's reproduction tests for DeepSWE's TTS). It sees only the
public problem statement. The prompt below is ours; only the three output lines are fixed by
the format. The loop is `deepswe.env.agent.loop.run_episode` unchanged: the policy is wrapped so
that it reads the test-generation prompt as its first user message, and the trajectory records
that prompt, which is what the model saw.
"""

from __future__ import annotations

from pathlib import Path

from deepswe.data.task import Task
from deepswe.env.agent import prompts
from deepswe.env.agent.loop import EpisodeLimits, run_episode
from deepswe.env.policies import Policy, PolicySpec, Reply, make_policy
from deepswe.env.sandbox import SandboxError, backend_class
from deepswe.env.trajectory import Ending
from deepswe.eval.store import atomic_write_json
from deepswe.verify.eb.common import WORKDIR, SandboxPlan
from deepswe.verify.eb.testgen import TEST_FILE, Written

TESTGEN_PROMPT = """\
I have uploaded a python code repository in the /testbed directory.

Here is a GitHub issue reported against it:

<github_issue>
{problem_statement}
</github_issue>

Do NOT fix the issue. Your job is to write a test that tells whether the issue is present.

Write a standalone Python script at /testbed/test_issue.py that:
- imports the repository's code and exercises exactly the behaviour the issue describes;
- uses only the standard library and the repository (no pytest, no network, no new packages);
- prints exactly one of these three lines, alone on its line:
    Issue reproduced   (the behaviour the issue reports happens)
    Issue resolved     (the code behaves as the issue says it should)
    Other issues       (anything else: an unrelated exception, a broken setup)
- catches unexpected exceptions and prints "Other issues" for them, rather than crashing.

Steps:
1. Explore the repository to find the code the issue is about.
2. Write /testbed/test_issue.py with the file_editor tool.
3. Run it from /testbed with `python test_issue.py`. This repository still has the bug, so it must
   print "Issue reproduced". If it does not, fix the script (never the repository) and run it again.
4. Make sure the check for "Issue resolved" tests the behaviour the issue asks for, not merely
   the absence of the reported output.
5. Do not modify any other file. When the script is right, call the `finish` tool.
"""


def testgen_prompt(problem_statement: str) -> str:
    # str.replace, not format: an issue's own braces pass through untouched.
    return TESTGEN_PROMPT.replace("{problem_statement}", problem_statement)


class TestgenPolicy:
    """`policy`, shown the test-generation prompt instead of the loop's fix-the-issue prompt."""

    __test__ = False

    def __init__(self, policy: Policy, problem_statement: str) -> None:
        self.policy, self.name = policy, policy.name
        self.original = prompts.user_prompt(problem_statement, "eval")
        self.replacement = testgen_prompt(problem_statement)

    def swap(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """The chat with its first user message's prompt replaced (step reminders kept)."""
        out = [dict(m) for m in messages]
        for m in out:
            if m["role"] == "user":
                if m["content"].startswith(self.original):
                    m["content"] = self.replacement + m["content"][len(self.original) :]
                break
        return out

    def reply(self, messages: list[dict[str, str]], *, timeout: float) -> Reply:
        return self.policy.reply(self.swap(messages), timeout=timeout)

    def count_tokens(self, messages: list[dict[str, str]]) -> int | None:
        return self.policy.count_tokens(self.swap(messages))


class AgentTestWriter:
    """Writes tests with agent episodes of `spec`'s policy; each episode is kept as JSON under
    `episodes_dir` (when given) for inspection."""

    def __init__(
        self,
        spec: PolicySpec,
        limits: EpisodeLimits | None = None,
        episodes_dir: Path | None = None,
    ) -> None:
        self.spec, self.limits, self.episodes_dir = spec, limits or EpisodeLimits(), episodes_dir
        self.name = f"agent:{spec.model or spec.name}"

    def write(self, task: Task, image: str, plan: SandboxPlan, index: int) -> Written:
        statement = task.public().problem_statement
        policy = TestgenPolicy(make_policy(self.spec, task, run=index), statement)
        sandbox = backend_class(plan.backend)(image, plan.limits)
        try:
            traj = run_episode(task, policy, sandbox, self.limits)
            if traj.ending is Ending.INFRA_ERROR:
                raise SandboxError(f"test-writing episode: {traj.ending_detail}")
            try:
                source = sandbox.read_file(f"{WORKDIR}/{TEST_FILE}").decode("utf-8", "replace")
            except FileNotFoundError:
                source = None
        finally:
            sandbox.close()
        traj.messages[:] = policy.swap(traj.messages)
        if self.episodes_dir is not None:
            path = self.episodes_dir / task.instance_id / f"episode-{index}.json"
            atomic_write_json(path, traj.model_dump(mode="json"))
        steps = f"{len(traj.steps)} steps, ending {traj.ending.value}"
        if source is None:
            return Written(None, f"{self.name}: no /testbed/{TEST_FILE} after {steps}")
        return Written(source, f"{self.name}: written in {steps}")
