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

The tool's dialect is Deep Agents' (`deepagents`), `wcmatch.glob` with `BRACE | GLOBSTAR`:
dotfiles match only a pattern segment that starts with `.`, and `**` does not enter
dot-directories (see the matching section below).

`compile_glob` is the permission rules' dialect, as a Python regex: trusted operator
configuration, in which `*` and `**` also match dotfiles (a deny rule on a directory must
cover its `.env`) and `**` crosses `/` wherever it appears.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache

from fathom.errors import FathomError

__all__ = [
    "GLOB_TRAVERSAL_REASON",
    "MAX_BRACE_DEPTH",
    "MAX_BRACE_EXPANSIONS",
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


GLOB_TRAVERSAL_REASON = "has a '..' segment"
"""The `GlobError.reason` of a pattern with a `..` segment."""


class GlobError(FathomError, ValueError):
    """A glob pattern that cannot be used; the message says what is wrong with it.

    `limit` is the bound that was passed (pattern length, brace depth, matching steps), or
    `None` when the pattern is simply malformed: backends return the first as
    `BackendError(LIMIT, limit=...)` and the second as `BackendError(INVALID)`, with
    `reason` (a few words) as the detail.
    """

    def __init__(self, message: str, *, reason: str = "", limit: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message.removeprefix("Error: ")
        self.limit = limit


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
            "several simpler globs.",
            reason="nests braces too deeply",
            limit=MAX_BRACE_DEPTH,
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
        raise GlobError(
            f"Error: the glob pattern must be text, not {type(pattern).__name__}.",
            reason="is not text",
        )
    if len(pattern) > MAX_PATTERN_CHARS:
        raise GlobError(
            f"Error: the glob pattern is {len(pattern)} characters long; the limit is "
            f"{MAX_PATTERN_CHARS}. Send a shorter pattern, or search a narrower path.",
            reason=f"is {len(pattern)} characters long",
            limit=MAX_PATTERN_CHARS,
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
        f"Error: the glob pattern {_shown(pattern)} is not valid ({error}). {_DIALECT}",
        reason=f"is not valid ({error})",
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
#
# The `glob` tool (and grep's `glob=` filter) read patterns as Deep Agents'
# backends do, which is `wcmatch.glob` with `BRACE | GLOBSTAR`:
#   - braces are expanded first, exactly as wcmatch expands them (`bracex`, at most
#     `MAX_BRACE_EXPANSIONS` alternatives; `{1..3}` and `{a..c}` are ranges, `{a}` is literal);
#   - a segment that is exactly `**` is a globstar: any number of whole directories, none
#     of whose names starts with `.`; `**` inside a longer segment is a plain `*`;
#   - `*`, `?` and `[...]` never match a `.` at the start of a name, so dotfiles match only
#     a pattern segment that itself starts with `.` (`.env`, `.*`); `*` never crosses `/`;
#   - `\` escapes the next character; `[!...]` and `[^...]` negate a class.
# The dialect is wcmatch's; the engine is not, because wcmatch compiles to a backtracking
# regex: with a few `**/` segments its time grows with a high power of the path's length.


class _Token:
    """One token of a brace-free pattern."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: str = "") -> None:
        self.kind = kind  # "lit", "sep", "star", "one", "class"
        self.value = value


_POSIX_CLASS = re.compile(r"\[:[a-z]+:\]")


def _class_end(pattern: str, i: int) -> int | None:
    """The index after the `]` closing the class that opens at `i`; `None` if it is literal.

    Follows wcmatch: a `]` (or `-`) right after `[`, `[!` or `[^` is a member, `[:alpha:]`
    is one member, `\\` escapes, and a class may not contain `/` (then `[` is literal).
    """
    j, n = i + 1, len(pattern)
    if j < n and pattern[j] in "!^":
        j += 1
    if j < n and pattern[j] in "]-":
        j += 1
    while j < n:
        char = pattern[j]
        if char == "]":
            return j + 1
        if char == "/":
            return None
        if char == "\\":
            if pattern[j + 1 : j + 2] == "/":
                return None
            j += 2
            continue
        if char == "[" and (posix := _POSIX_CLASS.match(pattern, j)):
            j = posix.end()
            continue
        j += 1
    return None


def _check_ranges(token: str, pattern: str) -> None:
    """Refuse a class with a reversed range (`[z-a]`): wcmatch would quietly match nothing
    there, but an error tells the model what to fix."""
    members: list[str | None] = []  # None: a `[:name:]` class or an escaped `-`
    j = 2 if token[1:2] in ("!", "^") else 1
    while j < len(token) - 1:
        if token[j] == "\\":
            members.append(token[j + 1] if token[j + 1] != "-" else None)
            j += 2
        elif token[j] == "[" and (posix := _POSIX_CLASS.match(token, j)):
            members.append(None)
            j = posix.end()
        else:
            members.append(token[j])
            j += 1
    k = 1
    while k < len(members) - 1:
        low, high = members[k - 1], members[k + 1]
        if members[k] == "-" and low is not None and high is not None:
            if low > high:
                raise GlobError(
                    f"Error: the glob pattern {_shown(pattern)} is not valid (the range "
                    f"{low}-{high} in {token} is reversed). {_DIALECT}",
                    reason=f"has a reversed range {low}-{high}",
                )
            k += 3  # the range's end cannot start another range
            continue
        k += 1


def _tokens(expansion: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(expansion)
    while i < n:
        char = expansion[i]
        if char == "\\":
            if i + 1 < n:
                nxt = expansion[i + 1]
                tokens.append(_Token("sep") if nxt == "/" else _Token("lit", nxt))
            i += 2  # a lone trailing backslash stands for nothing, as in wcmatch
        elif char == "/":
            tokens.append(_Token("sep"))
            i += 1
        elif char == "*":
            tokens.append(_Token("star", "*"))
            i += 1
        elif char == "?":
            tokens.append(_Token("one"))
            i += 1
        elif char == "[" and (end := _class_end(expansion, i)) is not None:
            _check_ranges(expansion[i:end], expansion)
            tokens.append(_Token("class", expansion[i:end]))
            i = end
        else:
            tokens.append(_Token("lit", char))
            i += 1
    return tokens


def _items(expansion: str) -> list[tuple]:
    """The flat item sequence of one brace-free pattern.

    Items: ("lit", c); ("one", at_start); ("class", token, at_start); ("star", at_start);
    ("dirs",) a globstar followed by `/` (zero or more visible directories, each with
    its `/`); ("rest",) a globstar that ends the pattern (any visible remainder).
    `at_start` marks a wildcard that opens a name, which therefore may not match a `.`.
    """
    segments: list[list[_Token]] = [[]]
    for token in _tokens(expansion):
        if token.kind == "sep":
            if segments[-1] or len(segments) == 1:
                segments.append([])
            continue  # `a//b` is `a/b`
        segments[-1].append(token)
    items: list[tuple] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if index and not (items and items[-1][0] == "dirs"):
            items.append(("lit", "/"))
        if len(segment) == 2 and all(t.kind == "star" for t in segment):
            if items and items[-1][0] == "dirs":
                if not last:
                    continue  # `**/**/` is `**/`
                items.pop()
            items.append(("rest",) if last else ("dirs",))
            continue
        for position, token in enumerate(segment):
            at_start = position == 0
            if token.kind == "lit":
                items.append(("lit", token.value))
            elif token.kind == "one":
                items.append(("one", at_start))
            elif token.kind == "class":
                items.append(("class", token.value, at_start))
            elif not (items and items[-1][0] == "star" and not at_start):
                items.append(("star", at_start))  # `a**b` is `a*b`
    return items


MAX_BRACE_EXPANSIONS = 1000
"""How many alternatives a pattern's braces may expand to (wcmatch's own limit)."""

_MAX_EXPANDED_CHARS = 50_000  # the expanded alternatives' total length: the automaton's size


def _expansions(pattern: str) -> list[str]:
    import bracex

    out: list[str] = []
    total = 0
    try:
        for expansion in bracex.iexpand(
            pattern, keep_escapes=True, limit=MAX_BRACE_EXPANSIONS, return_empty=True
        ):
            total += len(expansion)
            if total > _MAX_EXPANDED_CHARS:
                raise bracex.ExpansionLimitException("too long")
            out.append(expansion)
    except bracex.ExpansionLimitException:
        raise GlobError(
            f"Error: the glob pattern {_shown(pattern)} expands to more than "
            f"{MAX_BRACE_EXPANSIONS} alternatives (or too much text). Use fewer {{a,b}} "
            "groups, or run several simpler globs.",
            reason=f"expands to more than {MAX_BRACE_EXPANSIONS} alternatives",
            limit=MAX_BRACE_EXPANSIONS,
        ) from None
    return out or [""]


@lru_cache(maxsize=4096)
def _in_class(token: str, char: str) -> bool:
    """Whether `char` is a member of the class `token` (wcmatch decides; one character)."""
    import wcmatch.glob as wcglob

    # After a literal `x`: alone, `.` would be the name "." that wcmatch never matches.
    flags = wcglob.DOTMATCH | wcglob.CASE
    return char != "/" and wcglob.globmatch("x" + char, "x" + token, flags=flags)


_SLASHLESS = ("slashless",)
_NAME_START = ("name_start",)  # a character that may open a visible name: not `.` or `/`


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
                "search a narrower path.",
                reason="took too many matching steps",
                limit=MAX_MATCH_STEPS,
            )


class GlobMatcher:
    """A compiled tool glob that matches whole paths in time linear in the path's length.

    The pattern (every brace alternative) becomes one nondeterministic automaton; `match`
    follows the set of states it can be in, one character at a time, and caches each
    move, so no input makes it backtrack. A `*` that opens a name may not match empty
    before a `.`: that rule is an empty move guarded by the next character. Instances are
    shared between threads (the cache is a plain dict).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        _parsed(pattern)  # the length and brace-depth bounds, before expanding anything
        self._edges: list[list[tuple[tuple, int]]] = []
        self._eps: list[list[tuple[int, bool]]] = []  # (target, guarded by the next char)
        self._accept = self._state()
        self._start = self._state()
        for expansion in _expansions(pattern):
            first = self._sequence(_items(expansion), self._accept)
            self._eps[self._start].append((first, False))
        self._moves: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _state(self) -> int:
        self._edges.append([])
        self._eps.append([])
        return len(self._edges) - 1

    def _sequence(self, items: list[tuple], after: int) -> int:
        """Build `items` ending in state `after`; return the state the sequence starts in."""
        for item in reversed(items):
            kind = item[0]
            state = self._state()
            if kind == "lit":
                self._edges[state].append((item, after))
            elif kind == "one":
                self._edges[state].append((_NAME_START if item[1] else _SLASHLESS, after))
            elif kind == "class":
                self._edges[state].append((item, after))
            elif kind == "star":
                loop = self._state()
                self._eps[state].append((loop, bool(item[1])))
                self._edges[loop].append((_SLASHLESS, loop))
                self._eps[loop].append((after, False))
            elif kind == "dirs":  # nothing, or visible directories each with its `/`
                name = self._state()
                self._eps[state].append((after, False))
                self._edges[state].append((_NAME_START, name))
                self._edges[name] += [(_SLASHLESS, name), (("lit", "/"), state)]
            else:  # "rest": nothing, or visible names separated by `/`
                name = self._state()
                self._eps[state].append((after, False))
                self._edges[state].append((_NAME_START, name))
                self._edges[name] += [(_SLASHLESS, name), (("lit", "/"), state)]
                self._eps[name].append((after, False))
            after = state
        return after

    def _closure(self, states: frozenset[int] | list[int], char: str | None) -> set[int]:
        """`states` and every state an empty move reaches, `char` being the next character."""
        opens_name = char is not None and char not in "./"
        seen = set(states)
        stack = list(states)
        while stack:
            for nxt, guarded in self._eps[stack.pop()]:
                if nxt not in seen and (opens_name or not guarded):
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    @staticmethod
    def _accepts(test: tuple, char: str) -> bool:
        kind = test[0]
        if kind == "lit":
            return char == test[1]
        if kind == "slashless":
            return char != "/"
        if kind == "name_start":
            return char not in "./"
        # a class: never `/`, and never the `.` that opens a name
        return not (test[2] and char == ".") and _in_class(test[1], char)

    def _move(self, current: frozenset[int], char: str, budget: GlobBudget) -> frozenset[int]:
        closed = self._closure(current, char)
        following = frozenset(
            target
            for state in closed
            for test, target in self._edges[state]
            if self._accepts(test, char)
        )
        budget.spend(len(closed) + len(following), self.pattern)
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
        current = frozenset([self._start])
        moves = self._moves
        for char in text:
            following = moves.get((current, char))
            if following is None:
                following = self._move(current, char, budget)
            if not following:
                return False
            current = following
        return self._accept in self._closure(current, None)


@lru_cache(maxsize=512)
def compile_matcher(pattern: str) -> GlobMatcher:
    """The linear-time matcher for `pattern`, cached; raises `GlobError` if it is unusable."""
    return GlobMatcher(pattern)


def glob_matches(pattern: str, relative_path: str, budget: GlobBudget | None = None) -> bool:
    """Whether `relative_path` (no leading `/`) matches `pattern` as the `glob` tool reads it.

    A pattern without `/` matches a file name at any depth (`*.py`); a pattern with `/` is
    matched against the whole path relative to the search root (`src/**/*.py`); a leading
    `/` anchors at the search root (`/*.py` matches only top-level files). Names that
    start with `.` match only a pattern segment that starts with `.`, and `**` does not
    enter dot-directories, so `*.yml` finds `.github/ci.yml` by its name while
    `**/*.yml` does not. A `..` segment is refused. Pass one `GlobBudget` for all the
    paths of one search so that the search as a whole is bounded; a pattern that is too
    long, too deeply nested, expands too far or costs too much raises `GlobError`.
    """
    if isinstance(pattern, str) and ".." in pattern.replace("\\", "/").split("/"):
        raise GlobError(
            f"Error: the glob pattern {_shown(pattern)} has a '..' segment; globs search "
            "below their path. Pass the directory to search as `path` instead.",
            reason=GLOB_TRAVERSAL_REASON,
        )
    if not isinstance(pattern, str) or "/" in pattern:
        return compile_matcher(pattern.lstrip("/") if isinstance(pattern, str) else pattern).match(
            relative_path, budget
        )
    return compile_matcher(pattern).match(relative_path.rsplit("/", 1)[-1], budget)
