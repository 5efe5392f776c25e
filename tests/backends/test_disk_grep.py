"""`FilesystemBackend.grep` on disk: ripgrep when `rg` is present, Python otherwise.

Every test of the battery runs on both engines and expects the same answer, so an
installation without ripgrep behaves like one with it. The few tests that only make sense
for one engine say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.system_requirements import needs

from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.filesystem import NO_RIPGREP_ENV, FilesystemBackend
from fathom.backends.utils import MAX_EDIT_BYTES

HAS_RG = shutil.which("rg") is not None
needs_rg = pytest.mark.skipif(not HAS_RG, reason=needs("ripgrep"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture(
    params=[pytest.param(True, id="ripgrep", marks=needs_rg), pytest.param(False, id="python")]
)
def backend(root: Path, request: pytest.FixtureRequest) -> FilesystemBackend:
    made = FilesystemBackend(root, ripgrep=request.param)
    assert (made.ripgrep is not None) is request.param
    return made


def found(result: object) -> list[tuple[str, int]]:
    return [(m["path"], m["line"]) for m in result.matches]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ the battery


def test_literal_matches_in_path_then_line_order(backend: FilesystemBackend, root: Path) -> None:
    (root / "b.txt").write_text("x.y\nxzy\nx.y again\n")
    (root / "a").mkdir()
    (root / "a" / "c.md").write_text("nothing\n(x.y)\n")
    result = backend.grep("x.y")
    assert found(result) == [("/a/c.md", 2), ("/b.txt", 1), ("/b.txt", 3)]
    assert result.matches[0]["text"] == "(x.y)"
    assert (result.truncated, result.skipped, result.error) == (False, None, None)


def test_special_characters_are_literal_and_never_options(
    backend: FilesystemBackend, root: Path
) -> None:
    (root / "a.txt").write_text("-e foo\n--files\n$(id) `id` 'q' \"dq\" [a-z]+ \\d\n")
    for pattern, line in [("-e foo", 1), ("--files", 2), ("$(id)", 3), ("[a-z]+", 3),
                          ("\\d", 3), ("'q' \"dq\"", 3)]:
        assert found(backend.grep(pattern)) == [("/a.txt", line)], pattern


def test_dotfiles_are_searched_and_git_directories_are_not(
    backend: FilesystemBackend, root: Path
) -> None:
    (root / ".hidden").mkdir()
    (root / ".hidden" / "conf").write_text("needle\n")
    (root / ".env").write_text("needle\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("needle\n")
    (root / "sub" / ".git").mkdir(parents=True)
    (root / "sub" / ".git" / "HEAD").write_text("needle\n")
    assert found(backend.grep("needle")) == [("/.env", 1), ("/.hidden/conf", 1)]


def test_glob_path_and_single_file(backend: FilesystemBackend, root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "a.py").write_text("needle\n")
    (root / "src" / "pkg" / "b.py").write_text("needle\n")
    (root / "notes.md").write_text("needle\n")
    assert found(backend.grep("needle", glob="*.py")) == [("/src/a.py", 1), ("/src/pkg/b.py", 1)]
    assert found(backend.grep("needle", "/src/pkg")) == [("/src/pkg/b.py", 1)]
    assert found(backend.grep("needle", "/notes.md")) == [("/notes.md", 1)]
    assert found(backend.grep("needle", "/src", glob="pkg/*.py")) == [("/src/pkg/b.py", 1)]
    assert backend.grep("needle", "/nope").error == BackendError(ErrorKind.NOT_FOUND, "/nope")


def test_binary_files_are_passed_over_and_large_ones_listed_as_skipped(
    backend: FilesystemBackend, root: Path
) -> None:
    (root / "tool.bin").write_bytes(b"\x7fELF\x00\x00needle\x00")
    (root / "big.log").write_bytes(b"needle\n" + b"x" * MAX_EDIT_BYTES)
    (root / "small.txt").write_text("a needle\n")
    result = backend.grep("needle")
    assert found(result) == [("/small.txt", 1)]
    assert result.skipped == ["/big.log"]


def test_huge_sparse_files_are_listed_as_skipped_without_being_read(
    backend: FilesystemBackend, root: Path
) -> None:
    # Two 4,000 MiB files with no disk blocks (a sandboxed command can make them within any
    # disk budget): reading them would stall every search; neither engine reads them.
    for name in ("sparse-1.img", "sub/sparse-2.img"):
        (root / name).parent.mkdir(exist_ok=True)
        with open(root / name, "wb") as handle:
            handle.truncate(4000 << 20)
    (root / "sub" / "small.txt").write_text("a needle\n")
    result = backend.grep("needle")
    assert found(result) == [("/sub/small.txt", 1)]
    assert result.skipped == ["/sparse-1.img", "/sub/sparse-2.img"]
    assert backend.grep("needle", glob="*.txt").skipped is None  # the glob applies to them too


def test_a_large_file_is_skipped_whether_or_not_it_holds_the_pattern(
    backend: FilesystemBackend, root: Path
) -> None:
    (root / "big.log").write_bytes(b"x" * (MAX_EDIT_BYTES + 1))
    (root / "a.txt").write_text("needle\n")
    result = backend.grep("needle")
    assert found(result) == [("/a.txt", 1)]
    assert result.skipped == ["/big.log"]


@needs_rg
def test_ripgrep_does_not_list_an_ignored_large_file_as_skipped(root: Path) -> None:
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "huge.bin").write_bytes(b"needle" * (MAX_EDIT_BYTES // 6 + 1))
    (root / "big.txt").write_bytes(b"needle\n" * (MAX_EDIT_BYTES // 7 + 1))
    result = FilesystemBackend(root, ripgrep=True).grep("needle")
    assert result.skipped == ["/big.txt"]


def test_non_utf8_text_is_searched_with_replacement_characters(
    backend: FilesystemBackend, root: Path
) -> None:
    (root / "latin.txt").write_bytes("café needle\n".encode("latin-1"))
    (root / "crlf.txt").write_bytes(b"one\r\nneedle two\r\n")
    result = backend.grep("needle")
    assert found(result) == [("/crlf.txt", 2), ("/latin.txt", 1)]
    assert result.matches[1]["text"] == "caf\ufffd needle"
    assert found(backend.grep("caf\ufffd")) == [("/latin.txt", 1)]  # Python decides U+FFFD


def test_max_count_caps_the_total_and_says_so(backend: FilesystemBackend, root: Path) -> None:
    (root / "a.txt").write_text("hit\nhit\n")
    (root / "b.txt").write_text("hit\n")
    capped = backend.grep("hit", max_count=2)
    assert (found(capped), capped.truncated) == ([("/a.txt", 1), ("/a.txt", 2)], True)
    exact = backend.grep("hit", max_count=3)
    assert (len(exact.matches), exact.truncated) == (3, False)
    assert backend.grep("hit", max_count=-1).error.kind == ErrorKind.INVALID


def test_context_lines_never_repeat_a_match(backend: FilesystemBackend, root: Path) -> None:
    (root / "a.txt").write_text("one\nhit two\nhit three\nfour\nfive\n")
    first, second = backend.grep("hit", context_lines=1).matches
    assert first["context_before"] == [{"line": 1, "text": "one"}]
    assert first["context_after"] == []  # line 3 is a match itself
    assert second["context_before"] == []
    assert second["context_after"] == [{"line": 4, "text": "four"}]
    assert "context_before" not in backend.grep("hit").matches[0]


def test_symlinks_are_not_followed_and_links_out_are_never_searched(
    backend: FilesystemBackend, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle SECRET\n")
    (root / "out-dir").symlink_to(outside, target_is_directory=True)
    (root / "out-file").symlink_to(outside / "secret.txt")
    (root / "real.txt").write_text("needle\n")
    (root / "alias.txt").symlink_to("real.txt")
    result = backend.grep("needle")
    assert found(result) == [("/real.txt", 1)]  # each file once, at its own path
    assert backend.grep("needle", "/out-dir").error == BackendError(
        ErrorKind.OUTSIDE_ROOT, "/out-dir"
    )
    assert found(backend.grep("needle", "/alias.txt")) == [("/alias.txt", 1)]


def test_odd_file_names(backend: FilesystemBackend, root: Path) -> None:
    for name in ["-rf", "--files", "new\nline.txt", "sp ace.txt", ".fathom-0123456789abcdef.tmp"]:
        (root / name).write_text("needle\n")
    try:
        os.mkdir(os.path.join(os.fsencode(root), b"caf\xe9"))
        (root / os.fsdecode(b"caf\xe9") / "x.txt").write_text("needle\n")
    except OSError:
        pytest.skip("this filesystem refuses non-UTF-8 names")
    paths = [path for path, _ in found(backend.grep("needle"))]
    # The temporary file of a write in flight is never shown; names are escaped.
    assert paths == ["/--files", "/-rf", "/caf\\xe9/x.txt", "/new\nline.txt", "/sp ace.txt"]


def test_patterns_ripgrep_cannot_take_are_searched_in_python(
    backend: FilesystemBackend, root: Path
) -> None:
    # A NUL past the first 8 KiB: still a text file, and ripgrep cannot take the pattern.
    (root / "a.txt").write_bytes(b"plain\n" + b"\n" * 9000 + b"tail a\x00b\n")
    assert found(backend.grep("a\x00b")) == [("/a.txt", 9002)]
    assert backend.grep("plain\nline").matches == []
    assert backend.grep("\udcff").matches == []


# ------------------------------------------------------------------------------ one engine


@needs_rg
def test_ripgrep_honours_gitignore_in_the_searched_tree(root: Path) -> None:
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("needle\n")
    (root / "run.log").write_text("needle\n")
    (root / "src").mkdir()
    (root / "src" / ".ignore").write_text("gen.txt\n")
    (root / "src" / "gen.txt").write_text("needle\n")
    (root / "src" / "main.txt").write_text("needle\n")
    with_rg = FilesystemBackend(root, ripgrep=True)
    assert found(with_rg.grep("needle")) == [("/src/main.txt", 1)]
    # The Python search has no ignore files: it searches everything but `.git/`.
    everything = found(FilesystemBackend(root, ripgrep=False).grep("needle"))
    assert everything == [("/build/out.txt", 1), ("/run.log", 1), ("/src/gen.txt", 1),
                          ("/src/main.txt", 1)]


@needs_rg
def test_ripgrep_never_reads_an_ignore_file_above_the_root(tmp_path: Path, root: Path) -> None:
    (tmp_path / ".gitignore").write_text("root/\n*.txt\n")  # outside the root
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=False, capture_output=True)
    (root / "a.txt").write_text("needle\n")
    assert found(FilesystemBackend(root, ripgrep=True).grep("needle")) == [("/a.txt", 1)]


def test_ripgrep_can_be_turned_off_by_flag_or_environment(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert FilesystemBackend(root, ripgrep=False).ripgrep is None
    monkeypatch.setenv(NO_RIPGREP_ENV, "1")
    assert FilesystemBackend(root).ripgrep is None
    if HAS_RG:
        assert FilesystemBackend(root, ripgrep=True).ripgrep == shutil.which("rg")


def test_ripgrep_true_without_rg_is_refused_at_construction(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(root))  # no rg here
    with pytest.raises(ValueError, match="apt-get install ripgrep"):
        FilesystemBackend(root, ripgrep=True)
    assert FilesystemBackend(root).ripgrep is None  # the default falls back quietly


@needs_rg
def test_a_ripgrep_failure_falls_back_to_python(root: Path) -> None:
    (root / "a.txt").write_text("needle\n")
    (root / "fake-rg").write_text("#!/bin/sh\necho 'rg: broken' >&2\nexit 2\n")
    (root / "fake-rg").chmod(0o755)
    backend = FilesystemBackend(root, ripgrep=True)
    backend.ripgrep = str(root / "fake-rg")
    assert found(backend.grep("needle")) == [("/a.txt", 1)]  # ripgrep listed nothing
