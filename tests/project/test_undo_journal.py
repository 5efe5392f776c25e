"""`/undo`'s file journal when one turn changes many files at once.

The tool calls of one model turn run at the same time (on the sync path, in threads), so
the journal records several first changes concurrently: each must keep its own pre-image
and the turn's manifest must stay readable, whatever order the calls run in.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from fathom import create_deep_agent
from fathom.backends import FilesystemBackend
from fathom.project.undo import FileJournal, JournaledBackend, restore_files
from fathom.testing import ScriptedModel, ai, tool_call

FILES = 16


def _original(i: int) -> str:
    return f"original {i}\n" * 100


def test_parallel_first_changes_each_keep_their_pre_image(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for i in range(FILES):
        (project / f"f{i}.txt").write_text(_original(i), encoding="utf-8")
    journal = FileJournal(tmp_path / "undo")
    journal.begin_turn("t", "change them all", None)
    backend = JournaledBackend(journal, FilesystemBackend(root_dir=project, virtual_mode=True),
                               {})  # fmt: skip
    edits = [tool_call("edit_file", {"file_path": f"/f{i}.txt", "old_string": _original(i),
                                     "new_string": f"changed {i}\n"}) for i in range(FILES)]
    model = ScriptedModel(replies=[ai("", *edits), ai("done")])
    create_deep_agent(model, backend=backend).invoke(
        {"messages": [{"role": "user", "content": "change them all"}]})
    journal.end_turn()
    assert all((project / f"f{i}.txt").read_text(encoding="utf-8") == f"changed {i}\n"
               for i in range(FILES))

    (turn,) = journal.turns("t")  # the manifest was written whole
    assert sorted(entry["path"] for entry in turn.files) == sorted(
        f"/f{i}.txt" for i in range(FILES))
    assert len({entry["blob"] for entry in turn.files}) == FILES  # one pre-image each
    report = asyncio.run(restore_files(backend, turn))
    assert sorted(report.restored) == sorted(f"/f{i}.txt" for i in range(FILES))
    assert [(project / f"f{i}.txt").read_text(encoding="utf-8") for i in range(FILES)] == [
        _original(i) for i in range(FILES)]
