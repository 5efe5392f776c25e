"""A custom backend: the agent's files are rows of a SQL table (SQLite here).

Deep Agents tutorial, section 7.5 (使用虚拟化文件系统 / a virtual filesystem): a backend for a
remote or database filesystem implements `BackendProtocol` (`ls`, `read`, `grep`, `glob`,
`write`, `edit`) over its own storage. The tutorial outlines it for S3 and for Postgres with
a table `files(path text primary key, content text, created_at timestamptz, modified_at
timestamptz)` and `ls` as `WHERE path LIKE $1 || '%'`. Writes are create-only and return
`files_update=None` (the files live in the database, not in the graph state), edits respect
uniqueness unless `replace_all` and report the occurrences, and every problem comes back as a
result with `error` set, never as an exception.

Ported to fathom: the import changes (`deepagents.backends.protocol` →
`fathom.backends.protocol`) and the Postgres outline is written out for `sqlite3` from the
standard library, so it runs anywhere. The hosted model becomes a `ScriptedModel` that
writes, edits, lists, globs, greps and reads. The agent runs with `invoke` and with
`ainvoke`: the class writes only the sync methods and inherits the async ones from
`BackendProtocol`.

Run: `.venv/bin/python examples/custom_backend.py`
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

from langchain_core.messages import AIMessage, ToolCall

from fathom import create_deep_agent
from fathom.backends._globbing import GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_path
from fathom.backends.protocol import (
    BackendProtocol,
    EditResult,
    FileInfo,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from fathom.backends.utils import apply_edit, create_file_data, grep_lines, now_iso
from fathom.state import FileData
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path text PRIMARY KEY,
    content text,
    created_at text,
    modified_at text
)
"""


def _like_prefix(directory: str) -> str:
    """`directory` with LIKE's wildcards escaped (used with `ESCAPE '\\'`)."""
    return directory.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class SQLiteBackend(BackendProtocol):
    """Files as rows of `files(path, content, created_at, modified_at)`."""

    def __init__(self, database: str = ":memory:"):
        self.conn = sqlite3.connect(database, check_same_thread=False)
        self.conn.execute(SCHEMA)
        self.lock = threading.Lock()  # tools may run in worker threads

    def _rows_under(self, directory: str) -> list[tuple[str, str, str]]:
        """(path, content, modified_at) of every file under `directory`, by path."""
        with self.lock:
            return self.conn.execute(
                "SELECT path, content, modified_at FROM files "
                "WHERE path LIKE ? || '%' ESCAPE '\\' ORDER BY path",
                (_like_prefix(directory),),
            ).fetchall()

    def ls(self, path: str) -> LsResult:
        # List rows under path; build FileInfo entries (path, size, modified_at)
        try:
            directory = normalize_dir(path)
        except PathError as error:
            return LsResult(error=str(error))
        entries: dict[str, FileInfo] = {}
        for file_path, content, modified_at in self._rows_under(directory):
            rest = file_path[len(directory) :]
            if "/" in rest:
                sub = directory + rest.split("/", 1)[0] + "/"
                entries.setdefault(sub, FileInfo(path=sub, is_dir=True))
            else:
                size = len(content.encode("utf-8"))
                entries[file_path] = FileInfo(
                    path=file_path, is_dir=False, size=size, modified_at=modified_at
                )
        if not entries and directory != "/":
            return LsResult(error=f"Error: directory '{directory.rstrip('/')}' not found.")
        return LsResult(entries=[entries[key] for key in sorted(entries)])

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        # Fetch the row; return ReadResult(file_data=...) or ReadResult(error=...)
        try:
            path = normalize_path(file_path)
        except PathError as error:
            return ReadResult(error=str(error))
        with self.lock:
            row = self.conn.execute(
                "SELECT content, created_at, modified_at FROM files WHERE path = ?", (path,)
            ).fetchone()
        if row is None:
            return ReadResult(error=f"Error: File '{path}' not found")
        content, created_at, modified_at = row
        return ReadResult(
            file_data=FileData(
                content=content, encoding="utf-8", created_at=created_at, modified_at=modified_at
            )
        )

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None) -> GrepResult:
        # Fetch candidate rows under path (filtered by glob), then scan them line by line
        try:
            directory = normalize_dir(path)
            if glob:
                glob_matches(glob, "x")  # an invalid pattern is an error even with no rows
            candidates = [
                (file_path, content)
                for file_path, content, _ in self._rows_under(directory)
                if not glob or glob_matches(glob, file_path[len(directory) :])
            ]
        except (PathError, GlobError) as error:
            return GrepResult(error=str(error))
        return GrepResult(matches=[m for p, c in candidates for m in grep_lines(p, c, pattern)])

    def glob(self, pattern: str, path: str = "/") -> GlobResult:
        # Fetch the rows under path, apply the glob relative to path in Python
        try:
            directory = normalize_dir(path)
            glob_matches(pattern, "x")  # an invalid pattern is an error even with no rows
            matches = [
                FileInfo(path=p, is_dir=False, size=len(c.encode("utf-8")), modified_at=m)
                for p, c, m in self._rows_under(directory)
                if glob_matches(pattern, p[len(directory) :])
            ]
        except (PathError, GlobError) as error:
            return GlobResult(error=str(error))
        return GlobResult(matches=matches)

    def write(self, file_path: str, content: str) -> WriteResult:
        # Enforce create-only semantics; return WriteResult(path=file_path, files_update=None)
        try:
            path = normalize_path(file_path)
        except PathError as error:
            return WriteResult(error=str(error))
        data = create_file_data(content)
        try:
            with self.lock, self.conn:
                self.conn.execute(
                    "INSERT INTO files (path, content, created_at, modified_at) "
                    "VALUES (?, ?, ?, ?)",
                    (path, content, data.get("created_at"), data.get("modified_at")),
                )
        except sqlite3.IntegrityError:
            return WriteResult(
                error=f"Error: '{path}' already exists. Use edit_file to change it."
            )
        return WriteResult(path=path, files_update=None)

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        # Read → replace (respect uniqueness vs replace_all) → write → return occurrences
        read = self.read(file_path)
        if read.error or read.file_data is None:
            return EditResult(error=read.error)
        path = normalize_path(file_path)
        outcome = apply_edit(path, read.file_data["content"], old_string, new_string, replace_all)
        if isinstance(outcome, EditResult):
            return outcome
        new_text, occurrences = outcome
        with self.lock, self.conn:
            self.conn.execute(
                "UPDATE files SET content = ?, modified_at = ? WHERE path = ?",
                (new_text, now_iso(), path),
            )
        return EditResult(path=path, files_update=None, occurrences=occurrences)


def write(path: str, content: str) -> ToolCall:
    return tool_call("write_file", {"file_path": path, "content": content})


def edit(path: str, old: str, new: str, replace_all: bool = False) -> ToolCall:
    args = {"file_path": path, "old_string": old, "new_string": new, "replace_all": replace_all}
    return tool_call("edit_file", args)


PLANS: dict[str, list[ToolCall]] = {
    "Set up the docs.": [
        write("/docs/guide.md", "# Guide (draft)\nStatus: draft\nOwner: TBD\n"),
        write("/docs/api/index.md", "# API\nStatus: draft\n"),
        write("/docs/guide.md", "again"),  # create-only: refused
        edit("/docs/guide.md", "Owner: TBD", "Owner: Ana"),
        edit("/docs/guide.md", "draft", "final"),  # two occurrences: refused
        edit("/docs/guide.md", "draft", "final", replace_all=True),
        tool_call("ls", {"path": "/docs"}),
        tool_call("glob", {"pattern": "**/*.md"}),
        tool_call("grep", {"pattern": "Status: draft", "output_mode": "content"}),
        tool_call("read_file", {"file_path": "/docs/guide.md"}),
        tool_call("read_file", {"file_path": "/docs/missing.md"}),
    ],
    "Add the changelog.": [
        write("/docs/changelog.md", "v1: first release\n"),
        tool_call("glob", {"pattern": "*.md", "path": "/docs"}),
    ],
}


def plan_policy(request: ScriptRequest) -> AIMessage:
    """Make the calls the request needs, one after another, then say how many failed."""
    plan = PLANS[request.last_human_text]
    done = request.turn_results
    if len(done) < len(plan):
        return ai("", plan[len(done)])
    failed = sum(m.status == "error" for m in done)
    return ai(f"Done: {len(done)} tool calls, {failed} refused.")


def model() -> ScriptedModel:
    return ScriptedModel(policy=plan_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def show(state: dict[str, Any]) -> None:
    for result in ScriptRequest(state["messages"], [], 0).turn_results:
        status = "error" if result.status == "error" else "ok"
        shown = " | ".join(line.strip() for line in str(result.content).splitlines())
        print(f"  {result.name} -> {status}: {shown.replace(chr(9), ' ')}")
    print(f"  {state['messages'][-1].content}")


def main() -> dict[str, Any]:
    backend = SQLiteBackend()
    agent = create_deep_agent(model=model(), backend=backend)

    print("invoke:")
    state = agent.invoke({"messages": [{"role": "user", "content": "Set up the docs."}]})
    show(state)
    print("ainvoke:")
    message = {"messages": [{"role": "user", "content": "Add the changelog."}]}
    async_state = asyncio.run(agent.ainvoke(message))
    show(async_state)

    with backend.lock:
        rows = dict(backend.conn.execute("SELECT path, content FROM files ORDER BY path"))
    print(f"rows in the files table: {sorted(rows)}")
    print(f"files in the graph state: {sorted(state.get('files', {}))}")
    return {"state": state, "async_state": async_state, "rows": rows}


if __name__ == "__main__":
    main()
