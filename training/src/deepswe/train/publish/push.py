"""Send a staged plan to the Hub with the unmodified huggingface_hub client.

First a survey of every repo in the plan's order (dataset, step branches, main): create it
(exist_ok) and its branch, read the head of the target revision and its files; those the plan
lacks are printed with the plan as deletions (`.gitattributes` aside: each revision ends up
holding exactly its plan, so a file of an earlier push, a stale shard say, never outlives it).
Then per repo: commit every file but the card, and the deletions, with `parent_commit` = the
surveyed head (a concurrent change makes the Hub refuse the commit, so nothing is deleted that
was not printed), then the card in a second commit on top: a card never describes files that
are not there, and the dataset is pushed before the model card that names it. Files the Hub
already holds are skipped by the client (preupload returns their oids), so an identical rerun
commits nothing and a rerun after an interruption uploads only what is missing. With create_pr
each revision gets one pull request (`refs/pr/N`) holding files, deletions and card, and the
branch itself does not move. The token comes from HF_TOKEN or the user's login, read by the
client; it is never written anywhere.
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
        return PublishError(
            f"{constants.ENDPOINT} refused the token (401) for {repo}: set "
            "HF_TOKEN or run `hf auth login` with a write token"
        )
    if isinstance(err, HfHubHTTPError) and status in (409, 412):
        return PublishError(
            f"{repo} changed on the Hub during the push ({status}): nothing of "
            "this commit landed; rerun to push on top of the new head"
        )
    if isinstance(err, HfHubHTTPError):
        return PublishError(f"the Hub answered {status} for {repo}: {str(err).splitlines()[0]}")
    return PublishError(
        f"cannot reach {constants.ENDPOINT} ({type(err).__name__}): check the "
        "network or HF_ENDPOINT, then rerun (finished uploads are kept)"
    )


def _adds(r: RepoPlan, paths: list[str]) -> list:
    from huggingface_hub import CommitOperationAdd

    return [CommitOperationAdd(p, str(r.staging / p)) for p in paths]


def _survey_repo(api, r: RepoPlan, private: bool) -> None:
    """Create the repo and branch when missing (no file changes), read the revision's head and
    list what it holds: every file not in the plan is deleted by the push (`.gitattributes`
    aside), so the revision ends up holding exactly the plan."""
    api.create_repo(r.repo_id, repo_type=r.repo_type, private=private, exist_ok=True)
    if r.revision != "main":
        api.create_branch(r.repo_id, repo_type=r.repo_type, branch=r.revision, exist_ok=True)
    info = api.repo_info(r.repo_id, repo_type=r.repo_type, revision=r.revision)
    if private and not info.private:
        raise PublishError(
            f"{r.repo_type} {r.repo_id} exists and is public; --private does not "
            "change an existing repo: make it private on the Hub, or drop "
            "--private"
        )
    keep = {f.path for f in r.files} | {".gitattributes"}
    r.head = info.sha
    r.deletes = sorted({s.rfilename for s in info.siblings or []} - keep)


def _push_repo(api, r: RepoPlan, create_pr: bool) -> str:
    """Commit on top of the surveyed head (`parent_commit`): if the revision moved since the
    plan was printed, the Hub refuses and nothing printed as deleted is deleted unseen."""
    from huggingface_hub import CommitOperationDelete

    head = r.head
    deletes = [CommitOperationDelete(p) for p in r.deletes or []]
    files = [f.path for f in r.files if f.path != CARD]
    card = [CARD] if any(f.path == CARD for f in r.files) else []
    if create_pr:
        # One pull request per revision, the card in the same commit: merging it is atomic,
        # so the card cannot land without its files.
        pr = api.create_commit(
            r.repo_id,
            _adds(r, files + card) + deletes,
            repo_type=r.repo_type,
            revision=r.revision,
            parent_commit=head,
            create_pr=True,
            commit_message="Publish run files and the card",
        )
        # The client opens no pull request when every file is already there (pr_url None).
        return f"pull request {pr.pr_revision} {pr.pr_url}" if pr.pr_url else f"{head} (unchanged)"
    for ops, message in (
        (_adds(r, files) + deletes, "Publish run files"),
        (_adds(r, card), "Add the model card"),
    ):
        if ops:
            head = api.create_commit(
                r.repo_id,
                ops,
                repo_type=r.repo_type,
                revision=r.revision,
                parent_commit=head,
                commit_message=message,
            ).oid
    return head


def _each(plan: Plan, step, pushes: bool) -> list[str]:
    """`step(repo_plan)` for every repo in order, a failure translated to one PublishError
    line (naming what already landed when `pushes`); returns one 'repo@revision: result' line
    each."""
    done: list[str] = []
    for r in plan.repos:
        landed = _done_before(done) if pushes else ""
        try:
            result = step(r)
        except Exception as err:  # translated to one line; the traceback is the client's
            if isinstance(err, PublishError):
                raise PublishError(f"{err}{landed}") from None
            if type(err).__module__.startswith(
                ("huggingface_hub", "httpx", "requests")
            ) or isinstance(err, OSError):
                msg = _explain(err, f"{r.repo_type} {r.repo_id}@{r.revision}")
                raise PublishError(f"{msg}{landed}") from err
            raise
        done.append(f"{r.repo_type} {r.repo_id}@{r.revision}: {result}")
    return done


def survey_plan(plan: Plan, private: bool = False) -> None:
    """Before pushing: fill each repo plan's head and the files the push will delete, so the
    printed plan says them. Creates missing repos and branches; changes no file."""
    from huggingface_hub import HfApi

    api = HfApi()
    _each(plan, lambda r: _survey_repo(api, r, private), pushes=False)


def push_plan(plan: Plan, private: bool = False, create_pr: bool = False) -> list[str]:
    """Push every repo of `plan` in its order (surveyed first when it was not); returns one
    'repo@revision: commit' line each."""
    from huggingface_hub import HfApi

    if any(r.head is None for r in plan.repos):
        survey_plan(plan, private)
    api = HfApi()
    return _each(plan, lambda r: _push_repo(api, r, create_pr), pushes=True)


def _done_before(done: list[str]) -> str:
    """What did land before a failure, so that nothing pushed goes unreported either."""
    return f" (already pushed: {', '.join(d.split(':')[0] for d in done)})" if done else ""
