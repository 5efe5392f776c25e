"""The slash commands that look at and change what the session's agent is made of:
`/skills`, `/agents`, `/tasks`, `/budget` and `/permissions`.

The command rebuilds its agent from `session.setup` at every turn (and for every
operation on a thread), so a change to the setup takes effect from the next turn on,
without restarting:

- `/skills reload` and `/agents reload` read the project's skill folders and
  `agents/*.md` definitions again (`fathom.project.config.project_sources`). A skill's
  `SKILL.md` is read again at the start of every run anyway; reloading finds new skill
  folders and new or edited subagent definitions. A definition that cannot be used is
  refused and the agents the session had are kept.
- `/budget tokens=N usd=X` replaces caps of the `[budget]` table for this session
  (spend is per thread: a raised cap lets a stopped thread go on).
- `/permissions allow TOOL` and `/permissions ask TOOL` change which calls wait for an
  approval, for this session; with `--save` the lists are written to the project's
  `fathom.toml` too (its top-level `auto_approve` and `interrupt_on`).
- `/tasks check ID` and `/tasks cancel ID` read and cancel this thread's async subagent
  tasks on the server they run on (`$FATHOM_SERVER`, else fathom serve's default).

Every handler prints what it did or why it could not; none raises for a bad argument.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "agents_command",
    "budget_command",
    "parse_budget_args",
    "permissions_command",
    "skills_command",
    "tasks_command",
    "write_tool_lists",
]

_GENERAL_PURPOSE = "general-purpose"


class CommandContext(Protocol):
    """What a handler uses of `fathom.cli.commands.CommandContext` (not imported: that
    module registers these handlers)."""

    session: Any
    thread_id: str

    def say(self, text: str) -> None: ...


def _local(ctx: CommandContext, command: str) -> bool:
    """Whether the session has its agent here; says why not when it has not."""
    if getattr(ctx.session, "supports_local_ops", True) and hasattr(ctx.session.setup, "sources"):
        return True
    ctx.say(f"/{command} is not available when attached to a server: the agent is built there")
    return False


# --------------------------------------------------------------------------- reloading


def _reload(ctx: CommandContext) -> str:
    """Read the project's sources again into the session's setup; what changed."""
    from fathom.project.build import subagent_specs
    from fathom.project.config import ConfigError, project_sources

    setup = ctx.session.setup
    old = setup.sources
    try:
        sources = project_sources(setup.project_dir, setup.home)
        subagent_specs(dataclasses.replace(setup, sources=sources))  # a bad definition fails now
    except ConfigError as error:
        return f"not reloaded: {error}\n(the session keeps the skills and agents it had)"
    setup.sources = sources
    lines = ["reloaded skills and agents; the next turn uses them"]
    for what, before, after in (
        ("skills", _skill_names(old.skills), _skill_names(sources.skills)),
        ("agents", [str(a["name"]) for a in old.subagents],
         [str(a["name"]) for a in sources.subagents]),
    ):
        added = sorted(set(after) - set(before))
        removed = sorted(set(before) - set(after))
        changes = ([f"added {', '.join(added)}"] if added else []) + (
            [f"removed {', '.join(removed)}"] if removed else [])
        lines.append(f"{what}: {len(after)}" + (f" ({'; '.join(changes)})" if changes else ""))
    return "\n".join(lines)


# --------------------------------------------------------------------------- /skills


def _skills(folders: Sequence[Path]) -> dict[str, tuple[Path, dict[str, Any] | None, list[str]]]:
    """Each skill of the folders (later folders win): its SKILL.md, its catalogue entry
    (`None` when the agent skips it) and the problems found."""
    from fathom.middleware.skills import parse_skill

    found: dict[str, tuple[Path, dict[str, Any] | None, list[str]]] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for skill_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
            path = skill_dir / "SKILL.md"
            if not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                found[skill_dir.name] = (path, None, [f"cannot read {path}: {error}"])
                continue
            entry, problems = parse_skill(text, path=str(path), source=str(folder),
                                          directory_name=skill_dir.name)
            found[skill_dir.name] = (path, dict(entry) if entry else None, problems)
    return found


def _skill_names(folders: Sequence[Path]) -> list[str]:
    return [name for name, (_, entry, _) in _skills(folders).items() if entry is not None]


def _one_line(text: str, width: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _answered_first(ctx: CommandContext, command: str, arg: str) -> bool:
    """What `/skills` and `/agents` answer before reading anything: that the command is the
    local session's only, or (`reload`) the definitions read again."""
    if not _local(ctx, command):
        return True
    if arg == "reload":
        ctx.say(_reload(ctx))
        return True
    return False


def skills_command(ctx: CommandContext, arg: str) -> None:
    """`/skills`: the project's skills; `/skills NAME`: one SKILL.md; `/skills reload`."""
    if _answered_first(ctx, "skills", arg):
        return
    setup = ctx.session.setup
    skills = _skills(setup.sources.skills)
    folders = " and ".join(str(f) for f in setup.sources.skills)
    if not arg:
        if not skills:
            where = folders or f"{setup.project_dir / '.fathom' / 'skills'} (or ~/.fathom/skills)"
            ctx.say(f"no skills: a skill is a folder with a SKILL.md under {where}; "
                    "/skills reload finds new ones")
            return
        width = max(len(name) for name in skills)
        lines = [f"skills ({folders}):"]
        for name, (_, entry, problems) in skills.items():
            said = (_one_line(entry["description"]) if entry is not None
                    else "SKIPPED: " + _one_line("; ".join(problems)))
            lines.append(f"  {name:<{width}}  {said}")
        lines.append("/skills NAME shows one; /skills reload reads the folders again")
        ctx.say("\n".join(lines))
        return
    if arg not in skills:
        known = ", ".join(skills) or "none"
        ctx.say(f"no skill {arg!r}; the skills are: {known}")
        return
    path, entry, problems = skills[arg]
    lines = [f"skill {arg} · {path}"]
    lines += [f"problem: {problem}" for problem in problems]
    if entry is None:
        lines.append("(the agent skips this skill until that is fixed)")
    try:
        lines += ["", path.read_text(encoding="utf-8").rstrip()]
    except (OSError, UnicodeDecodeError) as error:
        lines.append(f"cannot read it: {error}")
    ctx.say("\n".join(lines))


# --------------------------------------------------------------------------- /agents


def agents_command(ctx: CommandContext, arg: str) -> None:
    """`/agents`: the subagents `task` can start; `/agents NAME`: one; `/agents reload`."""
    if _answered_first(ctx, "agents", arg):
        return
    setup = ctx.session.setup
    agents = {str(a["name"]): a for a in setup.sources.subagents}
    if not arg:
        names = [*agents, *([] if _GENERAL_PURPOSE in agents else [_GENERAL_PURPOSE])]
        width = max(len(name) for name in names)
        lines = ["subagents (the task tool starts them; defined in ~/.fathom/agents/ and "
                 ".fathom/agents/):"]
        for name, definition in agents.items():
            extra = []
            if "model" in definition:
                extra.append(str(definition["model"]))
            if "tools" in definition:
                extra.append("tools: " + ", ".join(definition["tools"]) if definition["tools"]
                             else "no tools")
            more = f" [{'; '.join(extra)}]" if extra else ""
            lines.append(f"  {name:<{width}}  {_one_line(definition['description'])}{more}")
        if _GENERAL_PURPOSE not in agents:
            lines.append(f"  {_GENERAL_PURPOSE:<{width}}  (built in) the main agent's tools, "
                         "for work in its own context")
        lines.append("/agents NAME shows one; /agents reload reads the definitions again")
        ctx.say("\n".join(lines))
        return
    if arg == _GENERAL_PURPOSE and arg not in agents:
        ctx.say(f"{_GENERAL_PURPOSE} is built in: it has the main agent's model and tools; "
                f"an agents/{_GENERAL_PURPOSE}.md definition replaces it")
        return
    if arg not in agents:
        ctx.say(f"no subagent {arg!r}; the subagents are: "
                f"{', '.join([*agents, _GENERAL_PURPOSE])}")
        return
    definition = agents[arg]
    lines = [f"subagent {arg}", f"description: {definition['description']}",
             f"model: {definition.get('model', setup.model_name + ' (the main agent’s)')}"]
    if "tools" in definition:
        lines.append("tools: " + (", ".join(definition["tools"]) or "(none)"))
    else:
        lines.append("tools: the main agent's")
    lines += ["", str(definition.get("system_prompt", "")).rstrip()]
    ctx.say("\n".join(lines))


# --------------------------------------------------------------------------- /tasks


def tasks_command(ctx: CommandContext, arg: str) -> None:
    """`/tasks`: this thread's async tasks with their live status; `/tasks check ID` (or
    `/tasks ID`): one child thread; `/tasks cancel ID`: cancel its run on the server."""
    from fathom.cli.tasks import (
        TaskLookupError,
        find_task,
        local_async_tasks,
        server_client,
        tasks_report,
    )

    db_path = getattr(ctx.session, "db_path", None)
    if db_path is None:
        ctx.say("/tasks is not available when attached to a server; "
                "`fathom tasks --thread ID --server URL` lists a thread's tasks there")
        return
    verb, _, ref = arg.partition(" ")
    ref = ref.strip()
    if verb not in ("check", "cancel"):
        verb, ref = ("check", arg) if arg else ("list", "")
    if verb in ("check", "cancel") and not ref:
        ctx.say(f"/tasks {verb} needs a task id (a unique prefix will do); /tasks lists them")
        return

    async def answer() -> str:
        tasks = await local_async_tasks(db_path, ctx.thread_id)
        if not tasks:
            return "no async tasks on this thread"
        client = server_client(None)
        if verb == "cancel":
            return await _cancel(client, find_task(tasks, ref))
        return await tasks_report(client, tasks, ref or None)

    try:
        ctx.say(asyncio.run(answer()))
    except TaskLookupError as error:
        ctx.say(str(error))


async def _cancel(client: Any, task: Mapping[str, Any]) -> str:
    """Cancel a task's newest run; a task that already ended, or waits for a person (and so
    runs nothing), is reported as it is."""
    from fathom.middleware.async_subagents.tasks import UNFINISHED, task_status
    from fathom.middleware.async_subagents.tools import observe
    from fathom.middleware.async_subagents.transport import REMOTE_ERRORS

    task_id = str(task["task_id"])
    record: Any = dict(task)
    try:
        run, thread = await observe(client, record)
        status = task_status(run, thread)
        if status == "waiting":
            return (f"task {task_id} is waiting for a person and runs nothing: there is no run "
                    "to cancel (/tasks check shows what it asks)")
        if status not in UNFINISHED:
            return f"task {task_id} had already ended ({status}); nothing to cancel"
        await client.runs.cancel(str(record.get("thread_id") or task_id), str(run["run_id"]))
    except REMOTE_ERRORS as error:
        from fathom.cli.tasks import _error_text

        return f"could not cancel task {task_id}: {_error_text(error)}; it may still be running"
    return (f"cancelled task {task_id} ({task.get('agent_name', '?')}): its run was stopped on "
            "the server; /tasks shows it as cancelled")


# --------------------------------------------------------------------------- /budget

_BUDGET_NAMES = {
    "tokens": "max_tokens", "usd": "max_usd", "calls": "max_model_calls",
    "model_calls": "max_model_calls", "time": "max_wall_s", "wall_s": "max_wall_s",
    "seconds": "max_wall_s",
}
_OFF = ("off", "none", "")


def parse_budget_args(text: str) -> dict[str, float | None]:
    """`tokens=N usd=X calls=N time=S` (or the `[budget]` names, `max_tokens=N`...) as caps;
    a cap given as `off` is `None` (removed).

    Raises:
        ValueError: an unknown name, or a value that is not a number.
    """
    from fathom.budget import CAPS

    caps: dict[str, float | None] = {}
    for word in text.split():
        name, sep, value = word.partition("=")
        cap = _BUDGET_NAMES.get(name, name)
        if not sep or cap not in CAPS:
            raise ValueError(f"{word!r}: give NAME=VALUE with NAME one of tokens, usd, calls, "
                             f"time (or {', '.join(CAPS)}), e.g. /budget tokens=200000 usd=2")
        if value.lower() in _OFF:
            caps[cap] = None
            continue
        try:
            number = float(value.replace("_", "").replace(",", "").lstrip("$"))
        except ValueError:
            raise ValueError(f"{word!r}: {value!r} is not a number") from None
        caps[cap] = int(number) if number.is_integer() and cap != "max_usd" else number
    return caps


def _caps_text(caps: Mapping[str, Any]) -> str:
    return ", ".join(f"{cap} = {value}" for cap, value in caps.items())


def budget_command(ctx: CommandContext, arg: str) -> None:
    """`/budget`: the caps and what this thread spent; `/budget tokens=N usd=X ...`: new caps
    from the next turn on (this session); `/budget off`: no caps."""
    if not _local(ctx, "budget"):
        return
    from fathom.budget import BUDGET_KEY, BudgetError, budget_summary
    from fathom.project.build import agent_budget
    from fathom.project.config import ConfigError

    setup = ctx.session.setup
    caps = dict(setup.config.budget)
    if not arg:
        spent = budget_summary(ctx.session.values(ctx.thread_id).get(BUDGET_KEY))
        if not caps:
            lines = ["no budget: runs have no caps. /budget tokens=200000 usd=2 sets caps "
                     "for this session; a [budget] table in fathom.toml (max_tokens, max_usd, "
                     "max_wall_s, max_model_calls) sets them for every session (docs/budgets.md)"]
            if spent:
                lines.append(f"{spent} (whole thread, from an earlier budget)")
            ctx.say("\n".join(lines))
            return
        lines = [f"budget caps: {_caps_text(caps)} (each thread's agent tree, all its runs)"]
        lines.append(f"{spent} (this thread)" if spent else
                     "nothing spent against it on this thread yet")
        lines.append("/budget tokens=N usd=X calls=N time=S changes them; NAME=off drops one; "
                     "/budget off drops all")
        ctx.say("\n".join(lines))
        return
    if arg.strip() in ("off", "none"):
        new: dict[str, Any] = {}
    else:
        try:
            changes = parse_budget_args(arg)
        except ValueError as error:
            ctx.say(f"budget unchanged: {error}")
            return
        new = {cap: value for cap, value in {**caps, **changes}.items() if value is not None}
    changed = dataclasses.replace(setup, config=dataclasses.replace(setup.config, budget=new))
    try:
        agent_budget(changed)  # bad values, or max_usd with a model that has no price
    except (ConfigError, BudgetError) as error:
        ctx.say(f"budget unchanged: {error}")
        return
    setup.config = changed.config
    if not new:
        ctx.say("budget off: the next turns run without caps (this session)")
        return
    ctx.say(f"budget from the next turn on (this session): {_caps_text(new)}; spend so far on "
            "the thread counts against it")


# --------------------------------------------------------------------------- /permissions

_TOP_LEVEL_KEY = r"^\s*{key}\s*="
_TABLE = re.compile(r"^\s*\[")


def write_tool_lists(path: Path, lists: Mapping[str, Sequence[str]]) -> None:
    """Set top-level list keys (`auto_approve`, `interrupt_on`) in the TOML file at `path`,
    keeping every other line as it is; a key not there yet goes before the first table.

    Raises:
        ConfigError: the file would not read back (it is then left as it was).
    """
    from fathom.project.config import ConfigError, load_config

    original = path.read_text(encoding="utf-8") if path.is_file() else ""
    lines = original.splitlines()
    for key, names in lists.items():
        value = f"{key} = [{', '.join(_toml_string(n) for n in names)}]"
        pattern = re.compile(_TOP_LEVEL_KEY.format(key=re.escape(key)))
        first_table = next((i for i, line in enumerate(lines) if _TABLE.match(line)), len(lines))
        found = next((i for i in range(first_table) if pattern.match(lines[i])), None)
        if found is None:
            lines.insert(first_table, value)
            continue
        end = found
        if "[" in lines[found] and "]" not in lines[found].split("=", 1)[1]:
            while end + 1 < len(lines) and "]" not in lines[end]:  # a multi-line array
                end += 1
        lines[found:end + 1] = [value]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        load_config(path.parent, Path("/nonexistent-home"))
    except ConfigError:
        path.write_text(original, encoding="utf-8")
        raise


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _permissions_report(setup: Any) -> str:
    from fathom.project.build import DEFAULT_APPROVALS

    asking = sorted(setup.approvals())
    free = set(setup.config.auto_approve) | set(setup.auto_approve)
    allowed = sorted(free & (setup.tool_names() | set(DEFAULT_APPROVALS)))
    others = sorted(setup.tool_names() - set(asking) - set(allowed))
    lines = ["tools that ask for approval: " + (", ".join(asking) or "(none)"),
             "auto-approved (run without asking): " + (", ".join(allowed) or "(none)"),
             "never gated (read-only or harmless): " + (", ".join(others) or "(none)"),
             "/permissions allow TOOL · /permissions ask TOOL (this session; add --save to "
             "write fathom.toml too)"]
    return "\n".join(lines)


def permissions_command(ctx: CommandContext, arg: str) -> None:
    """`/permissions`: which tools ask; `/permissions allow|ask TOOL [--save]`."""
    if not _local(ctx, "permissions"):
        return
    from fathom.project.build import DEFAULT_APPROVALS
    from fathom.project.config import ConfigError

    setup = ctx.session.setup
    try:
        words = shlex.split(arg)
    except ValueError:
        words = arg.split()
    save = "--save" in words
    words = [w for w in words if w != "--save"]
    if not words:
        ctx.say(_permissions_report(setup))
        return
    if words[0] not in ("allow", "ask") or len(words) < 2:
        ctx.say("usage: /permissions allow TOOL... or /permissions ask TOOL... "
                "(add --save to write fathom.toml)")
        return
    verb, tools = words[0], words[1:]
    known = setup.tool_names() | set(DEFAULT_APPROVALS)
    unknown = [t for t in tools if t not in known]
    if unknown:
        from fathom.middleware.human_in_the_loop import unknown_tools_message

        ctx.say("nothing changed: " + unknown_tools_message(unknown, known, "/permissions"))
        return
    config = setup.config
    session_approved = [t for t in setup.auto_approve if t not in tools]
    auto = [t for t in config.auto_approve if t not in tools]
    interrupt_on = [t for t in config.interrupt_on if t not in tools]
    if verb == "allow":
        auto += tools
    else:
        gated_anyway = set(DEFAULT_APPROVALS)
        if setup.mcp is not None:
            gated_anyway |= set(setup.mcp.asking_tools())
        interrupt_on += [t for t in tools if t not in gated_anyway]
    new_config = dataclasses.replace(config, auto_approve=auto, interrupt_on=interrupt_on)
    if save:
        try:
            write_tool_lists(setup.project_dir / "fathom.toml",
                             {"auto_approve": auto, "interrupt_on": interrupt_on})
        except (ConfigError, OSError) as error:
            ctx.say(f"nothing changed: cannot write fathom.toml: {error}")
            return
    setup.config = new_config
    setup.auto_approve = session_approved
    verb_text = "run without asking" if verb == "allow" else "ask for approval"
    where = "this session, and saved to fathom.toml" if save else "this session"
    ctx.say(f"{', '.join(tools)} now {verb_text} from the next turn on ({where})\n"
            + _permissions_report(setup))
