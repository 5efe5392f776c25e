"""Where streamed markdown can be rendered early: the end of its last finished block.

A terminal cannot take back what has scrolled up, so a streamed answer is printed as
rendered markdown only once a part of it can no longer change. Text arriving later can only
extend the last top-level block (a paragraph, a list gaining items, a code fence not yet
closed, a table gaining rows); every block before it is final. The displays render those
blocks and keep streaming the rest as raw text in their live region.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["finished_prefix"]


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # The dialect rich's Markdown renders (CommonMark with tables and strikethrough).
    return MarkdownIt().enable("strikethrough").enable("table")


def finished_prefix(text: str) -> int:
    """How many characters at the start of `text` are whole top-level markdown blocks.

    Only complete lines count; the block the text ends in is never finished, since more
    text may extend it. 0 when nothing is final yet.
    """
    end = text.rfind("\n")
    if end < 0:
        return 0
    complete = text[: end + 1]
    starts = [
        token.map[0]
        for token in _parser().parse(complete)
        if token.level == 0 and token.nesting in (0, 1) and token.map is not None
    ]
    if len(starts) < 2:
        return 0
    last_start = starts[-1]
    lines = complete.splitlines(keepends=True)
    return sum(len(line) for line in lines[:last_start])
