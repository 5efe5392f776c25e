"""Virtual path normalisation and the glob dialect (`**`, `{a,b}`, classes, anchoring)."""

from __future__ import annotations

import re

import pytest
import wcmatch.glob as wcglob

from fathom.backends._globbing import GlobError, compile_glob, compile_matcher, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_path

# --------------------------------------------------------------------------- normalize_path


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/notes.md", "/notes.md"),
        ("notes.md", "/notes.md"),
        ("a/b/c.txt", "/a/b/c.txt"),
        ("./a.txt", "/a.txt"),
        ("/a/./b/./c", "/a/b/c"),
        ("/a/b/../c", "/a/c"),
        ("a/b/../../c", "/c"),
        ("/a/..", "/"),
        ("//a///b//", "/a/b"),
        ("/a/b/", "/a/b"),
        ("  /padded.txt  ", "/padded.txt"),
        ("/", "/"),
        (".", "/"),
        ("/a/~b", "/a/~b"),
        ("/dots.../x", "/dots.../x"),
    ],
)
def test_normalize_path_gives_one_absolute_dotfree_form(raw: str, expected: str) -> None:
    assert normalize_path(raw) == expected


@pytest.mark.parametrize("raw", ["..", "/..", "../x", "/a/../../x", "a/../..", "/./../etc/passwd"])
def test_normalize_path_refuses_climbing_above_root(raw: str) -> None:
    with pytest.raises(PathError) as info:
        normalize_path(raw)
    message = str(info.value)
    assert message.startswith("Error:")
    assert "above the filesystem root" in message
    assert "inside '/'" in message


@pytest.mark.parametrize("raw", ["~", "~/x", "~root/.ssh/id_rsa", "  ~/x"])
def test_normalize_path_refuses_home_tilde(raw: str) -> None:
    with pytest.raises(PathError, match="uses '~', which is not allowed") as info:
        normalize_path(raw)
    assert "absolute path inside the workspace" in str(info.value)


def test_normalize_path_refuses_nul_byte() -> None:
    with pytest.raises(PathError, match="contains a NUL byte"):
        normalize_path("/a\x00b")


@pytest.mark.parametrize("raw", ["a\\b", "C:\\Users\\x", "/a\\..\\b"])
def test_normalize_path_refuses_backslash_and_names_the_separator(raw: str) -> None:
    with pytest.raises(PathError, match="backslash") as info:
        normalize_path(raw)
    assert "Use '/' as the separator" in str(info.value)


@pytest.mark.parametrize("raw", ["", "   ", "\t\n"])
def test_normalize_path_refuses_empty_path_with_an_example(raw: str) -> None:
    with pytest.raises(PathError, match="the path is empty") as info:
        normalize_path(raw)
    assert "/notes.md" in str(info.value)


def test_normalize_path_refuses_non_string() -> None:
    with pytest.raises(PathError):
        normalize_path(None)  # type: ignore[arg-type]


def test_path_error_is_a_value_error() -> None:
    assert issubclass(PathError, ValueError)


# --------------------------------------------------------------------------- normalize_dir


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, "/"),
        ("", "/"),
        ("   ", "/"),
        ("/", "/"),
        (".", "/"),
        ("/a", "/a/"),
        ("/a/", "/a/"),
        ("a/b", "/a/b/"),
        ("/a/b/..", "/a/"),
        ("/a/./b//", "/a/b/"),
    ],
)
def test_normalize_dir_ends_with_slash_and_defaults_to_root(raw: str | None, expected: str) -> None:
    assert normalize_dir(raw) == expected


@pytest.mark.parametrize("raw", ["/..", "~", "a\\b", "/x/../../y"])
def test_normalize_dir_refuses_what_normalize_path_refuses(raw: str) -> None:
    with pytest.raises(PathError):
        normalize_dir(raw)


# --------------------------------------------------------------------------- compile_glob


def _full(pattern: str, path: str) -> bool:
    """Whether `path` matches the tool's glob, asserting that wcmatch (the dialect) agrees."""
    matched = compile_matcher(pattern).match(path)
    oracle = wcglob.globmatch(path, pattern, flags=wcglob.BRACE | wcglob.GLOBSTAR | wcglob.CASE)
    assert matched is oracle, (pattern, path)
    return matched


def test_compile_glob_returns_a_regex() -> None:
    assert isinstance(compile_glob("*.py"), re.Pattern)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", ".py", False),  # a wildcard never opens a dotfile's name
        (".*.py", ".a.py", True),
        ("*.py", "dir/a.py", False),  # * does not cross /
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/sub/a.py", False),
        ("*", "a/b", False),
        ("*.py", "a.pyc", False),  # the whole path must match
        ("a.py", "xa.py", False),
        ("a.py", "a.py.bak", False),
    ],
)
def test_single_star_stays_within_one_segment(pattern: str, path: str, matches: bool) -> None:
    assert _full(pattern, path) is matches


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("src/**", "src/a", True),
        ("src/**", "src/a/b/c.txt", True),
        ("**", "a/b/c", True),
        ("src/**.py", "src/a/b.py", False),  # `**` inside a name is a plain `*`
        ("src/**.py", "src/b.py", True),
        ("src/**", "other/a", False),
        ("src/**", "src/.git/config", False),  # `**` does not enter dot-directories
        ("src/**/.env", "src/a/.env", True),  # a segment that starts with `.` names one
        ("**", ".env", False),
    ],
)
def test_double_star_crosses_segments(pattern: str, path: str, matches: bool) -> None:
    assert _full(pattern, path) is matches


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.py", "a.py", True),  # zero directories
        ("**/*.py", "x/a.py", True),
        ("**/*.py", "x/y/z/a.py", True),
        ("a/**/b", "a/b", True),  # zero directories in the middle
        ("a/**/b", "a/x/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/xb", False),
        ("a/**/b", "b", False),
        ("**/*.py", "x/a.md", False),
    ],
)
def test_double_star_slash_matches_zero_or_more_directories(
    pattern: str, path: str, matches: bool
) -> None:
    assert _full(pattern, path) is matches


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("?.txt", "a.txt", True),
        ("?.txt", "ab.txt", False),
        ("?.txt", ".txt", False),
        ("a?c", "a/c", False),  # ? does not match /
        ("file?", "file1", True),
    ],
)
def test_question_mark_matches_one_non_slash_character(
    pattern: str, path: str, matches: bool
) -> None:
    assert _full(pattern, path) is matches


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("[abc].txt", "a.txt", True),
        ("[abc].txt", "c.txt", True),
        ("[abc].txt", "d.txt", False),
        ("[a-c]x", "bx", True),
        ("[a-c]x", "dx", False),
        ("[!abc].txt", "d.txt", True),
        ("[!abc].txt", "a.txt", False),
        ("[!abc].txt", "b.txt", False),
        ("[]a]", "]", True),  # a leading ] is literal
        ("[]a]", "a", True),
        ("[\\]", "[]", True),  # `\\]` escapes the `]`, so the `[` is literal
        ("[.]a", ".a", False),  # not even a class opens a dotfile's name
        ("[^abc].txt", "d.txt", True),
        ("a[", "a[", True),  # an unclosed [ is literal
        ("a[b", "a[b", True),
        ("a[b", "ab", False),
    ],
)
def test_character_classes(pattern: str, path: str, matches: bool) -> None:
    assert _full(pattern, path) is matches


def test_negated_class_does_not_match_slash() -> None:
    assert not _full("a[!b]c", "a/c")


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.{py,md}", "a.py", True),
        ("*.{py,md}", "a.md", True),
        ("*.{py,md}", "a.txt", False),
        ("{src,lib}/*.py", "src/a.py", True),
        ("{src,lib}/*.py", "lib/a.py", True),
        ("{src,lib}/*.py", "doc/a.py", False),
        ("{a,{b,c}}d", "ad", True),  # nested braces
        ("{a,{b,c}}d", "bd", True),
        ("{a,{b,c}}d", "cd", True),
        ("{a,{b,c}}d", "dd", False),
        ("{a,b{x,y}}.txt", "bx.txt", True),
        ("{a,b{x,y}}.txt", "by.txt", True),
        ("{a,b{x,y}}.txt", "b.txt", False),
        ("{,x}a", "a", True),  # empty alternative
        ("{,x}a", "xa", True),
        ("a{b", "a{b", True),  # an unclosed { is literal
        ("{**/,}*.py", "a/b/c.py", True),  # globs inside alternatives
    ],
)
def test_brace_alternation(pattern: str, path: str, matches: bool) -> None:
    assert _full(pattern, path) is matches


@pytest.mark.parametrize(
    ("pattern", "path"),
    [("a.b", "axb"), ("a+b", "aab"), ("(a)", "a"), ("a$", "a"), ("^a", "a"), ("a|b", "a")],
)
def test_regex_metacharacters_are_literal(pattern: str, path: str) -> None:
    assert not _full(pattern, path)
    assert _full(pattern, pattern)


def test_compile_glob_is_cached() -> None:
    assert compile_glob("cache/**/*.txt") is compile_glob("cache/**/*.txt")


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("/secrets/**", "/secrets/.key", True),  # a rule covers dotfiles too
        ("/**", "/.env", True),
        ("/*.py", "/.py", True),
        ("/src/**.py", "/src/a/b.py", True),  # in rules `**` crosses `/` anywhere
        ("/src/*", "/src/a/b", False),
        ("/{docs,notes}/**", "/notes/x.md", True),
    ],
)
def test_permission_rule_globs_keep_matching_dotfiles(
    pattern: str, path: str, matches: bool
) -> None:
    """Permission rules (`compile_glob`) are not the tool's dialect: a deny rule on a
    directory must not skip the dotfiles in it, so there `*` and `**` match them."""
    assert (compile_glob(pattern).match(path) is not None) is matches


# --------------------------------------------------------------------------- glob_matches


@pytest.mark.parametrize(
    ("pattern", "relative", "matches"),
    [
        # A bare pattern (no /) matches the file name at any depth.
        ("*.py", "a.py", True),
        ("*.py", "src/a.py", True),
        ("*.py", "src/deep/er/a.py", True),
        ("*.py", "src/a.md", False),
        ("a.py", "src/x/a.py", True),
        ("a.py", "src/x/ba.py", False),
        ("src", "src/a.py", False),  # directory names are not file names
        ("?.md", "docs/x.md", True),
        ("*.{py,md}", "deep/x.md", True),
        # A pattern with / is matched against the whole relative path.
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "x/src/a.py", False),
        ("src/*.py", "src/sub/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/sub/deep/a.py", True),
        ("**/test_*.py", "tests/unit/test_x.py", True),
        # A leading / anchors at the search root.
        ("/*.py", "a.py", True),
        ("/*.py", "src/a.py", False),
        ("/src/*.py", "src/a.py", True),
        ("/a.py", "sub/a.py", False),
        ("/**/*.py", "sub/a.py", True),
        # Dotfiles: a bare pattern matches the name, so only the name's own dot counts.
        ("*.yml", ".github/workflows/ci.yml", True),
        ("**/*.yml", ".github/workflows/ci.yml", False),  # `**` skips dot-directories
        ("*", ".env", False),
        (".env", "deep/.env", True),
        ("**/.env", "deep/.env", True),
        ("src/*", "src/.hidden", False),
    ],
)
def test_glob_matches_reads_patterns_as_the_glob_tool_does(
    pattern: str, relative: str, matches: bool
) -> None:
    assert glob_matches(pattern, relative) is matches


@pytest.mark.parametrize("pattern", ["../*.py", "a/../b", "..", "a\\..\\b"])
def test_glob_matches_refuses_a_dot_dot_segment(pattern: str) -> None:
    with pytest.raises(GlobError, match=r"'\.\.' segment"):
        glob_matches(pattern, "a.py")


def test_glob_matches_allows_dots_inside_a_name() -> None:
    assert glob_matches("a..b", "a..b")
    assert glob_matches("...", "...")


@pytest.mark.parametrize("pattern", ["[z-a]", "*.[9-0]", "{a,[b-a]}"])
def test_a_reversed_range_is_an_error_rather_than_no_match(pattern: str) -> None:
    """wcmatch quietly matches nothing here; fathom says what to fix."""
    with pytest.raises(GlobError, match="reversed"):
        glob_matches(pattern, "a")
