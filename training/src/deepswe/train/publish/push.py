"""Send a staged plan to the Hub with the unmodified huggingface_hub client.

Per repo: create it (exist_ok), read the head of the target revision, commit every file but
the card with `parent_commit` = that head (a concurrent change makes the Hub refuse the commit),
then the card in a second commit on top: a card never describes files that are not there. Files
the Hub already holds are skipped by the client (preupload returns their oids), so an identical
rerun commits nothing and a rerun after an interruption uploads only what is missing. The token
comes from HF_TOKEN or the user's login, read by the client; it is never written anywhere.
"""

from __future__ import annotations

from deepswe.train.publish.stage import Plan, RepoPlan

CARD = "README.md"


class PublishError(RuntimeError):
    """The push failed: one line saying what to do; anything not reported done was not done."""


def _explain(err: Exception, repo: str) -> PublishError:
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(err, HfHubHTTPError) and status == 401:
        return PublishError(f"{constants.ENDPOINT} refused the token (401) for {repo}: set "
                            "HF_TOKEN or run `hf auth login` with a write token")  # fmt: skip
    if isinstance(err, HfHubHTTPError) and status in (409, 412):
        return PublishError(f"{repo} changed on the Hub during the push ({status}): nothing of "
                            "this commit landed; rerun to push on top of the new head")  # fmt: skip
    if isinstance(err, HfHubHTTPError):
        return PublishError(f"the Hub answered {status} for {repo}: {str(err).splitlines()[0]}")
    return PublishError(f"cannot reach {constants.ENDPOINT} ({type(err).__name__}): check the "
                        "network or HF_ENDPOINT, then rerun (finished uploads are kept)")  # fmt: skip


def _push_repo(api, r: RepoPlan, private: bool, create_pr: bool) -> str:
    from huggingface_hub import CommitOperationAdd

    api.create_repo(r.repo_id, repo_type=r.repo_type, private=private, exist_ok=True)
    if r.revision != "main":
        api.create_branch(r.repo_id, repo_type=r.repo_type, branch=r.revision, exist_ok=True)
    head = api.repo_info(r.repo_id, repo_type=r.repo_type, revision=r.revision).sha
    files = [f.path for f in r.files if f.path != CARD]
    batches = [files, [CARD] if any(f.path == CARD for f in r.files) else []]
    for batch in (b for b in batches if b):
        ops = [CommitOperationAdd(p, str(r.staging / p)) for p in batch]
        info = api.create_commit(
            r.repo_id, ops, repo_type=r.repo_type, revision=r.revision, parent_commit=head,
            commit_message="Add the model card" if batch == [CARD] else "Publish run files",
            create_pr=create_pr,
        )  # fmt: skip
        # With create_pr the branch head does not move: every PR commit stands on `head`.
        head = head if create_pr else info.oid
    return head


def push_plan(plan: Plan, private: bool = False, create_pr: bool = False) -> list[str]:
    """Push every repo of `plan`; returns one 'repo@revision: commit' line each."""
    from huggingface_hub import HfApi

    api = HfApi()
    done = []
    for r in plan.repos:
        try:
            head = _push_repo(api, r, private, create_pr)
        except Exception as err:  # translated to one line; the traceback is the client's
            if type(err).__module__.startswith(("huggingface_hub", "httpx", "requests")) or \
                    isinstance(err, OSError):  # fmt: skip
                raise _explain(err, f"{r.repo_type} {r.repo_id}@{r.revision}") from err
            raise
        done.append(f"{r.repo_type} {r.repo_id}@{r.revision}: {head}")
    return done
