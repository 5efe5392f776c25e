"""YAML front matter: the `---` block that opens a `SKILL.md` or a subagent's `agents/*.md`.

One parser for both, so that the two kinds of file accept the same syntax: a first line
`---`, YAML, then a line `---`; a UTF-8 byte-order mark and CRLF line endings are
accepted. The YAML is read with `yaml.safe_load` (no Python objects). Mapping keys come
back as strings at every depth (YAML reads `1:` and `on:` as a number and a bool, and
checkpoint serializers need string keys). Whatever is wrong comes back as one
`FrontMatterError` with the reason and, for bad YAML, the file's line, which each caller
turns into its own warning or configuration error.

The block is bounded: at most `MAX_FRONT_MATTER_CHARS` characters, and at most
`MAX_FRONT_MATTER_NODES` values once YAML aliases are expanded (a few lines of `&a`/`*a`
references can otherwise stand for billions of values).

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fathom.errors import FathomError

__all__ = [
    "MAX_FRONT_MATTER_CHARS",
    "MAX_FRONT_MATTER_NODES",
    "FrontMatterError",
    "parse_front_matter",
]

MAX_FRONT_MATTER_CHARS = 64_000
"""The longest front matter accepted, in characters between the two `---` lines."""

MAX_FRONT_MATTER_NODES = 10_000
"""How many values (mappings, lists, scalars) the front matter may hold, aliases expanded."""

_MAX_DEPTH = 100  # how deeply mappings and lists may nest

_OPENING = re.compile(r"---[ \t]*(?:\r?\n|\Z)")
_CLOSING = re.compile(r"^---[ \t]*\r?$", re.MULTILINE)


class FrontMatterError(FathomError, ValueError):
    """Front matter that cannot be used.

    Attributes:
        reason: What is wrong, as a clause that follows the file's name ("it does not
            start with ...", "its YAML is not valid: ...").
        line: The 1-based line of the file the problem is on, when YAML names one.
    """

    def __init__(self, reason: str, *, line: int | None = None) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.reason = reason
        self.line = line


def _string_keys(value: Any, budget: list[int], depth: int = 0) -> Any:
    """`value` with every mapping key made a string; counts values against `budget`."""
    budget[0] -= 1
    if budget[0] < 0:
        raise FrontMatterError(
            f"the front matter holds more than {MAX_FRONT_MATTER_NODES:,} values "
            "(counting what YAML aliases stand for); keep it to plain fields"
        )
    if depth > _MAX_DEPTH:
        raise FrontMatterError(f"the front matter nests more than {_MAX_DEPTH} levels deep")
    if isinstance(value, Mapping):
        return {str(key): _string_keys(item, budget, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_string_keys(item, budget, depth + 1) for item in value]
    return value


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split `text` into its front matter (parsed) and the body that follows it.

    Args:
        text: The whole file, which must start with a `---` line (after an optional
            byte-order mark).

    Returns:
        The front matter as a dict with string keys (empty for an empty block) and the
        text after the closing `---` line, unchanged. A `---` line in the body is body.

    Raises:
        FrontMatterError: No opening or closing `---` line, a block over
            `MAX_FRONT_MATTER_CHARS` or `MAX_FRONT_MATTER_NODES`, YAML that does not
            parse (with its line), or YAML that is not a mapping.
    """
    start = 1 if text.startswith("\ufeff") else 0
    opening = _OPENING.match(text, start)
    if opening is None:
        raise FrontMatterError(
            "it does not start with YAML front matter (a first line of just '---')"
        )
    closing = _CLOSING.search(text, opening.end())
    if closing is None:
        raise FrontMatterError(
            "its YAML front matter has no closing '---' line (a line of just '---' "
            "after the fields)"
        )
    block = text[opening.end() : closing.start()]
    if len(block) > MAX_FRONT_MATTER_CHARS:
        raise FrontMatterError(
            f"its front matter is {len(block):,} characters long; the limit is "
            f"{MAX_FRONT_MATTER_CHARS:,}. Move long text into the body"
        )
    import yaml  # here, not at the top: agents without skills or memory never need it

    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        # +2: the mark is 0-based and the YAML starts on the line after the opening '---'.
        line = mark.line + 2 if mark is not None else None
        raise FrontMatterError(
            f"its front matter is not valid YAML: {' '.join(str(problem).split())}", line=line
        ) from None
    except RecursionError:
        deep = f"its front matter nests more than {_MAX_DEPTH} levels deep"
        raise FrontMatterError(deep) from None
    except (ValueError, TypeError, OverflowError) as error:  # e.g. a date like 2024-13-45
        raise FrontMatterError(f"its front matter is not valid YAML: {error}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"its front matter must be a mapping of fields (name: ...), not a {type(data).__name__}"
        )
    body_start = closing.end()
    if text.startswith("\r\n", body_start):
        body_start += 2
    elif text.startswith("\n", body_start):
        body_start += 1
    return _string_keys(data, [MAX_FRONT_MATTER_NODES]), text[body_start:]
