"""report.html: the Markdown report rendered for a browser, self-contained (its PNG plots inlined as data URIs)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from markdown_it import MarkdownIt

__all__ = ["write_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead { background: #f2f2f2; }
img { max-width: 100%; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""

_IMG = re.compile(r'<img src="([^"]+\.png)"')


def write_html(markdown: str, folder: Path, *, title: str) -> Path:
    """Render `markdown` (whose images are paths relative to `folder`) to `folder/report.html`; return its path."""
    body = MarkdownIt("commonmark").enable("table").render(markdown)

    def inline(match: re.Match[str]) -> str:
        path = folder / match.group(1)
        if not path.is_file():
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode()
        return f'<img src="data:image/png;base64,{data}"'

    html = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_STYLE}</style></head><body>\n{_IMG.sub(inline, body)}</body></html>\n"
    )
    path = folder / "report.html"
    path.write_text(html)
    return path
