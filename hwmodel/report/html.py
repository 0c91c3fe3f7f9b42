"""Self-contained HTML pages: the index of every study's outputs (`hwmodel reproduce` -> out/index.html).

One file, no network: styles inline, PNG figures embedded as data URIs, SVG figures inline, Markdown reports
rendered to HTML (markdown-it, the CommonMark parser `rich` already depends on, with GFM tables). Timelines
(Chrome-trace JSON) and waveforms (VCD) are linked by relative path with how to open them; CSV/JSON results are
linked. A study's page section lists every file it wrote, so nothing under out/ is hidden.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

STYLE = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 28px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8cdd8;font-size:13px}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #dde1e8;padding:8px 28px;z-index:2}
nav a{margin-right:14px;color:#2a5db0;text-decoration:none;font-size:14px}
main{padding:8px 28px 40px;max-width:1200px}
section.study{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:18px 0;padding:6px 20px 16px}
table{border-collapse:collapse;margin:10px 0;font-size:13px}th,td{border:1px solid #dde1e8;padding:3px 8px}
th{background:#eef1f6}td{font-variant-numeric:tabular-nums}
img.figure,div.figure svg{max-width:100%;height:auto;border:1px solid #eee;margin:8px 0}
ul.files{columns:2;font-size:13px}code{background:#eef1f6;padding:0 3px;border-radius:3px}
details{margin:6px 0}summary{cursor:pointer;color:#2a5db0}
"""


@dataclass(frozen=True)
class Study:
    """One section of the index: a study's name, its one-line description and the folder it wrote."""

    name: str
    description: str
    folder: Path


_FIGURE_SUFFIXES = (".png", ".svg")


def _local_target(ref: str, base: Path) -> Path | None:
    """The file a relative Markdown link or image ``ref`` names from a report in ``base`` (None: absolute or a
    URL, an anchor, or no such file)."""
    if not ref or ref.startswith(("#", "/", "data:")) or "://" in ref or ref.startswith("mailto:"):
        return None
    target = (base / ref.split("#", 1)[0]).resolve()
    return target if target.is_file() else None


def _data_uri(path: Path) -> str:
    kind = "image/svg+xml" if path.suffix.lower() == ".svg" else "image/png"
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _markdown(text: str, base: Path | None = None, root: Path | None = None, inlined: set[Path] | None = None) -> str:
    """``text`` rendered to HTML. A report's relative references are resolved from its folder ``base``: images it
    shows are embedded as data URIs (the index is one self-contained file) and recorded in ``inlined``; links to
    files are rewritten relative to the index's folder ``root``."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    if base is not None and root is not None:
        for token in tokens:
            for child in token.children or ():
                attr = "src" if child.type == "image" else "href" if child.type == "link_open" else None
                target = _local_target(str(child.attrGet(attr) or ""), base) if attr else None
                if target is None:
                    continue
                if attr == "src" and target.suffix.lower() in _FIGURE_SUFFIXES:
                    child.attrSet("src", _data_uri(target))
                    if inlined is not None:
                        inlined.add(target)
                else:
                    child.attrSet(
                        attr,
                        target.relative_to(root.resolve()).as_posix()
                        if target.is_relative_to(root.resolve())
                        else target.as_uri(),
                    )
    return md.renderer.render(tokens, md.options, {})


def _figure(path: Path) -> str:
    if path.suffix.lower() == ".svg":
        body = path.read_text(encoding="utf-8", errors="replace")
        start = body.find("<svg")
        return f'<div class="figure">{body[start:] if start >= 0 else ""}</div>'
    return f'<img class="figure" alt="{html.escape(path.name)}" src="{_data_uri(path)}">'


def _is_chrome_trace(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.read(64)
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith('{"traceEvents"')


def page(title: str, subtitle: str, body: str, nav: Sequence[tuple[str, str]] = (), script: str = "") -> str:
    """A whole self-contained page around ``body`` (HTML), with an optional inline ``script``."""
    links = "".join(f'<a href="#{html.escape(a)}">{html.escape(t)}</a>' for a, t in nav)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{html.escape(title)}'
        f"</title><style>{STYLE}</style></head><body><header><h1>{html.escape(title)}</h1>"
        f"<p>{html.escape(subtitle)}</p></header>"
        + (f"<nav>{links}</nav>" if links else "")
        + f"<main>{body}</main>"
        + (f"<script>{script}</script>" if script else "")
        + "</body></html>\n"
    )


def study_section(study: Study, root: Path) -> str:
    """A study's section: its reports rendered, its figures shown, its timelines/waveforms/results linked."""
    anchor = html.escape(study.name)
    parts = [
        f'<section class="study" id="{anchor}"><h2>{html.escape(study.name)}</h2>'
        f"<p>{html.escape(study.description)}</p>"
    ]
    files = sorted(p for p in study.folder.rglob("*") if p.is_file()) if study.folder.is_dir() else []
    if not files:
        parts.append("<p><em>This study wrote no files.</em></p></section>")
        return "".join(parts)
    inlined: set[Path] = set()
    for p in files:
        if p.suffix.lower() == ".md":
            body = _markdown(p.read_text(encoding="utf-8", errors="replace"), p.parent, root, inlined)
            parts.append(f"<details open><summary>{html.escape(str(p.relative_to(root)))}</summary>{body}</details>")
    figures = [p for p in files if p.suffix.lower() in _FIGURE_SUFFIXES and p.resolve() not in inlined]
    for p in figures:
        parts.append(_figure(p))
    traces = [p for p in files if p.suffix.lower() == ".json" and _is_chrome_trace(p)]
    if traces:
        parts.append(
            "<h3>Timelines</h3><p>Chrome-trace JSON: open <code>https://ui.perfetto.dev</code> and drag "
            "the file in (or <code>chrome://tracing</code>).</p><ul>"
        )
        parts += [
            f'<li><a href="{html.escape(str(p.relative_to(root)))}">{html.escape(p.name)}</a></li>' for p in traces
        ]
        parts.append("</ul>")
    vcds = [p for p in files if p.suffix.lower() == ".vcd"]
    if vcds:
        parts.append("<h3>Waveforms</h3><p>VCD: open with GTKWave or Surfer.</p><ul>")
        parts += [f'<li><a href="{html.escape(str(p.relative_to(root)))}">{html.escape(p.name)}</a></li>' for p in vcds]
        parts.append("</ul>")
    parts.append('<h3>All files</h3><ul class="files">')
    parts += [
        f'<li><a href="{html.escape(str(p.relative_to(root)))}">{html.escape(str(p.relative_to(root)))}</a></li>'
        for p in files
    ]
    parts.append("</ul></section>")
    return "".join(parts)


def write_index(out_dir: Path, studies: Sequence[Study], title: str = "hwmodel reproduce") -> Path:
    """out/index.html: every study's tables, figures and links in one self-contained page."""
    out_dir = Path(out_dir)
    body = (
        "<p>Every number on this page is a model output; each study's report puts the published reference "
        "beside it, labelled fitted, predicted or leave-one-out.</p>"
        + "".join(study_section(s, out_dir) for s in studies)
    )
    text = page(title, f"{len(studies)} studies, written to {out_dir}", body, nav=[(s.name, s.name) for s in studies])
    path = out_dir / "index.html"
    path.write_text(text, encoding="utf-8")
    return path


def json_for_script(obj: object) -> str:
    """JSON safe to embed inside a <script> element (no '</' sequence, no NaN)."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
