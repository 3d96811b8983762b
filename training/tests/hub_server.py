"""A small Hub-compatible server that the unmodified huggingface_hub client pushes to.

It speaks the wire protocol the client uses (whoami, repo create with a 409 carrying `url`,
YAML validation, preupload with remote oids, the LFS batch / PUT / verify flow and its
multipart variant (parts, then a completion POST) above `multipart_chunk` bytes, the NDJSON
commit endpoint with parentCommit and create_pr, branches, pull-request refs `refs/pr/N`,
refs, revision info and resolve with the commit and etag headers; private repos answer 401
without the token, as the Hub does) over an in-memory git-like store. It does not prove the Xet
storage path (tests set HF_HUB_DISABLE_XET=1), the real Hub's validation rules, permissions
beyond one token, discussions, or its rate limits.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

LFS_SUFFIXES = (".safetensors", ".bin", ".parquet", ".png", ".pt")


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    kind: str  # model | dataset
    private: bool
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit
    prs: dict[int, str] = field(default_factory=dict)  # pull request N (refs/pr/N) -> commit
    commits: dict[str, dict[str, tuple[str, bool]]] = field(default_factory=dict)  # path->(key,lfs)

    def ref(self, rev: str) -> str | None:
        """The commit a branch, `refs/pr/N` or commit id names; None when it names none."""
        if rev.startswith("refs/pr/") and rev[8:].isdigit():
            return self.prs.get(int(rev[8:]))
        return self.branches.get(rev, rev if rev in self.commits else None)

    def move(self, rev: str, oid: str) -> None:
        if rev.startswith("refs/pr/"):
            self.prs[int(rev[8:])] = oid
        else:
            self.branches[rev] = oid


@dataclass
class HubState:
    token: str
    user: str = "tester"
    repos: dict[tuple[str, str], Repo] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)  # sha256 (lfs) or git sha1 -> bytes
    log: list[str] = field(default_factory=list)  # "METHOD path" of every request
    fail_commits: int = 0  # answer this many commits with a 500 (an interrupted push)
    # Another writer's file: committed to main at the next preupload to main, i.e. after
    # the client read the head and before its commit (a race that parentCommit must catch).
    intrude: str | None = None
    intrude_repo: str | None = None  # the repo id it lands in; None: the first one pushed to
    # LFS objects above this many bytes get the multipart transfer (a part-size `chunk_size`
    # and one URL per part, then a completion POST), as the Hub's LFS server chooses for large
    # files; None: always single-part.
    multipart_chunk: int | None = None
    parts: dict[tuple[str, int], bytes] = field(default_factory=dict)  # (oid, part) -> bytes
    lock: threading.Lock = field(default_factory=threading.Lock)

    def commit(self, repo: Repo, branch: str, files: dict[str, tuple[str, bool]]) -> str:
        oid = hashlib.sha1(
            json.dumps([branch, sorted(files.items()), len(repo.commits)]).encode()
        ).hexdigest()
        repo.commits[oid] = files
        repo.move(branch, oid)
        return oid


def _kind_and_rest(parts: list[str]) -> tuple[str, list[str]]:
    if parts and parts[0] in ("datasets", "spaces"):
        return parts[0][:-1], parts[1:]
    return "model", parts


class Handler(BaseHTTPRequestHandler):
    state: HubState
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the state keeps its own log
        pass

    # --- plumbing ---------------------------------------------------------------------------
    def _send(self, code: int, body: bytes | dict | None = None, headers: dict | None = None):
        raw = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
        self.send_response(code)
        if isinstance(body, dict):
            self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def _error(self, code: int, msg: str, **extra):
        self._send(code, {"error": msg, **extra}, {"X-Error-Message": msg})

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _authed(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {self.state.token}":
            return True
        self._error(401, "Invalid credentials in Authorization header")
        return False

    def _visible(self, repo: Repo | None) -> bool:
        """A private repo is hidden without the token: 401 RepoNotFound, as the Hub answers."""
        if repo is not None and (
            not repo.private or self.headers.get("Authorization") == f"Bearer {self.state.token}"
        ):
            return True
        code = 401 if repo is not None else 404
        self._send(code, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
        return False

    def _base(self) -> str:
        return f"http://{self.headers['Host']}"

    def _dispatch(self):
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        query = parse_qs(url.query)
        with self.state.lock:
            self.state.log.append(f"{self.command} {url.path}")
            try:
                self._route(parts, query)
            except KeyError as err:
                self._error(404, f"not found: {err}")

    do_GET = do_POST = do_PUT = do_HEAD = _dispatch

    # --- routes -----------------------------------------------------------------------------
    def _route(self, p: list[str], q: dict):
        s = self.state
        if p[:2] == ["api", "whoami-v2"]:
            return self._authed() and self._send(
                200, {"type": "user", "name": s.user, "orgs": [], "auth": {}}
            )
        if p[:3] == ["api", "repos", "create"]:
            return self._authed() and self._create(json.loads(self._body()))
        if p[:2] == ["api", "validate-yaml"]:
            return self._validate_yaml(json.loads(self._body()))
        if p[0] == "api" and p[1] in ("models", "datasets"):
            return self._api_repo(p[1][:-1], f"{p[2]}/{p[3]}", p[4:], q)
        if p[0] == "lfs-upload" and self.command == "PUT":
            data = self._body()
            if hashlib.sha256(data).hexdigest() != p[1]:
                return self._error(400, "sha256 mismatch")
            s.blobs[p[1]] = data
            return self._send(200, b"")
        if p[0] == "lfs-part" and self.command == "PUT":  # one part of a multipart upload
            data = self._body()
            s.parts[(p[1], int(p[2]))] = data
            return self._send(200, b"", {"ETag": f'"{hashlib.md5(data).hexdigest()}"'})
        if p[0] == "lfs-complete":
            return self._complete(p[1], json.loads(self._body()))
        if p[0] == "lfs-verify":
            want = json.loads(self._body())
            ok = len(s.blobs.get(want["oid"], b"")) == want["size"] and want["oid"] in s.blobs
            return self._send(200, {}) if ok else self._error(404, "object not uploaded")
        kind, rest = _kind_and_rest(p)
        if (
            len(rest) >= 2
            and rest[1].endswith(".git")
            and rest[2:] == ["info", "lfs", "objects", "batch"]
        ):
            return self._authed() and self._lfs_batch(json.loads(self._body()))
        if len(rest) >= 4 and rest[2] == "resolve":
            return self._resolve(kind, f"{rest[0]}/{rest[1]}", rest[3], "/".join(rest[4:]))
        return self._error(404, f"no route {self.path}")

    def _create(self, body: dict):
        repo_id = f"{body.get('organization') or self.state.user}/{body['name']}"
        kind = body.get("type") or "model"
        url = f"{self._base()}/{'' if kind == 'model' else kind + 's/'}{repo_id}"
        if (kind, repo_id) in self.state.repos:
            return self._error(409, "You already created this repo", url=url)
        # huggingface_hub 1.x sends `visibility`; older clients a boolean `private`.
        repo = Repo(kind, body.get("visibility") == "private" or bool(body.get("private")))
        self.state.repos[(kind, repo_id)] = repo
        attrs = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
        self.state.blobs[git_sha1(attrs)] = attrs
        self.state.commit(repo, "main", {".gitattributes": (git_sha1(attrs), False)})
        return self._send(200, {"url": url, "name": repo_id, "id": repo_id})

    def _validate_yaml(self, body: dict):
        text = body["content"]
        if not text.startswith("---\n"):
            return self._send(200, {"errors": [], "warnings": [{"message": "empty metadata"}]})
        try:
            meta = yaml.safe_load(text.split("---\n")[1])
        except yaml.YAMLError as err:
            return self._error(400, f"Invalid metadata in README.md: {err}")
        if not isinstance(meta, dict):
            return self._error(400, "Invalid metadata in README.md: not a mapping")
        return self._send(200, {"errors": [], "warnings": []})

    def _api_repo(self, kind: str, repo_id: str, rest: list[str], q: dict):
        repo = self.state.repos.get((kind, repo_id))
        if not self._visible(repo):
            return None
        op = rest[0] if rest else "revision"
        rev = "/".join(rest[1:]) if len(rest) > 1 else "main"
        if op == "revision":
            return self._info(kind, repo_id, repo, rev)
        if op == "refs":
            return self._send(
                200,
                {
                    "branches": [
                        {"name": b, "ref": f"refs/heads/{b}", "targetCommit": c}
                        for b, c in repo.branches.items()
                    ],
                    "tags": [],
                    "converts": [],
                    "pullRequests": [
                        {"name": f"refs/pr/{n}", "ref": f"refs/pr/{n}", "targetCommit": c}
                        for n, c in repo.prs.items()
                    ],
                },
            )
        if not self._authed():
            return None
        if op == "branch":
            body = json.loads(self._body() or b"{}")
            if rev in repo.branches:
                return self._error(409, f"branch {rev} already exists")
            start = repo.branches[body.get("startingPoint") or "main"]
            repo.branches[rev] = start
            return self._send(200, {})
        if op == "preupload":
            return self._preupload(repo_id, repo, rev, json.loads(self._body()))
        if op == "commit":
            return self._commit(kind, repo_id, repo, rev, self._body(), "create_pr" in q)
        return self._error(404, f"no route {self.path}")

    def _info(self, kind: str, repo_id: str, repo: Repo, rev: str):
        sha = repo.ref(rev)
        if sha is None:
            return self._send(
                404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
            )
        files = repo.commits[sha]
        return self._send(
            200,
            {
                "id": repo_id,
                "_id": repo_id,
                "sha": sha,
                "private": repo.private,
                "siblings": [{"rfilename": f} for f in sorted(files)],
            },
        )

    def _preupload(self, repo_id: str, repo: Repo, rev: str, body: dict):
        if self.state.intrude and rev == "main" and self.state.intrude_repo in (None, repo_id):
            data, path = b"another writer\n", self.state.intrude
            self.state.blobs[git_sha1(data)] = data
            changed = {**repo.commits[repo.branches[rev]], path: (git_sha1(data), False)}
            self.state.commit(repo, rev, changed)
            self.state.intrude = None
        files = repo.commits[repo.ref(rev) or repo.branches["main"]]
        out = []
        for f in body["files"]:
            sample = base64.b64decode(f["sample"])
            lfs = (
                f["size"] >= 10 * 1024 * 1024 or f["path"].endswith(LFS_SUFFIXES) or b"\0" in sample
            )
            remote = files.get(f["path"])
            out.append(
                {
                    "path": f["path"],
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": remote[0] if remote else None,
                }
            )
        return self._send(200, {"files": out, "commitOid": repo.ref(rev)})

    def _lfs_batch(self, body: dict):
        base, objects = self._base(), []
        for o in body["objects"]:
            obj = {"oid": o["oid"], "size": o["size"]}
            chunk = self.state.multipart_chunk
            if o["oid"] in self.state.blobs:
                pass  # already stored: no actions, the client skips it
            elif chunk and o["size"] > chunk:
                n = -(-o["size"] // chunk)
                parts = {str(i): f"{base}/lfs-part/{o['oid']}/{i}" for i in range(1, n + 1)}
                obj["actions"] = {
                    "upload": {
                        "href": f"{base}/lfs-complete/{o['oid']}",
                        "header": {"chunk_size": str(chunk), **parts},
                    }
                }
            else:
                obj["actions"] = {
                    "upload": {"href": f"{base}/lfs-upload/{o['oid']}"},
                    "verify": {"href": f"{base}/lfs-verify/{o['oid']}"},
                }
            objects.append(obj)
        return self._send(200, {"transfer": "basic", "objects": objects})

    def _complete(self, oid: str, body: dict):
        """Assemble a multipart upload from its parts, checking each part's etag and the oid."""
        s, data = self.state, b""
        for part in body["parts"]:
            chunk = s.parts.get((oid, part["partNumber"]))
            if chunk is None or part["etag"].strip('"') != hashlib.md5(chunk).hexdigest():
                return self._error(400, f"part {part['partNumber']} of {oid} missing or changed")
            data += chunk
        if body["oid"] != oid or hashlib.sha256(data).hexdigest() != oid:
            return self._error(400, "sha256 mismatch")
        s.blobs[oid] = data
        return self._send(200, {})

    def _commit(self, kind, repo_id, repo: Repo, rev: str, raw: bytes, create_pr: bool):
        s = self.state
        if s.fail_commits:
            s.fail_commits -= 1
            return self._error(500, "simulated failure")
        lines = [json.loads(line) for line in raw.splitlines() if line.strip()]
        header = next(x["value"] for x in lines if x["key"] == "header")
        # create_pr opens a PR against a branch (never a commit id or another PR); without it
        # the commit goes to a branch or to an open PR's ref.
        head = repo.branches.get(rev) if create_pr else repo.ref(rev)
        if head is None or (not create_pr and rev in repo.commits):
            return self._send(
                404, {"error": "Invalid rev id"}, {"X-Error-Code": "RevisionNotFound"}
            )
        parent = header.get("parentCommit")
        if create_pr and parent:  # the PR starts from parentCommit (the Hub's documented rule)
            if parent not in repo.commits:
                return self._error(400, f"parentCommit {parent} not found")
            head = parent
        elif parent and parent != head:
            return self._error(412, "A commit has happened since. Please refresh and try again.")
        files = dict(repo.commits[head])
        for x in lines:
            v = x["value"]
            if x["key"] == "file":
                data = base64.b64decode(v["content"])
                s.blobs[git_sha1(data)] = data
                files[v["path"]] = (git_sha1(data), False)
            elif x["key"] == "lfsFile":
                if v["oid"] not in s.blobs:
                    return self._error(422, f"LFS object {v['oid']} was never uploaded")
                files[v["path"]] = (v["oid"], True)
            elif x["key"] in ("deletedFile", "deletedFolder"):
                files = {
                    k: f
                    for k, f in files.items()
                    if k != v["path"] and not k.startswith(v["path"].rstrip("/") + "/")
                }
        branch = rev
        if create_pr:  # the target branch does not move; the PR's ref gets the commit
            branch = f"refs/pr/{len(repo.prs) + 1}"
            repo.prs[len(repo.prs) + 1] = head
        oid = s.commit(repo, branch, files)
        prefix = f"{self._base()}/{'' if kind == 'model' else kind + 's/'}{repo_id}"
        pr = f"{prefix}/discussions/{branch.split('/')[-1]}" if create_pr else None
        return self._send(
            200, {"commitUrl": f"{prefix}/commit/{oid}", "commitOid": oid, "pullRequestUrl": pr}
        )

    def _resolve(self, kind: str, repo_id: str, rev: str, path: str):
        repo = self.state.repos.get((kind, repo_id))
        if not self._visible(repo):
            return None
        sha = repo.ref(rev)
        if sha is None:
            return self._send(404, {"error": "not found"}, {"X-Error-Code": "RevisionNotFound"})
        if path not in repo.commits[sha]:
            return self._send(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
        key, lfs = repo.commits[sha][path]
        data = self.state.blobs[key]
        headers = {"X-Repo-Commit": sha, "ETag": f'"{git_sha1(data) if not lfs else key}"'}
        if lfs:
            headers.update({"X-Linked-Etag": f'"{key}"', "X-Linked-Size": str(len(data))})
        return self._send(200, data, headers)


def serve(token: str) -> tuple[ThreadingHTTPServer, HubState, str]:
    """Start a server on a free local port; returns (server, its state, its endpoint URL)."""
    state = HubState(token=token)
    handler = type("BoundHandler", (Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state, f"http://127.0.0.1:{server.server_address[1]}"
