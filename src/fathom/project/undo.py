"""The file side of `/undo`: what each turn changed on disk, and putting it back.

Every turn of a `Session` gets a record under `.fathom/undo/<thread>/<turn>/`: the
checkpoint the thread was at before the turn, the message that started it, and, before the
turn's first change to a file, that file's pre-image (its bytes, or that it did not exist).
`JournaledBackend` is the command's `CompositeBackend` with that hook on every write, edit,
delete and upload, so file changes of the main agent and of its subagents are all seen.

What it cannot see: files changed by `execute` commands (the shell writes behind the
backend's back) and by tools that do not go through the backend (MCP servers). The record
keeps the commands a turn ran, so `/undo` can say what it could not restore. Files kept in
the thread's state (the harness's routes) need none of this: the checkpoint restores them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fathom.backends import CompositeBackend, StateBackend
from fathom.backends.protocol import Plan

__all__ = ["FileJournal", "JournaledBackend", "RestoreReport", "TurnRecord", "restore_files"]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass
class TurnRecord:
    """One recorded turn: where the thread was before it and the pre-images it took."""

    folder: Path
    message: str
    start_checkpoint: str | None
    files: list[dict[str, Any]] = field(default_factory=list)
    """`{"path", "existed", "blob"}` per changed file, in the order first changed."""
    commands: list[str] = field(default_factory=list)

    def save(self) -> None:
        data = {"message": self.message, "start_checkpoint": self.start_checkpoint,
                "files": self.files, "commands": self.commands}
        (self.folder / MANIFEST).write_text(json.dumps(data, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> TurnRecord | None:
        try:
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cls(folder=folder, message=str(data.get("message", "")),
                   start_checkpoint=data.get("start_checkpoint"),
                   files=list(data.get("files", [])), commands=list(data.get("commands", [])))


def _thread_folder_name(thread_id: str) -> str:
    if _SAFE_NAME.fullmatch(thread_id) and thread_id not in (".", ".."):
        return thread_id
    return "t-" + hashlib.sha256(thread_id.encode()).hexdigest()[:16]


class FileJournal:
    """The turn records of one threads database, and the turn being recorded now.

    A session runs one turn at a time, so one active turn is enough; backends built for
    that turn call `record_before_change` / `note_command` while it runs. A turn's tool
    calls run at the same time (in threads on the sync path), so recording is locked: two
    first changes at once must not both take the same blob name.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._active: TurnRecord | None = None
        self._lock = threading.Lock()

    def _thread_dir(self, thread_id: str) -> Path:
        return self.root / _thread_folder_name(thread_id)

    def turns(self, thread_id: str) -> list[TurnRecord]:
        """The thread's recorded turns, oldest first."""
        folder = self._thread_dir(thread_id)
        if not folder.is_dir():
            return []
        numbered = sorted((int(p.name), p) for p in folder.iterdir() if p.name.isdigit())
        return [r for _, p in numbered if (r := TurnRecord.load(p)) is not None]

    def begin_turn(self, thread_id: str, message: str, start_checkpoint: str | None) -> None:
        """Start recording a new turn of `thread_id` that begins at `start_checkpoint`.

        A folder that cannot be written leaves the turn unrecorded (it cannot be undone)
        rather than failing it.
        """
        folder = self._thread_dir(thread_id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            numbers = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
            turn = folder / f"{max(numbers, default=0) + 1:06d}"
            turn.mkdir()
            self._active = TurnRecord(turn, message, start_checkpoint)
            self._active.save()
        except OSError as error:
            logger.warning("cannot record the turn for /undo in %s: %s", folder, error)
            self._active = None

    def continue_turn(self, thread_id: str) -> bool:
        """Record into the thread's latest turn (answering its approvals); False if none."""
        turns = self.turns(thread_id)
        self._active = turns[-1] if turns else None
        return self._active is not None

    def end_turn(self) -> None:
        self._active = None

    def copy_turns(self, source: str, target: str) -> None:
        """Give thread `target` copies of `source`'s turn records (a fork: its checkpoints
        are copies with the same ids, so its turns can be undone and rewound too)."""
        folder = self._thread_dir(source)
        if folder.is_dir():
            shutil.copytree(folder, self._thread_dir(target), dirs_exist_ok=True)

    def drop(self, turn: TurnRecord) -> None:
        """Forget an undone turn and its pre-images."""
        shutil.rmtree(turn.folder, ignore_errors=True)

    def wants(self, path: str) -> bool:
        """Whether the active turn still needs the pre-image of `path`."""
        turn = self._active
        return turn is not None and all(entry["path"] != path for entry in turn.files)

    def record(self, path: str, content: bytes | None) -> None:
        """Keep `content` (None: the file did not exist) as `path`'s pre-image."""
        with self._lock:
            turn = self._active
            if turn is None or not self.wants(path):
                return
            entry: dict[str, Any] = {"path": path, "existed": content is not None, "blob": None}
            try:
                if content is not None:
                    entry["blob"] = f"{len(turn.files)}.bin"
                    (turn.folder / entry["blob"]).write_bytes(content)
                turn.files.append(entry)
                turn.save()
            except OSError as error:  # the change goes ahead; /undo will not know the file
                logger.warning("cannot keep the pre-image of %s for /undo: %s", path, error)

    def note_command(self, command: str) -> None:
        with self._lock:
            turn = self._active
            if turn is not None:
                turn.commands.append(command)
                with contextlib.suppress(OSError):
                    turn.save()


def _present(response: Any) -> bytes | None:
    """The downloaded bytes, or None when the file is not there."""
    return response.content if response.error is None else None


class JournaledBackend(CompositeBackend):
    """A `CompositeBackend` that keeps each file's pre-image in a `FileJournal` before a
    turn first changes it. Paths in state-backed routes are left to the checkpoints.

    The hook is written once per operation, on the composite's plans, so the sync and the
    async methods both keep the journal."""

    journal: FileJournal

    def __init__(self, journal: FileJournal, default: Any, routes: Any) -> None:
        super().__init__(default, routes)
        self.journal = journal

    def bind(self, runtime: Any) -> JournaledBackend:
        bound = super().bind(runtime)
        bound.journal = self.journal
        return bound

    def _candidates(self, path: str) -> list[str]:
        """The real paths a change of `path` would touch that still need a pre-image."""
        resolved = self.resolved_path(path)
        if resolved is None:
            return []
        for prefix, child in self.routes.items():
            if (resolved if resolved.endswith("/") else resolved + "/").startswith(prefix):
                if isinstance(child, StateBackend):
                    return []
                break
        return [resolved] if self.journal.wants(resolved) else []

    def _below(self, path: str) -> Plan[list[str]]:
        """The files under directory `path` (a delete may remove a whole folder)."""
        found = yield from self._glob("**/*", path)
        return [m["path"] for m in found.matches or [] if not m.get("is_dir")]

    def _record(self, paths: list[str], *, directory_ok: bool = False) -> Plan[None]:
        wanted = [p for path in paths for p in self._candidates(path)]
        if not wanted:
            return
        answers = yield from self._download_files(wanted)
        for path, answer in zip(wanted, answers, strict=True):
            if answer.error == "is_directory" and directory_ok:
                yield from self._record((yield from self._below(path)))
            elif answer.error in (None, "file_not_found"):
                self.journal.record(path, _present(answer))

    def _write(self, file_path: str, content: str) -> Plan[Any]:
        yield from self._record([file_path])
        return (yield from super()._write(file_path, content))

    def _edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> Plan[Any]:
        yield from self._record([file_path])
        return (yield from super()._edit(file_path, old_string, new_string, replace_all))

    def _delete(self, file_path: str) -> Plan[Any]:
        yield from self._record([file_path], directory_ok=True)
        return (yield from super()._delete(file_path))

    def _upload_files(self, files: list[tuple[str, bytes]]) -> Plan[Any]:
        yield from self._record([path for path, _ in files])
        return (yield from super()._upload_files(files))

    def _execute(self, command: str, timeout: int | None) -> Plan[Any]:
        self.journal.note_command(command)
        return (yield from super()._execute(command, timeout))


@dataclass
class RestoreReport:
    """What putting a turn's files back did."""

    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    """"path: why" for each file that could not be put back."""


async def restore_files(backend: Any, turn: TurnRecord) -> RestoreReport:
    """Put every file `turn` changed back as it was before the turn, through `backend`.

    A file that did not exist is deleted; one that already holds its pre-image is left
    alone (and not listed).
    """
    report = RestoreReport()
    for entry in turn.files:
        path = str(entry["path"])
        [now] = await backend.adownload_files([path])
        current = _present(now)
        if entry["existed"]:
            try:
                before = (turn.folder / str(entry["blob"])).read_bytes()
            except OSError as error:
                report.failed.append(f"{path}: its saved copy is gone ({error})")
                continue
            if current == before:
                continue
            [answer] = await backend.aupload_files([(path, before)])
            if answer.error:
                report.failed.append(f"{path}: {answer.error}")
            else:
                report.restored.append(path)
        elif current is not None or now.error == "is_directory":
            result = await backend.adelete(path)
            if result.error:
                report.failed.append(f"{path}: {result.error}")
            else:
                report.removed.append(path)
    return report
