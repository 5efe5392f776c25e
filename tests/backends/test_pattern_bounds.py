"""Glob patterns and paths the model sends cannot hang or crash `glob`/`grep`.

A 20-character glob once made the backtracking regex run for many seconds per file name,
deep brace nesting raised `RecursionError`, and a 1,500-part path overflowed
`os.makedirs`. Every such input now gets a prompt correct answer or an error answer that
names the limit, on every backend and through the agent's tools. No test here measures
time: `pytest.mark.timeout` only stops a hang from stalling the suite.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import wcmatch.glob as wcglob
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent, create_file_data
from fathom.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from fathom.backends._globbing import (
    MAX_BRACE_DEPTH,
    MAX_BRACE_EXPANSIONS,
    MAX_MATCH_STEPS,
    MAX_PATTERN_CHARS,
    GlobBudget,
    GlobError,
    compile_matcher,
    glob_matches,
)
from fathom.backends._paths import MAX_PATH_DEPTH, PathError, normalize_path
from fathom.backends.errors import ErrorKind, error_kind
from fathom.testing import ScriptedModel, ai, tool_call

pytestmark = pytest.mark.timeout(120)

LONG = "a" * 60  # a file name that a backtracking `*a*a*a...*b` needs ages to reject
STARS = "*a*a*a*a*a*a*a*a*a*b"  # 20 characters
GLOBSTAR_STARS = "**/*a*a*a*a*a*a*a*a*b"  # 21 characters
NESTED = "{" * 400 + "a" + "}" * 400  # 801 characters, 400 deep
DEEP = "/" + "/".join(["d"] * 1500) + "/f.txt"  # 1,501 parts
FILES = {f"/src/{LONG}": "hello\n", f"/src/sub/{LONG}": "hello\n", "/src/ok.b": "hello\n"}


# ----------------------------------------------------------------------------- backends


def _state(files: dict[str, str], _root: str) -> Any:
    data = {path: create_file_data(text) for path, text in files.items()}
    return StateBackend(SimpleNamespace(state={"files": data}))


def _store(files: dict[str, str], _root: str) -> Any:
    backend = StoreBackend(store=InMemoryStore(), namespace=("bounds",))
    for path, text in files.items():
        assert backend.write(path, text).error is None
    return backend


def _disk(files: dict[str, str], root: str) -> Any:
    backend = FilesystemBackend(root_dir=root, virtual_mode=True)
    for path, text in files.items():
        assert backend.write(path, text).error is None
    return backend


def _composite(files: dict[str, str], root: str) -> Any:
    runtime = SimpleNamespace(
        state={"files": {p: create_file_data(t) for p, t in files.items()}}, store=None
    )
    disk = FilesystemBackend(root_dir=root, virtual_mode=True)
    for path, text in files.items():
        assert disk.write(path, text).error is None
    return CompositeBackend(default=StateBackend(), routes={"/disk/": disk}).bind(runtime)


def _sandbox(files: dict[str, str], root: str) -> Any:
    from tests.backends.local_sandbox import LocalShellSandbox

    for path, text in files.items():  # straight to disk: 500 files, one command each, is slow
        target = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    return LocalShellSandbox(root)


BACKENDS: dict[str, Callable[[dict[str, str], str], Any]] = {
    "sandbox": _sandbox,
    "state": _state,
    "store": _store,
    "filesystem": _disk,
    "composite": _composite,
}


@pytest.fixture(params=sorted(BACKENDS))
def make(request: pytest.FixtureRequest) -> Iterator[Callable[[dict[str, str]], Any]]:
    root = tempfile.mkdtemp(prefix="fathom-bounds-")
    yield lambda files: BACKENDS[request.param](files, root)
    shutil.rmtree(root, ignore_errors=True)


def _paths(result: Any) -> list[str]:
    assert result.error is None, result.error
    return sorted(m["path"] for m in result.matches)


# ------------------------------------------------------------------ backtracking patterns


@pytest.mark.parametrize("pattern", [STARS, GLOBSTAR_STARS])
def test_star_heavy_glob_answers_correctly_on_every_backend(make, pattern: str) -> None:
    backend = make(FILES)
    assert _paths(backend.glob(pattern)) == []
    assert _paths(backend.grep("hello", "/", pattern)) == []
    # the same shape still finds what it should
    hit = pattern[:-1] + "a"
    assert f"/src/{LONG}" in _paths(backend.glob(hit, "/src"))


def test_matcher_rejects_a_long_name_for_a_star_heavy_pattern() -> None:
    for pattern in (STARS, GLOBSTAR_STARS):
        assert not compile_matcher(pattern).match("a" * 5000)
        assert compile_matcher(pattern).match("a" * 5000 + "b")


def test_costly_pattern_over_many_files_stops_with_an_error_answer(make) -> None:
    rng = random.Random(7)
    names = {"".join(rng.choice("ab") for _ in range(250)) for _ in range(500)}
    backend = make({f"/{name}": "x\n" for name in names})
    pattern = "*a" + "?" * 18  # its automaton has too many states to cache
    for result in (backend.glob(pattern), backend.grep("x", "/", pattern)):
        _refused(result, MAX_MATCH_STEPS)


def _refused(result: Any, limit: int) -> None:
    """`result` is the typed error for a pattern that passed the bound `limit`."""
    assert error_kind(result.error) is ErrorKind.LIMIT, result.error
    assert result.error.limit == limit


def test_budget_is_shared_by_the_paths_of_one_search() -> None:
    budget = GlobBudget(steps=50)
    with pytest.raises(GlobError, match="steps"):
        for n in range(100):
            glob_matches("*a??", "ab" * 20 + str(n), budget)


# ------------------------------------------------------------------------- size and depth


@pytest.mark.parametrize("pattern", [NESTED, "{" * 11 + "a" + "}" * 11])
def test_deeply_nested_braces_are_an_error_answer(make, pattern: str) -> None:
    backend = make(FILES)
    for result in (backend.glob(pattern), backend.grep("hello", "/", pattern)):
        _refused(result, MAX_BRACE_DEPTH)
        assert len(str(result.error)) < 400  # the pattern is quoted cut short, not whole
    with pytest.raises(GlobError, match=f"more than {MAX_BRACE_DEPTH} deep. Flatten"):
        glob_matches(pattern, "a")


def test_braces_nested_to_the_limit_still_work() -> None:
    pattern = "{x," * MAX_BRACE_DEPTH + "a" + "}" * MAX_BRACE_DEPTH
    assert glob_matches(pattern, "a") and glob_matches(pattern, "x")
    assert not glob_matches(pattern, "b")


def test_braces_expand_to_at_most_the_limit_of_alternatives(make) -> None:
    pattern = "{a,b}" * 9  # 512 alternatives
    assert glob_matches(pattern, "ab" * 4 + "a")
    assert not glob_matches(pattern, "ab" * 4 + "c")
    backend = make(FILES)
    too_many = "{a,b}" * 100  # 2**100 alternatives
    for result in (backend.glob(too_many), backend.grep("hello", "/", too_many)):
        _refused(result, MAX_BRACE_EXPANSIONS)
    with pytest.raises(GlobError, match=f"more than {MAX_BRACE_EXPANSIONS} alternatives"):
        glob_matches(too_many, "a")


def test_too_long_a_pattern_is_an_error_answer(make) -> None:
    backend = make(FILES)
    pattern = "a" * (MAX_PATTERN_CHARS + 1)
    for result in (backend.glob(pattern), backend.grep("hello", "/", pattern)):
        _refused(result, MAX_PATTERN_CHARS)
    with pytest.raises(GlobError, match=f"the limit is {MAX_PATTERN_CHARS}. Send a shorter"):
        glob_matches(pattern, "a")
    assert glob_matches("a" * MAX_PATTERN_CHARS, "a" * MAX_PATTERN_CHARS)


def test_pattern_of_1500_parts_is_an_error_answer(make) -> None:
    backend = make(FILES)
    result = backend.glob(DEEP.lstrip("/"))
    assert result.error is not None and "limit" in str(result.error)


@pytest.mark.parametrize("operation", ["write", "read", "ls", "glob", "grep", "edit", "delete"])
def test_path_of_1500_parts_is_an_error_answer(make, operation: str) -> None:
    backend = make({})
    calls = {
        "write": lambda: backend.write(DEEP, "x"),
        "read": lambda: backend.read(DEEP),
        "ls": lambda: backend.ls(DEEP),
        "glob": lambda: backend.glob("*", DEEP),
        "grep": lambda: backend.grep("x", DEEP),
        "edit": lambda: backend.edit(DEEP, "x", "y"),
        "delete": lambda: backend.delete(DEEP),
    }
    result = calls[operation]()
    assert result.error is not None
    assert f"{MAX_PATH_DEPTH}" in str(result.error)  # the error names the bound


def test_normalize_path_bounds_depth_and_length() -> None:
    assert normalize_path("/".join(["d"] * MAX_PATH_DEPTH)).count("/") == MAX_PATH_DEPTH
    with pytest.raises(PathError, match="parts deep"):
        normalize_path("/".join(["d"] * (MAX_PATH_DEPTH + 1)))
    # the depth is that of the resolved path, not of what was written
    assert normalize_path("/".join(["d"] * 400) + "/.." * 300) == "/" + "/".join(["d"] * 100)
    with pytest.raises(PathError, match="characters long"):
        normalize_path("/" + "x" * 5000)


# ------------------------------------------------- the automaton reads globs as wcmatch does

_WCMATCH_FLAGS = wcglob.BRACE | wcglob.GLOBSTAR | wcglob.CASE  # Deep Agents' flags, case-sensitive
_pieces = st.sampled_from(
    ["a", "b", "/", "//", ".", ".*", "*", "**", "**/", "/**", "?", "[ab]", "[!a]", "[^b]",
     "[.a]", "[a-b]", "[", "]", "{", "}", ",", "\\*", "\\", "{a,b}", "{,a/}", "{a*,b?}",
     "{.a,b}", "{**,a}", "{a..b}"]
)
_patterns = st.lists(_pieces, max_size=8).map("".join)
# Paths as backends pass them: relative, no empty, `.` or `..` segments.
_names = st.text(alphabet="ab.[]", min_size=1, max_size=4).filter(lambda n: n not in (".", ".."))
_rel_paths = st.lists(_names, min_size=1, max_size=4).map("/".join)


def _deepagents_glob(pattern: str, relative: str) -> bool:
    """How Deep Agents' backends apply a glob, written out with wcmatch."""
    compiled = wcglob.compile(pattern.lstrip("/"), flags=_WCMATCH_FLAGS)
    return bool(compiled.match(relative if "/" in pattern else relative.rsplit("/", 1)[-1]))


@settings(max_examples=300, deadline=None)
@given(pattern=_patterns, path=_rel_paths)
def test_matcher_agrees_with_wcmatch(pattern: str, path: str) -> None:
    expected = wcglob.globmatch(path, pattern, flags=_WCMATCH_FLAGS)
    assert compile_matcher(pattern).match(path) is expected, (pattern, path)


@settings(max_examples=200, deadline=None)
@given(pattern=_patterns, path=_rel_paths)
def test_glob_matches_agrees_with_deepagents_reading(pattern: str, path: str) -> None:
    if ".." in pattern.replace("\\", "/").split("/"):
        with pytest.raises(GlobError):
            glob_matches(pattern, path)
        return
    assert glob_matches(pattern, path) is _deepagents_glob(pattern, path), (pattern, path)


# ------------------------------------------------------------------ through the agent tools


def _tool_messages(calls: list[Any], files: dict[str, str]) -> list[ToolMessage]:
    agent = create_deep_agent(ScriptedModel(replies=[ai("", *calls), ai("done")]))
    state = {
        "messages": [{"role": "user", "content": "go"}],
        "files": {path: create_file_data(text) for path, text in files.items()},
    }
    result = agent.invoke(state)
    assert result["messages"][-1].content == "done"
    return [m for m in result["messages"] if m.type == "tool"]


def test_agent_glob_and_grep_answer_pathological_patterns() -> None:
    calls = [
        tool_call("glob", {"pattern": GLOBSTAR_STARS}),
        tool_call("grep", {"pattern": "hello", "glob": STARS}),
        tool_call("glob", {"pattern": NESTED}),
        tool_call("grep", {"pattern": "hello", "glob": NESTED}),
        tool_call("glob", {"pattern": "*", "path": DEEP}),
        tool_call("read_file", {"file_path": DEEP}),
    ]
    found, grepped, *errors = _tool_messages(calls, FILES)
    assert found.status == "success" and "No files found" in found.text
    assert grepped.status == "success" and "No matches" in grepped.text
    for message in errors:
        assert message.status == "error"
        assert message.text.startswith("Error")
        assert "limit" in message.text or "deep" in message.text
