"""What swebench's installs download, served from a package registry or the repository mirror.

swebench 4.1.0's images are built online: matplotlib's pre_install fetches qhull's sources with
wget, and matplotlib's own build (3.1 and later) fetches FreeType 2.6.1's, which its image tests
are drawn with. Ours builds offline, so the host fetches the same artefacts first
(deepswe.data.task.SourceFile) and the commands read them from /deepswe-files:

| download                                   | served from                                     |
|--------------------------------------------|-------------------------------------------------|
| qhull.org qhull-2020-src-8.0.2.tgz          | Debian's source package qhull 2020.2: its        |
|                                            | qhull_2020.2.orig.tar.gz is that tarball, byte   |
|                                            | for byte (sha256 b5c2d7eb..., matplotlib's       |
|                                            | LOCAL_QHULL_HASH)                                |
| freetype-2.6.1.tar.gz (matplotlib's build) | FreeType's git repository at VER-2-6-1 from the  |
|                                            | mirror (`<mirror>/freetype__freetype`), put at   |
|                                            | build/freetype-2.6.1 with its configure made by  |
|                                            | its autogen.sh (Debian's autoconf, automake,     |
|                                            | libtool): no registry has the release tarball    |
| jqueryui.com jquery-ui-1.12.1.zip          | matplotlib 3.1.3's sdist on PyPI (sha256         |
| (matplotlib 3.0-3.1's `develop`)           | db3121f1...): its sdist command extracted that   |
|                                            | zip into lib/matplotlib/backends/web_backend/    |
|                                            | jquery-ui-1.12.1/, the folder `develop` writes   |
|                                            | and skips the download for when present (3.0.3's |
|                                            | sdist holds the same 23 entries, byte for byte)  |

A download not in this table leaves the instance unsupported_env, naming the URL.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from deepswe.data.task import SourceFile, Task

FILES = "/deepswe-files"  # deepswe.env.images.files.IMAGE_FOLDER
# URL swebench downloads -> (Debian source package path in the pool, sha256 of the file).
REGISTRY_COPIES: dict[str, tuple[str, str]] = {
    "http://www.qhull.org/download/qhull-2020-src-8.0.2.tgz": (
        "pool/main/q/qhull/qhull_2020.2.orig.tar.gz",
        "b5c2d7eb833278881b952c8a52d20179eab87766b00b865000469a45c1838b7e",
    ),
}
AUTOTOOLS = ["autoconf", "automake", "libtool"]
FREETYPE_MIRROR = "freetype__freetype"
JQUERY_UI = "jquery-ui-1.12.1"
WEB_BACKEND = "lib/matplotlib/backends/web_backend"
# matplotlib's sdist that carries the extracted jquery-ui (PyPI's files.pythonhosted.org copy).
JQUERY_SDIST = SourceFile(
    name="matplotlib-3.1.3.tar.gz",
    url=(
        "https://files.pythonhosted.org/packages/be/74/"
        "24d058c17b155d131359f1cd01e120b3954686bf8b7853172b279237e1dc/matplotlib-3.1.3.tar.gz"
    ),
    sha256="db3121f12fb9b99f105d1413aebaeb3d943f269f3d262b45586d12765866f0c6",
    stands_for=f"https://jqueryui.com/resources/download/{JQUERY_UI}.zip (matplotlib's setup.py)",
)
_ASSIGN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S*)\s*$")
_URL = re.compile(r"https?://[^\s\"']+")
_FETCH = re.compile(r"\b(wget|curl)\b")


class UnservedDownload(Exception):
    """A download no registry or mirror of ours serves; the message names it."""


@dataclass
class Downloads:
    """pre_install commands with their downloads replaced, the files to fetch, Debian packages
    the replacement needs."""

    commands: list[str] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)
    apt: list[str] = field(default_factory=list)


def _expand(text: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        text = text.replace("${" + name + "}", value).replace("$" + name, value)
    return text


def _dest(cmd: str) -> str | None:
    """The output path of a wget -O / curl -o command, as written (quotes kept)."""
    m = re.search(r"\s(?:-O|-o|--output-document=|--output=?)\s*(\"[^\"]*\"|'[^']*'|\S+)", cmd)
    return m.group(1) if m else None


def registry_file(url: str, debian_mirror: str) -> SourceFile:
    """The registry's copy of `url` (REGISTRY_COPIES); UnservedDownload if there is none."""
    if url not in REGISTRY_COPIES:
        raise UnservedDownload(f"its install downloads {url}, which no registry of ours serves")
    path, sha = REGISTRY_COPIES[url]
    name = url.rsplit("/", 1)[-1]
    return SourceFile(name=name, url=f"{debian_mirror}/{path}", sha256=sha, stands_for=url)


def pre_install(commands: list[str], debian_mirror: str) -> Downloads:
    """swebench's pre_install commands with each wget/curl of a known URL replaced by a copy of
    the fetched file (variables assigned by earlier commands expanded to find the URL)."""
    out, variables = Downloads(), {}
    for cmd in commands:
        m = _ASSIGN.match(cmd)
        if m:
            variables[m.group(1)] = m.group(2).strip("\"'")
        if not _FETCH.search(cmd):
            out.commands.append(cmd)
            continue
        urls = _URL.findall(_expand(cmd, variables))
        dest = _dest(cmd)
        if len(urls) != 1 or dest is None:
            raise UnservedDownload(f"its pre_install downloads: {cmd[:120]}")
        f = registry_file(urls[0], debian_mirror)
        out.files.append(f)
        out.commands.append(f"cp {FILES}/{f.name} {dest}")
    return out


def _show(repo_dir: Path, commit: str, path: str) -> str:
    res = subprocess.run(
        ["git", "-C", str(repo_dir), "show", f"{commit}:{path}"], capture_output=True, text=True
    )
    return res.stdout if res.returncode == 0 else ""


def _freetype_version(setupext: str) -> str | None:
    """The FreeType matplotlib builds itself (3.1 and later: system_freetype defaults off)."""
    if "system_freetype" not in setupext:
        return None  # 3.0: the system's FreeType (libfreetype6-dev), nothing downloaded
    m = re.search(r"TESTING_VERSION_OF_FREETYPE = '([\d.]+)'", setupext) or re.search(
        r"LOCAL_FREETYPE_VERSION = '([\d.]+)'", setupext
    )
    return m.group(1) if m else None


def build_downloads(task: Task, repo_dir: Path | None, mirror: Path | None) -> Downloads:
    """What the repository's own build downloads (matplotlib's FreeType), as files and the
    commands that put them where the build looks first (build/freetype-X/, which it then
    configures and makes instead of downloading)."""
    if task.repo != "matplotlib/matplotlib" or repo_dir is None:
        return Downloads()
    commit = task.environment_setup_commit or task.base_commit
    out = Downloads()
    if "_download_jquery_to" in _show(repo_dir, commit, "setup.py"):
        # matplotlib 3.0-3.1's `develop` fetches jquery-ui-1.12.1.zip unless the extracted
        # folder is already in the web backend's folder: put it there from the sdist.
        member = f"{JQUERY_SDIST.name[: -len('.tar.gz')]}/{WEB_BACKEND}/{JQUERY_UI}"
        out.files.append(JQUERY_SDIST)
        out.commands.append(
            f"mkdir -p {WEB_BACKEND} && tar -xzf {FILES}/{JQUERY_SDIST.name} -C {WEB_BACKEND}"
            f" --strip-components={member.count('/')} {member}"
        )
    setupext = _show(repo_dir, commit, "setupext.py")
    version = _freetype_version(setupext) if setupext else None
    if version is None:
        return out
    clone = Path(mirror) / FREETYPE_MIRROR if mirror else None
    if clone is None or not clone.is_dir():
        raise UnservedDownload(
            f"its build downloads FreeType {version}'s sources, which no registry serves: clone "
            f"https://github.com/freetype/freetype into <repo mirror>/{FREETYPE_MIRROR}"
        )
    tree = f"freetype-{version}"
    f = SourceFile(
        name=f"{tree}.tar.gz",
        git=f"{clone.resolve()}@VER-{version.replace('.', '-')}",
        prefix=tree,
        stands_for=f"matplotlib's setupext.py: {tree}.tar.gz",
    )
    cmd = (
        f"mkdir -p build && tar -xzf {FILES}/{f.name} -C build"
        f" && (cd build/{tree} && sh autogen.sh >/dev/null)"
    )
    out.commands.append(cmd)
    out.files.append(f)
    out.apt.extend(AUTOTOOLS)
    return out


__all__ = [
    "JQUERY_SDIST",
    "REGISTRY_COPIES",
    "Downloads",
    "UnservedDownload",
    "build_downloads",
    "pre_install",
    "registry_file",
]
