"""The report's document model: headings, paragraphs, tables and images, rendered once as
Markdown and once as a self-contained HTML page (images inlined as data URIs, every text
escaped, a Content-Security-Policy that allows no script and no network)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str  # may hold [label](href) links; nothing else is markup


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    path: str  # relative to the run folder
    alt: str


Block = Heading | Para | Table | Image


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}\n")
        elif isinstance(b, Para):
            out.append(b.text + "\n")
        elif isinstance(b, Table):
            cells = [[c.replace("|", "\\|").replace("\n", " ") for c in r] for r in b.rows]
            out.append("| " + " | ".join(b.header) + " |\n|" + "---|" * len(b.header))
            out.extend("| " + " | ".join(r) + " |" for r in cells)
            out.append("")
        elif isinstance(b, Image):
            out.append(f"![{b.alt}]({b.path})\n")
    return "\n".join(out) + "\n"


def inline_html(text: str) -> str:
    """Escaped text; `[label](href)` becomes a link (hrefs are ours: relative paths)."""
    parts, last = [], 0
    for m in re.finditer(r"\[([^\]]+)\]\(([^)\s]+)\)", text):
        parts.append(html.escape(text[last : m.start()]))
        parts.append(f'<a href="{html.escape(m.group(2))}">{html.escape(m.group(1))}</a>')
        last = m.end()
    parts.append(html.escape(text[last:]))
    out = "".join(parts)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def to_html(blocks: list[Block], root: Path, title: str) -> str:
    body = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            body.append(f"<p>{inline_html(b.text)}</p>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            rows = "".join(
                "<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in r) + "</tr>" for r in b.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(b, Image):
            data = base64.b64encode((root / b.path).read_bytes()).decode()
            body.append(f'<img alt="{html.escape(b.alt)}" src="data:image/png;base64,{data}">')
    style = (
        "body{font:15px/1.45 system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;"
        "padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}"
        "img{max-width:100%;border:1px solid #eee}code{background:#f5f5f5;padding:0 3px}"
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}'
        f'</title><meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"img-src data:; style-src 'unsafe-inline'\"><style>{style}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
