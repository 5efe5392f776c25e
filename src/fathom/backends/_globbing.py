"""Glob patterns with `**` and `{a,b}`: parsed once, matched in linear time.

Python 3.11's `fnmatch` has neither recursive `**` nor brace alternation, and both the
`glob` tool and permission rules need them.

Patterns the model sends are matched by `GlobMatcher`, an automaton that reads a path one
character at a time: its work grows with the path's length times the pattern's, never
exponentially. (A backtracking regex took over 30 s on `*a*a*a*a*a*a*a*a*a*b` against a
40-character name.) Patterns are bounded too: at most `MAX_PATTERN_CHARS` characters,
braces nested at most `MAX_BRACE_DEPTH` deep, and one `glob`/`grep` call may spend at
most `MAX_MATCH_STEPS` automaton steps (see `GlobBudget`). Every breach is a `GlobError`
whose message names the limit and what to send instead; the backends return it as the
tool's error answer.

`compile_glob` gives the same dialect as a Python regex, for the operator's permission
rules, which are trusted configuration rather than model input.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = [
    "MAX_BRACE_DEPTH",
    "MAX_MATCH_STEPS",
    "MAX_PATTERN_CHARS",
    "GlobBudget",
    "GlobError",
    "GlobMatcher",
    "compile_glob",
    "compile_matcher",
    "glob_matches",
]

MAX_PATTERN_CHARS = 1000
"""The longest glob pattern accepted, in characters."""

MAX_BRACE_DEPTH = 10
"""How deeply `{...}` groups may nest inside each other."""

MAX_MATCH_STEPS = 2_000_000
"""Automaton steps one `glob` or `grep` call may spend matching paths against its pattern."""

_MAX_CACHED_MOVES = 20_000  # cached automaton moves per pattern; the cache is flushed past it

_DIALECT = "Use *, ?, **, [abc], [!abc] and {a,b}."


class GlobError(ValueError):
    """A glob pattern that cannot be used; the message says what is wrong with it."""


def _shown(pattern: str) -> str:
    """The pattern as error messages quote it: long ones are cut, not echoed whole."""
    return repr(pattern) if len(pattern) <= 80 else repr(pattern[:60]) + "..."


# ------------------------------------------------------------------------------ parsing
#
# A parsed pattern is a sequence of items:
#   ("lit", char)       the character itself
#   ("one",)            `?`: one character other than `/`
#   ("class", regex)    `[...]`: one character the single-character regex accepts
#   ("star",)           `*`: any run of characters other than `/`
#   ("any",)            `**` not followed by `/`: any run of characters, `/` included
#   ("dirs",)           `**/`: nothing, or any run of characters that ends with `/`
#   ("alt", [seq, ...]) `{a,b}`: one of the alternatives, each itself a sequence


def _split_braces(body: str) -> list[str]:
    """Split the inside of `{...}` on top-level commas."""
    options, depth, current = [], 0, []
    for char in body:
        if char == "," and depth == 0:
            options.append("".join(current))
            current = []
            continue
        depth += char == "{"
        depth -= char == "}"
        current.append(char)
    options.append("".join(current))
    return options


def _class_body(pattern: str, i: int) -> tuple[str, int] | None:
    """The regex class for the `[` at `i` and the index after its `]`; `None` if unclosed."""
    end = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "]") else i + 1)
    if end == -1:
        return None
    body = pattern[i + 1 : end].replace("\\", "\\\\")
    # A negated class must still not cross a path separator, like `*` and `?`.
    body = "^/" + body[1:] if body.startswith("!") else body
    return f"[{body}]", end + 1


def _parse(pattern: str, whole: str, depth: int = 0) -> list[tuple]:
    if depth > MAX_BRACE_DEPTH:
        raise GlobError(
            f"Error: the glob pattern {_shown(whole)} nests braces more than {MAX_BRACE_DEPTH} "
            "deep. Flatten the alternatives ({a,b,c} rather than {a,{b,{c}}}) or run "
            "several simpler globs."
        )
    items: list[tuple] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            items.append(("dirs",))
            i += 3
        elif pattern.startswith("**", i):
            items.append(("any",))
            i += 2
        elif char == "*":
            items.append(("star",))
            i += 1
        elif char == "?":
            items.append(("one",))
            i += 1
        elif char == "[" and (found := _class_body(pattern, i)) is not None:
            items.append(("class", found[0]))
            i = found[1]
        elif char == "{":
            level, j = 0, i
            while j < n:
                level += pattern[j] == "{"
                level -= pattern[j] == "}"
                if level == 0:
                    break
                j += 1
            if j >= n:  # an unclosed `{` is literal
                items.append(("lit", char))
                i += 1
                continue
            options = _split_braces(pattern[i + 1 : j])
            items.append(("alt", [_parse(o, whole, depth + 1) for o in options]))
            i = j + 1
        else:
            items.append(("lit", char))
            i += 1
    return items


@lru_cache(maxsize=512)
def _parsed(pattern: str) -> tuple[tuple, ...]:
    if not isinstance(pattern, str):
        raise GlobError(f"Error: the glob pattern must be text, not {type(pattern).__name__}.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise GlobError(
            f"Error: the glob pattern is {len(pattern)} characters long; the limit is "
            f"{MAX_PATTERN_CHARS}. Send a shorter pattern, or search a narrower path."
        )
    return tuple(_parse(pattern, pattern))


def _regex(items: list[tuple] | tuple[tuple, ...]) -> str:
    out: list[str] = []
    for item in items:
        kind = item[0]
        if kind == "lit":
            out.append(re.escape(item[1]))
        elif kind == "one":
            out.append("[^/]")
        elif kind == "class":
            out.append(item[1])
        elif kind == "star":
            out.append("[^/]*")
        elif kind == "any":
            out.append(".*")
        elif kind == "dirs":
            out.append("(?:[^/]*/)*")
        else:
            out.append("(?:" + "|".join(_regex(option) for option in item[1]) + ")")
    return "".join(out)


def _invalid(pattern: str, error: re.error) -> GlobError:
    return GlobError(
        f"Error: the glob pattern {_shown(pattern)} is not valid ({error}). {_DIALECT}"
    )


@lru_cache(maxsize=512)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile a glob to a regex that must match a whole path.

    `*` and `?` stay within one path segment, `**` crosses segments (`**/` also matches
    no directory at all), `[abc]`/`[!abc]` are character classes, `{a,b}` alternates.
    The regex backtracks, so this is for trusted patterns (permission rules); patterns
    the model sends go through `compile_matcher`.
    """
    try:
        return re.compile(_regex(_parsed(pattern)) + r"\Z", re.DOTALL)
    except re.error as error:
        raise _invalid(pattern, error) from error


# ------------------------------------------------------------------------------ matching

_SLASHLESS = ("slashless",)
_ANYCHAR = ("anychar",)


@dataclass
class GlobBudget:
    """The automaton steps one `glob` or `grep` call may still spend on matching.

    A step is one automaton state examined while reading a character the matcher has
    not seen in that situation before; repeated situations are cached and cost nothing,
    so ordinary patterns over large trees stay far below the limit.
    """

    steps: int = MAX_MATCH_STEPS
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def spend(self, steps: int, pattern: str) -> None:
        """Take `steps` off the budget; raise `GlobError` once it is used up."""
        with self._lock:
            self.steps -= steps
            left = self.steps
        if left < 0:
            raise GlobError(
                f"Error: matching the glob pattern {_shown(pattern)} took more than "
                f"{MAX_MATCH_STEPS:,} steps over the files searched, so the search was "
                "stopped. Use a simpler pattern (fewer * and ?, fewer alternatives) or "
                "search a narrower path."
            )


class GlobMatcher:
    """A compiled glob that matches whole paths in time linear in the path's length.

    The pattern becomes a nondeterministic automaton; `match` follows the set of states
    it can be in, one character at a time, and caches each move, so no input makes it
    backtrack. Instances are shared between threads (the cache is a plain dict).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        items = _parsed(pattern)
        self._edges: list[list[tuple[tuple, int]]] = []
        self._eps: list[list[int]] = []
        self._accept = self._state()
        start = self._sequence(items, self._accept)
        self._start = self._closure([start])
        self._moves: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _state(self) -> int:
        self._edges.append([])
        self._eps.append([])
        return len(self._edges) - 1

    def _sequence(self, items: list[tuple] | tuple[tuple, ...], after: int) -> int:
        """Build `items` ending in state `after`; return the state the sequence starts in."""
        for item in reversed(items):
            kind = item[0]
            state = self._state()
            if kind == "lit":
                self._edges[state].append((item, after))
            elif kind == "one":
                self._edges[state].append((_SLASHLESS, after))
            elif kind == "class":
                try:
                    test = re.compile(item[1], re.DOTALL)
                except re.error as error:
                    raise _invalid(self.pattern, error) from error
                self._edges[state].append((("class", test), after))
            elif kind in ("star", "any"):
                self._edges[state].append((_SLASHLESS if kind == "star" else _ANYCHAR, state))
                self._eps[state].append(after)
            elif kind == "dirs":  # nothing, or anything that ends with `/`
                inner = self._state()
                self._eps[state] += [after, inner]
                self._edges[inner] += [(_ANYCHAR, inner), (("lit", "/"), after)]
            else:
                self._eps[state] += [self._sequence(option, after) for option in item[1]]
            after = state
        return after

    def _closure(self, states: list[int]) -> frozenset[int]:
        seen = set(states)
        stack = list(states)
        while stack:
            for nxt in self._eps[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return frozenset(seen)

    @staticmethod
    def _accepts(test: tuple, char: str) -> bool:
        kind = test[0]
        if kind == "lit":
            return char == test[1]
        if kind == "slashless":
            return char != "/"
        if kind == "anychar":
            return True
        return test[1].fullmatch(char) is not None

    def _move(self, current: frozenset[int], char: str, budget: GlobBudget) -> frozenset[int]:
        targets = [
            target
            for state in current
            for test, target in self._edges[state]
            if self._accepts(test, char)
        ]
        following = self._closure(targets)
        budget.spend(len(current) + len(following), self.pattern)
        if len(self._moves) >= _MAX_CACHED_MOVES:
            self._moves.clear()
        self._moves[(current, char)] = following
        return following

    def match(self, text: str, budget: GlobBudget | None = None) -> bool:
        """Whether the whole of `text` matches; the work is charged to `budget`.

        Without a budget, this one match may spend up to `MAX_MATCH_STEPS` steps.
        Raises `GlobError` when the budget runs out.
        """
        budget = GlobBudget() if budget is None else budget
        current = self._start
        moves = self._moves
        for char in text:
            following = moves.get((current, char))
            if following is None:
                following = self._move(current, char, budget)
            if not following:
                return False
            current = following
        return self._accept in current


@lru_cache(maxsize=512)
def compile_matcher(pattern: str) -> GlobMatcher:
    """The linear-time matcher for `pattern`, cached; raises `GlobError` if it is unusable."""
    return GlobMatcher(pattern)


def glob_matches(pattern: str, relative_path: str, budget: GlobBudget | None = None) -> bool:
    """Whether `relative_path` (no leading `/`) matches `pattern` as the `glob` tool reads it.

    A pattern without `/` matches a file name at any depth (`*.py`); a pattern with `/` is
    matched against the whole path relative to the search root (`src/**/*.py`); a leading
    `/` anchors at the search root (`/*.py` matches only top-level files). Pass one
    `GlobBudget` for all the paths of one search so that the search as a whole is bounded;
    a pattern that is too long, too deeply nested or too costly raises `GlobError`.
    """
    if pattern.startswith("/"):
        return compile_matcher(pattern.lstrip("/")).match(relative_path, budget)
    if "/" not in pattern:
        name = relative_path.rsplit("/", 1)[-1]
        return compile_matcher(pattern).match(name, budget)
    return compile_matcher(pattern).match(relative_path, budget)
