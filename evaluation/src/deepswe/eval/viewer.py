"""view.html: one self-contained page to browse the episodes of a run folder.

No server, no network, no third-party script: the page is this module's CSS and JavaScript
(viewer.css, viewer.js beside it) plus the run's data as JSON. The episode list is one small
JSON block; each episode's full trajectory is a JSON block of its own, parsed only when the
episode is opened, so a run of thousands of episodes opens without parsing them all.

Model output is never markup. The data sits in `<script type="application/json">` blocks
(never executed) with every `<`, `>` and `&` written as a JSON escape, so no text can close the
block; the script builds the page with `textContent` only; and the page's Content-Security-Policy
allows no script but the viewer's own (by its sha256) and no network at all.

Verifier scores are read from the verdict files `deepswe-verify` writes beside the episodes
(`verdicts/<verifier>/<instance_id>/run-<k>.json`) as plain JSON: evaluation does not import
the verifiers (DESIGN.md's layers).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path

from deepswe.eval.store import EpisodeRecord, RunStore

VIEW_FILE = "view.html"
_HERE = Path(__file__).resolve().parent


def load_verdicts(run_dir: Path) -> dict[tuple[str, int], dict[str, dict]]:
    """(instance_id, run) -> verifier -> {status, score, detail}, from whatever verdict files
    exist. A file that is not a verdict is skipped: the page shows what it can read."""
    out: dict[tuple[str, int], dict[str, dict]] = {}
    for path in sorted((Path(run_dir) / "verdicts").glob("*/*/run-*.json")):
        try:
            v = json.loads(path.read_text(encoding="utf-8"))
            key = (str(v["instance_id"]), int(v["run"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out.setdefault(key, {})[path.parts[-3]] = {
            "status": v.get("status", ""),
            "score": v.get("score"),
            "detail": v.get("detail", ""),
        }
    return out


def _outcome(rec: EpisodeRecord) -> str:
    """What the list shows as the outcome: the grader's, or why there is none."""
    return rec.outcome.value if rec.outcome is not None else rec.status.value


def _scores(rec: EpisodeRecord, verdicts: dict[str, dict]) -> dict[str, float]:
    scores = {name: v["score"] for name, v in verdicts.items() if v["score"] is not None}
    if rec.verifier_score is not None:
        scores.setdefault("record", rec.verifier_score)  # EpisodeRecord.verifier_score
    return scores


def episode_row(rec: EpisodeRecord, verdicts: dict[str, dict]) -> dict:
    """One line of the episode list: what the filters and the table read."""
    traj = rec.trajectory
    return {
        "id": rec.instance_id,
        "run": rec.run,
        "repo": rec.repo,
        "outcome": _outcome(rec),
        "ending": traj.ending.value if traj else "none",
        "steps": len(traj.steps) if traj else 0,
        "seconds": round(rec.finished_at - rec.started_at, 1) if rec.finished_at else None,
        "scores": _scores(rec, verdicts),
        "test_infra": len(traj.grade.test_infra) if traj and traj.grade else 0,
        "gate": max((f.tier for f in traj.grade.static_gate), default=0)
        if traj and traj.grade
        else 0,
    }


VIEW_LOG_CHARS = 20_000  # of each episode's test log, the end (where pytest's summary is)


def _tail(text: str) -> str:
    if len(text) <= VIEW_LOG_CHARS:
        return text
    return f"[... {len(text) - VIEW_LOG_CHARS} characters; the whole log: " + (
        f"reports/run-<k>/<instance>/test_output.txt ...]\n{text[-VIEW_LOG_CHARS:]}"
    )


def episode_detail(rec: EpisodeRecord, verdicts: dict[str, dict]) -> dict:
    """Everything the episode view shows. Token ids and log-probs are left out (large, and not
    what the agent saw); of the chat only the prompt is kept, the steps hold the rest."""
    traj = rec.trajectory
    out = {
        "status": rec.status.value,
        "reason": rec.reason,
        "attempts": rec.attempts,
        "verdicts": verdicts,
        "trajectory": None,
    }
    if traj is None:
        return out
    prompt = [m for m in traj.messages if m.get("role") == "system"][:1]
    prompt += [m for m in traj.messages if m.get("role") == "user"][:1]
    out["trajectory"] = {
        "policy": traj.policy,
        "prompt": [{"role": m.get("role", ""), "content": m.get("content", "")} for m in prompt],
        "steps": [s.model_dump(mode="json", exclude={"token_ids", "logprobs"}) for s in traj.steps],
        "ending": traj.ending.value,
        "ending_detail": traj.ending_detail,
        "patch": traj.patch,
        "grade": traj.grade.model_dump(mode="json") if traj.grade else None,
        "test_log": _tail(traj.test_log),
        "wall_seconds": traj.wall_seconds,
        "grade_seconds": traj.grade_seconds,
    }
    return out


def run_title(run_dir: Path) -> str:
    """'<folder>: <dataset>, policy <name>' from the run card when there is one."""
    title = run_dir.resolve().name
    try:
        card = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        policy = card["eval"]["policy"]
        who = policy.get("model") or policy.get("name", "")
        return f"{title}: {card['dataset']}, policy {who}"
    except (OSError, ValueError, KeyError, TypeError):
        return title


def json_block(block_id: str, obj: object) -> str:
    """`obj` as a JSON data block no text inside it can end: `<`, `>` and `&` become escapes
    that JSON.parse turns back into the same characters."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{block_id}">{text}</script>'


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def render_html(title: str, rows: list[dict], details: list[dict]) -> str:
    """The page: `rows[i]` is the list entry of the episode whose view is `details[i]`."""
    css = (_HERE / "viewer.css").read_text(encoding="utf-8")
    js = (_HERE / "viewer.js").read_text(encoding="utf-8")
    csp = (
        f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    head = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{css}</style></head><body>",
        json_block("deepswe-run", {"title": title, "episodes": rows}),
    ]
    blocks = [json_block(f"ep-{i}", d) for i, d in enumerate(details)]
    return "\n".join([*head, *blocks, f"<script>{js}</script>", "</body></html>", ""])


def write_view(
    run_dir: Path | str, out: Path | str | None = None, records: list[EpisodeRecord] | None = None
) -> Path:
    """Write the viewer page of a run folder (default: <run_dir>/view.html); returns its path.
    `records` saves reading the episodes again when the caller has them."""
    run_dir = Path(run_dir)
    records = RunStore(run_dir).records() if records is None else records
    verdicts = load_verdicts(run_dir)
    rows, details = [], []
    for rec in records:
        found = verdicts.get((rec.instance_id, rec.run), {})
        rows.append(episode_row(rec, found))
        details.append(episode_detail(rec, found))
    path = Path(out) if out else run_dir / VIEW_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_html(run_title(run_dir), rows, details), encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a page
    return path


def serve(page: Path, port: int, host: str = "127.0.0.1") -> None:
    """Serve the folder holding `page` at http://host:port/ until interrupted."""
    import contextlib
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(page.parent))
    with http.server.ThreadingHTTPServer((host, port), handler) as httpd:
        print(f"serving http://{host}:{httpd.server_address[1]}/{page.name} (Ctrl-C stops)")
        with contextlib.suppress(KeyboardInterrupt):
            httpd.serve_forever()
