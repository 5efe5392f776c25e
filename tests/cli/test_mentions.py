"""`@path` mentions (`fathom.cli.mentions`): which files attach, what the model gets, and
what completion offers, on real files in a temporary project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fathom.cli.mentions import MentionError, attach_mentions, mention_candidates, mentions


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n", encoding="utf-8")
    (root / "notes.txt").write_text("the tide turns at four\n", encoding="utf-8")
    (root / "notebook.md").write_text("# log\n", encoding="utf-8")
    (root / ".env.example").write_text("KEY=\n", encoding="utf-8")
    for hidden in (".git", ".fathom"):
        (root / hidden).mkdir()
        (root / hidden / "config").write_text("x", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside\n", encoding="utf-8")
    return root


def test_a_mention_attaches_the_file_after_the_message(project: Path) -> None:
    attached = attach_mentions("summarize @notes.txt, please", project)
    assert attached.message == (
        "summarize @notes.txt, please\n\n"
        '<file path="notes.txt">\nthe tide turns at four\n\n</file>'
    )
    assert attached.notes == ["attached notes.txt (23 characters)"]


def test_a_message_without_mentions_is_unchanged(project: Path) -> None:
    assert attach_mentions("mail me at a@b.com", project).message == "mail me at a@b.com"
    assert mentions("mail me at a@b.com") == []


def test_each_file_is_attached_once_in_order(project: Path) -> None:
    attached = attach_mentions("@src/app.py and @notes.txt and @src/app.py", project)
    assert attached.message.count('<file path="src/app.py">') == 1
    assert attached.message.index("src/app.py\">") < attached.message.index("notes.txt\">")


def test_a_long_file_is_cut_and_both_sides_are_told(project: Path) -> None:
    (project / "big.txt").write_text("x" * 120, encoding="utf-8")
    attached = attach_mentions("@big.txt", project, limit=100)
    assert '<file path="big.txt" note="cut to the first 100 of 120 characters">' in (
        attached.message)
    assert "x" * 101 not in attached.message
    assert attached.notes == ["attached big.txt (cut to the first 100 of 120 characters)"]


@pytest.mark.parametrize(("text", "error"), [
    ("read @nowhere.txt", "@nowhere.txt: no such file in the project"),
    ("read @src", "@src is a folder"),
    ("read @../secret.txt", "@../secret.txt is outside the project"),
    ("read @/etc/hostname", "@/etc/hostname is outside the project"),
])
def test_a_mention_of_no_project_file_is_an_error(project: Path, text: str, error: str) -> None:
    with pytest.raises(MentionError, match=error.replace(".", r"\.")):
        attach_mentions(text, project)


def test_a_link_out_of_the_project_is_refused(project: Path) -> None:
    os.symlink(project.parent / "secret.txt", project / "link.txt")
    with pytest.raises(MentionError, match="outside the project"):
        attach_mentions("@link.txt", project)
    assert "link.txt" not in mention_candidates(project, "li")


def test_a_binary_file_is_refused(project: Path) -> None:
    (project / "image.png").write_bytes(b"\x89PNG\0\0\0")
    with pytest.raises(MentionError, match="not a text file"):
        attach_mentions("@image.png", project)


def test_completion_lists_one_level_and_hides_git_and_fathom(project: Path) -> None:
    assert mention_candidates(project, "no") == ["notebook.md", "notes.txt"]
    assert mention_candidates(project, "") == ["notebook.md", "notes.txt", "src/"]
    assert mention_candidates(project, "src/") == ["src/app.py", "src/pkg/"]
    assert mention_candidates(project, ".") == [".env.example"]  # hidden, but not .git
    assert mention_candidates(project, ".git/") == []
    assert mention_candidates(project, "../") == []
