"""Safe HTML for the web page: markdown, highlighted code and diffs.

Raw HTML in the input is never passed through: markdown-it-py runs with `html=False` (tags
come out as text) and rejects `javascript:`-style link targets; Pygments escapes what it
highlights; every other string is escaped with `html.escape`.
"""

from __future__ import annotations

import difflib
import functools
import html
import logging

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound

__all__ = ["pygments_css", "render_code", "render_diff", "render_markdown"]

logger = logging.getLogger(__name__)

_FORMATTER = HtmlFormatter(nowrap=True)
MAX_DIFF_LINES = 2000
"""Longer diffs are cut (with a note): the page shows changes, not whole dumps."""


def _lexer(language: str | None = None, filename: str | None = None) -> Lexer | None:
    try:
        if language:
            return get_lexer_by_name(language)
        if filename:
            return get_lexer_for_filename(filename)
    except ClassNotFound:
        return None
    return None


def _code_block(text: str, lexer: Lexer | None) -> str:
    body = highlight(text, lexer, _FORMATTER) if lexer is not None else html.escape(text)
    return f'<pre class="hl"><code>{body}</code></pre>'


def _fence(content: str, language: str, _attrs: str) -> str:
    return _code_block(content, _lexer(language.strip().split(" ")[0] or None))


@functools.cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _fence})
    return md.enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """Markdown as HTML, fenced code highlighted, raw HTML shown as text."""
    return _markdown().render(text)


def render_code(text: str, path: str | None = None) -> str:
    """A file's text as a highlighted `<pre>`, the language guessed from its name."""
    return _code_block(text, _lexer(filename=path))


def render_diff(old: str, new: str, path: str | None = None) -> str:
    """A unified diff of `old` → `new` as a highlighted `<pre>` (empty diff: a note)."""
    name = path or "file"
    lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                      fromfile=f"a{name}", tofile=f"b{name}"))  # fmt: skip
    if not lines:
        return '<p class="muted">no change</p>'
    cut = len(lines) > MAX_DIFF_LINES
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines[:MAX_DIFF_LINES])
    note = f'<p class="muted">diff cut at {MAX_DIFF_LINES} lines</p>' if cut else ""
    return _code_block(text, get_lexer_by_name("diff")) + note


@functools.cache
def pygments_css() -> str:
    """Pygments' token colours for `.hl` blocks: a light theme, and a dark one when asked."""
    light = HtmlFormatter(style="default").get_style_defs(".hl")
    dark = HtmlFormatter(style="monokai").get_style_defs(".hl")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"
