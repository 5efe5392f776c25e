"""The slash commands about a thread's history and the project's memory: `/rewind`,
`/fork`, `/export`, `/init` and `/memory`.

- `/rewind` lists the thread's recorded turns; `/rewind N` puts the conversation and the
  files those turns changed back to before turn N (the `/undo` machinery, several turns
  at once). What is discarded stays reachable: the thread as it was is first copied to a
  new thread (listed by `/threads`, `/thread ID` goes there), and the files the undone
  turns left are saved under `.fathom/rewind/<that thread>/`.
- `/fork` copies the thread (every checkpoint, and its turn records so `/undo` and
  `/rewind` work there too) to a new thread and switches to it; the old one is unchanged.
- `/export [PATH]` writes the conversation as Markdown (default:
  `<project>/fathom-thread-<id>.md`).
- `/init [--force]` writes a starter `.fathom/AGENTS.md` (the project memory file the agent
  loads) from what the project holds, without a model call.
- `/memory` lists the memory files the agent loads; `/memory show NAME` prints one and
  `/memory edit NAME` opens it in `$EDITOR` (NAME: `project`, `user`, or its number).

Each handler takes the command's context (`fathom.cli.commands.CommandContext`, which
registers them) and the text after the name; it prints what it did, or why it did not,
and none raises for a person's mistake.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["export_markdown", "export_thread", "fork_thread", "init_memory", "memory",
           "rewind", "starter_agents_md"]


def _local(ctx: Any, command: str) -> bool:
    if getattr(ctx.session, "supports_local_ops", True):
        return True
    ctx.say(f"/{command} is not available when attached to a server")
    return False


def _first_line(text: str, width: int = 70) -> str:
    line = next((part for part in text.strip().splitlines() if part.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def _busy(ctx: Any, run: Any) -> Any:
    from fathom.runs import ThreadBusyError

    try:
        return run()
    except ThreadBusyError as error:
        ctx.say(str(error))
        return None


def _new_thread(ctx: Any, thread_id: str, title: str) -> str:
    """A new thread id in the index, titled `title`, with `thread_id`'s checkpoints and
    turn records copied to it."""
    from fathom.project.checkpoints import acopy_thread

    session = ctx.session
    new_id = session.threads.new_thread_id()

    async def copy(_agent: Any, checkpointer: Any) -> int:
        return await acopy_thread(checkpointer, thread_id, new_id)

    session.operate(thread_id, copy)
    session.journal.copy_turns(thread_id, new_id)
    session.threads.touch(new_id, first_message=title, model=session.setup.model_name,
                          project=session.setup.project_dir)
    return new_id


def _title(ctx: Any, thread_id: str) -> str:
    info = ctx.session.threads.get(thread_id)
    return info.title if info is not None else ""


# --------------------------------------------------------------------------- /fork


def fork_thread(ctx: Any, _arg: str) -> None:
    if not _local(ctx, "fork"):
        return
    source = ctx.thread_id
    if ctx.session.threads.get(source) is None:
        ctx.say("nothing to fork yet: this thread has no messages")
        return
    new_id = _busy(ctx, lambda: _new_thread(ctx, source, f"fork of {source}: "
                                            f"{_title(ctx, source)}"))
    if new_id is None:
        return
    ctx.thread_id = new_id
    ctx.say(f"forked thread {source} as {new_id}; now on {new_id} "
            f"(/thread {source} goes back: it is unchanged)")


# --------------------------------------------------------------------------- /rewind


def rewind(ctx: Any, arg: str) -> None:
    if not _local(ctx, "rewind"):
        return
    session = ctx.session
    turns = session.journal.turns(ctx.thread_id)
    if not turns:
        ctx.say("no recorded turns on this thread to rewind to")
        return
    if not arg:
        lines = ["turns of this thread (/rewind N goes back to before turn N):"]
        for number, turn in enumerate(turns, start=1):
            files = f" · {len(turn.files)} file(s)" if turn.files else ""
            lines.append(f"  {number:>3}  {_first_line(turn.message) or '(approval answer)'}"
                         f"{files}")
        ctx.say("\n".join(lines))
        return
    if not arg.isdigit() or not 1 <= int(arg) <= len(turns):
        ctx.say(f"/rewind N takes a turn number from 1 to {len(turns)}; /rewind lists them")
        return
    outcome = _busy(ctx, lambda: _rewind_to(ctx, turns, int(arg)))
    if outcome is not None:
        ctx.say(outcome)


def _rewind_to(ctx: Any, turns: list[Any], number: int) -> str:
    from fathom.project.build import build_backend
    from fathom.project.undo import restore_files

    session, thread_id = ctx.session, ctx.thread_id
    setup = session.setup
    undone = turns[number - 1:]
    target = undone[0]
    branch = _new_thread(ctx, thread_id, f"before /rewind {number} on {thread_id}: "
                         f"{_title(ctx, thread_id)}")
    saved_dir = session.db_path.parent / "rewind" / branch
    paths = list(dict.fromkeys(str(e["path"]) for turn in undone for e in turn.files))

    async def rewind(agent: Any, checkpointer: Any) -> tuple[list[str], list[str], list[str]]:
        backend = build_backend(setup.project_dir, setup.home, setup.sandbox)
        await _save_files(backend, paths, saved_dir)
        if target.start_checkpoint is None:  # back to before the thread's first turn
            await checkpointer.adelete_thread(thread_id)
        else:
            config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                       "checkpoint_id": target.start_checkpoint}}
            if await checkpointer.aget_tuple(config) is None:
                raise LookupError("the thread's checkpoint from before that turn is gone")
            await agent.aupdate_state(config, None, as_node="__copy__")
        changed: dict[str, str] = {}
        failed: list[str] = []
        for turn in reversed(undone):  # newest first: each puts back its pre-images
            report = await restore_files(backend, turn)
            changed.update({path: "restored" for path in report.restored})
            changed.update({path: "removed" for path in report.removed})
            failed.extend(report.failed)
        return ([p for p, how in changed.items() if how == "restored"],
                [p for p, how in changed.items() if how == "removed"], failed)

    try:
        restored, removed, failed = session.operate(thread_id, rewind)
    except LookupError as error:
        return f"cannot rewind: {error}"
    for turn in undone:
        session.journal.drop(turn)
    session.forget_run_state(thread_id)
    lines = [f"rewound to before turn {number} "
             f"(\"{_first_line(target.message, 50)}\"): {len(undone)} turn(s) undone"]
    if restored:
        lines.append("files restored: " + ", ".join(sorted(restored)))
    if removed:
        lines.append("files removed (those turns created them): " + ", ".join(sorted(removed)))
    if failed:
        lines.append("could not restore: " + "; ".join(failed))
    commands = [c for turn in undone for c in turn.commands]
    if commands:
        lines.append(f"not undone: what {len(commands)} shell command(s) changed on disk")
    where = f"; its files as they were: {saved_dir}" if paths else ""
    lines.append(f"the discarded branch is thread {branch} (/thread {branch}){where}")
    return "\n".join(lines)


async def _save_files(backend: Any, paths: list[str], folder: Path) -> None:
    """Keep each path's current bytes (or that it is absent) under `folder`."""
    if not paths:
        return
    folder.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []
    for number, (path, answer) in enumerate(
            zip(paths, await backend.adownload_files(paths), strict=True)):
        entry: dict[str, Any] = {"path": path, "existed": answer.error is None, "blob": None}
        if answer.error is None:
            entry["blob"] = f"{number}.bin"
            (folder / entry["blob"]).write_bytes(answer.content)
        manifest.append(entry)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")


# --------------------------------------------------------------------------- /export


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def export_markdown(messages: list[Any], *, thread_id: str, title: str = "") -> str:
    """The conversation as Markdown: each person's and assistant's message in full, tool
    calls and their results summarized on one line each."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    lines = [f"# fathom thread {thread_id}", ""]
    if title:
        lines += [f"_{title}_", ""]
    for message in messages:
        if isinstance(message, HumanMessage):
            lines += ["## User", "", message.text.strip(), ""]
        elif isinstance(message, AIMessage):
            lines += ["## Assistant", ""]
            if message.text.strip():
                lines += [message.text.strip(), ""]
            for call in message.tool_calls:
                args = json.dumps(call.get("args", {}), ensure_ascii=False)
                lines.append(f"- tool call `{call['name']}` {_clip(args, 160)}")
            if message.tool_calls:
                lines.append("")
        elif isinstance(message, ToolMessage):
            status = " (error)" if message.status == "error" else ""
            lines += [f"- result of `{message.name or 'tool'}`{status}: "
                      f"{_clip(str(message.text), 200)}", ""]
    return "\n".join(lines).rstrip() + "\n"


def export_thread(ctx: Any, arg: str) -> None:
    values = ctx.session.values(ctx.thread_id) if hasattr(ctx.session, "values") else {}
    messages = list((values or {}).get("messages", []))
    if not messages:
        ctx.say("nothing to export: this thread has no messages yet")
        return
    project = Path(ctx.session.setup.project_dir)
    path = Path(os.path.expanduser(arg)) if arg else Path(f"fathom-thread-{ctx.thread_id}.md")
    if not path.is_absolute():
        path = project / path
    text = export_markdown(messages, thread_id=ctx.thread_id, title=_title(ctx, ctx.thread_id))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        ctx.say(f"cannot write {path}: {error}")
        return
    ctx.say(f"wrote the transcript ({len(messages)} messages) to {path}")


# --------------------------------------------------------------------------- /init

_SKIPPED = {".git", ".fathom", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache",
            ".pytest_cache", ".ruff_cache", "dist", "build", ".tox", ".idea", ".vscode"}
_TARGET = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:(?!=)")


def _readme_heading(project: Path) -> str | None:
    for name in ("README.md", "README.rst", "README.txt", "README"):
        path = project / name
        if path.is_file():
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip() or None
    return None


def _make_targets(project: Path) -> list[str]:
    path = project / "Makefile"
    if not path.is_file():
        return []
    found: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _TARGET.match(line)
        if match and not match.group(1).startswith(".") and match.group(1) not in found:
            found.append(match.group(1))
    return found


def starter_agents_md(project: Path) -> str:
    """A starter `AGENTS.md` from the project itself: its name, the README's first heading,
    its top-level layout and its make targets. No model is asked."""
    heading = _readme_heading(project)
    entries = sorted(p for p in project.iterdir()
                     if p.name not in _SKIPPED and not p.name.startswith("."))
    lines = [f"# {project.name}", ""]
    if heading and heading != project.name:
        lines += [f"{heading} (from the README).", ""]
    lines += ["## Layout", ""]
    for entry in entries[:40]:
        lines.append(f"- `{entry.name}{'/' if entry.is_dir() else ''}`")
    if len(entries) > 40:
        lines.append(f"- … and {len(entries) - 40} more")
    if not entries:
        lines.append("- (empty so far)")
    targets = _make_targets(project)
    if targets:
        lines += ["", "## Commands", ""]
        lines += [f"- `make {target}`" for target in targets]
    lines += ["", "## Conventions", "",
              "- (Add what an agent should know here: how to test, style, what not to touch.)",
              ""]
    return "\n".join(lines)


def init_memory(ctx: Any, arg: str) -> None:
    if not _local(ctx, "init"):
        return
    force = arg.strip() == "--force"
    if arg.strip() and not force:
        ctx.say("/init takes no argument but --force (to overwrite an existing AGENTS.md)")
        return
    project = Path(ctx.session.setup.project_dir)
    path = project / ".fathom" / "AGENTS.md"
    if path.exists() and not force:
        ctx.say(f"{path} exists already; /init --force replaces it (/memory edit project "
                "edits it)")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(starter_agents_md(project), encoding="utf-8")
    ctx.say(f"wrote {path}: the agent reads it as its project memory from the next turn on")


# --------------------------------------------------------------------------- /memory


def _memory_files(ctx: Any) -> list[tuple[str, Path]]:
    """(name, path) of each memory file the agent loads: the user's, then the project's."""
    setup = ctx.session.setup
    user = Path(setup.home) / ".fathom" / "AGENTS.md"
    project = Path(setup.project_dir) / ".fathom" / "AGENTS.md"
    if user.parent.resolve() == project.parent.resolve():
        return [("project", project)]
    return [("user", user), ("project", project)]


def memory(ctx: Any, arg: str) -> None:
    if not _local(ctx, "memory"):
        return
    files = _memory_files(ctx)
    action, _, name = arg.partition(" ")
    if not action:
        lines = ["memory files the agent loads at the start of each turn:"]
        for number, (label, path) in enumerate(files, start=1):
            state = (f"{path.stat().st_size} bytes" if path.is_file() else "not created yet")
            lines.append(f"  {number}  {label:<8} {path} ({state})")
        lines.append("/memory show NAME prints one, /memory edit NAME opens it in $EDITOR "
                     "(NAME: user, project or its number)")
        ctx.say("\n".join(lines))
        return
    if action not in ("show", "edit"):
        ctx.say("/memory takes show NAME or edit NAME (no argument: the list)")
        return
    name = name.strip() or "project"
    chosen = [path for number, (label, path) in enumerate(files, start=1)
              if name in (label, str(number))]
    if not chosen:
        ctx.say(f"no memory file called {name!r}; /memory lists them")
        return
    path = chosen[0]
    if action == "show":
        ctx.say(path.read_text(encoding="utf-8", errors="replace") if path.is_file()
                else f"{path} is not created yet (/memory edit {name} or /init starts it)")
        return
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        ctx.say(f"set $EDITOR to edit {path} here (e.g. export EDITOR=nano)")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    before = path.read_bytes() if path.is_file() else None
    subprocess.run([*shlex.split(editor), str(path)], check=False)
    after = path.read_bytes() if path.is_file() else None
    ctx.say(f"{path}: {'saved' if after != before else 'unchanged'}"
            + (" (the agent reads it from the next turn on)" if after != before else ""))
