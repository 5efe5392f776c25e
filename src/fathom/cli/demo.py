"""`fathom demo`: the whole command working end to end, offline, on a small project.

The model is a `ScriptedModel` that decides each step from what it is sent, so no key or
network is needed; everything else is what `fathom` runs in your project: the project's
`fathom.toml`, `AGENTS.md` memory and a subagent definition, a plan, two subagents working
in parallel, a file written after an approval and then edited, checkpoints in SQLite, and
the thread resumed by a new session, as after closing the terminal.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from langchain_core.messages import AIMessage, ToolMessage

from fathom.middleware.planning import WRITE_TODOS_TOOL
from fathom.middleware.subagents import TASK_TOOL
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

__all__ = ["DEMO_TASK", "FOLLOW_UP", "demo_model", "run_demo"]

DEMO_TASK = "Write GUIDE.md: a short guide to the calc package, one section per module."
FOLLOW_UP = "What did you change in GUIDE.md?"

PROJECT_FILES = {
    "calc/__init__.py": '"""A tiny calculator."""\n',
    "calc/ops.py": (
        '"""Arithmetic on two numbers."""\n\n\n'
        "def add(a: float, b: float) -> float:\n    return a + b\n\n\n"
        "def subtract(a: float, b: float) -> float:\n    return a - b\n"
    ),
    "calc/parse.py": (
        '"""Reading expressions such as "2 + 3"."""\n\n\n'
        "def tokens(text: str) -> list[str]:\n    return text.split()\n\n\n"
        "def parse(text: str) -> tuple[float, str, float]:\n"
        "    left, op, right = tokens(text)\n    return float(left), op, float(right)\n"
    ),
    "fathom.toml": (
        "# The demo's model is scripted; in your project put e.g. model = \"openai:gpt-4.1\".\n"
        "# Edits run without asking; new files still need an approval.\n"
        'auto_approve = ["edit_file"]\n'
    ),
    ".fathom/AGENTS.md": "- Guides go in GUIDE.md, with one section per module.\n",
    ".fathom/agents/reader.md": (
        "---\nname: reader\ndescription: Reads one Python module and lists its functions.\n"
        "tools: [read_file, grep, ls]\n---\n"
        "You read the module you are given and report each public function on one line.\n"
    ),
}

READER_PROMPT = "You read the module you are given"
MODULES = ("/calc/ops.py", "/calc/parse.py")


def _reader(request: ScriptRequest) -> AIMessage:
    """The `reader` subagent: read the module named in its task, list its functions."""
    module = next(m for m in MODULES if m in request.last_human_text)
    results = request.turn_results
    if not results:
        return ai(f"Reading {module}.", tool_call("read_file", {"file_path": module}))
    names = re.findall(r"def (\w+)\(", str(results[-1].content))
    return ai(f"{module}: " + ", ".join(f"{name}()" for name in names))


def _todos(done: int) -> list[dict[str, str]]:
    steps = ["Read calc/ops.py", "Read calc/parse.py", "Write GUIDE.md", "Polish the title"]
    return [
        {"content": step, "status": "completed" if i < done else
         "in_progress" if i == done else "pending"}
        for i, step in enumerate(steps)
    ]


def _main(request: ScriptRequest) -> AIMessage:
    """The main agent: plan, delegate, write, edit, report; or answer the follow-up."""
    recent = request.turn_messages
    calls = [c for m in recent if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [m for m in recent if isinstance(m, ToolMessage)]
    if request.last_human_text == FOLLOW_UP:
        if not results:
            return ai("", tool_call("read_file", {"file_path": "/GUIDE.md"}))
        earlier = [c["name"] for m in request.messages if isinstance(m, AIMessage)
                   for c in m.tool_calls]
        title = next((line for line in str(results[-1].content).splitlines() if "# " in line),
                     "")
        return ai(
            f"Earlier in this thread I wrote GUIDE.md and then edited its title "
            f"({earlier.count('write_file')} write, {earlier.count('edit_file')} edit). "
            f"It now starts with: {title.split('# ', 1)[-1]}"
        )
    if not calls:
        return ai(
            "I'll plan this, and have two readers go through the modules in parallel.",
            tool_call(WRITE_TODOS_TOOL, {"todos": _todos(0)}),
            *(tool_call(TASK_TOOL, {"description": f"List the functions in {module}.",
                                 "subagent_type": "reader"}) for module in MODULES),
        )
    names = [c["name"] for c in calls]
    if "write_file" not in names:
        reports = [str(m.content) for m in results if m.name == TASK_TOOL]
        sections = "\n".join(f"## {r.split(':', 1)[0]}\n\n{r.split(':', 1)[1].strip()}\n"
                             for r in reports)
        guide = f"# calc\n\nA tiny calculator.\n\n{sections}"
        return ai("Both readers reported; writing the guide.",
                  tool_call("write_file", {"file_path": "/GUIDE.md", "content": guide}),
                  tool_call(WRITE_TODOS_TOOL, {"todos": _todos(2)}))
    if "edit_file" not in names:
        return ai("", tool_call("edit_file", {"file_path": "/GUIDE.md", "old_string": "# calc\n",
                                              "new_string": "# calc: a guide\n"}))
    if names.count(WRITE_TODOS_TOOL) < 3:
        return ai("", tool_call(WRITE_TODOS_TOOL, {"todos": _todos(4)}))
    return ai("GUIDE.md is written: one section per module, functions listed by the readers.")


def demo_model() -> ScriptedModel:
    """The scripted model behind the demo (main agent and `reader` subagents)."""
    return ScriptedModel(
        policy=lambda request: _reader(request)
        if READER_PROMPT in (request.system_prompt or "") else _main(request)
    )


def _scripted_answer(out: TextIO) -> Callable[[str], str]:
    """Answer the approval prompt as a person would, and show it."""
    def ask(prompt: str) -> str:
        out.write(f"{prompt}y   (answered by the demo)\n")
        out.flush()
        return "y"
    return ask


def _setup(project: Path, home: Path, model: ScriptedModel) -> Any:
    from fathom.project.build import AgentSetup
    from fathom.project.config import load_config, project_sources

    config = load_config(project, home)
    return AgentSetup(project_dir=project, home=home, config=config,
                      sources=project_sources(project, home),
                      model_name="scripted (offline demo)", model=model,
                      sandbox=config.sandbox)


def run_demo(*, plain: bool = False, out: TextIO | None = None) -> int:
    """Run the demo in a temporary project; 0 when every step did what it shows."""
    from fathom.cli.approvals import ask_decisions, file_reader
    from fathom.cli.display import make_display
    from fathom.cli.session import Session
    from fathom.project.threads import ThreadIndex, threads_db_path

    stream: TextIO = out or sys.stdout
    say = lambda text: (stream.write(text + "\n"), stream.flush())  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="fathom-demo-") as tmp:
        project, home = Path(tmp) / "project", Path(tmp) / "home"
        for name, text in PROJECT_FILES.items():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            (project / name).write_text(text, encoding="utf-8")
        home.mkdir()
        model = demo_model()
        db = threads_db_path(project, home)
        say("fathom demo: a real run of the fathom command, offline.")
        say("The model is scripted (fathom.testing.ScriptedModel); everything else is real.")
        say(f"Project: {project} (calc/ops.py, calc/parse.py, fathom.toml, .fathom/AGENTS.md, "
            ".fathom/agents/reader.md)\n")
        say(f"› {DEMO_TASK}")
        with Session(_setup(project, home, model), db, make_display(plain, stream)) as session:
            thread = session.threads.new_thread_id()
            result = session.run(thread, DEMO_TASK)
            while result.status == "approval":
                session.display.pause()
                resume = ask_decisions(result.approvals, ask=_scripted_answer(stream), out=stream,
                                       read_current=file_reader(session.setup))
                result = session.run(thread, resume=resume)
        guide = project / "GUIDE.md"
        say(f"\nGUIDE.md on disk:\n{guide.read_text(encoding='utf-8') if guide.exists() else '-'}")
        say(f"Session closed. A new one resumes thread {thread} (like `fathom --resume`):\n")
        say(f"› {FOLLOW_UP}")
        with Session(_setup(project, home, model), db, make_display(plain, stream)) as session:
            follow = session.run(thread, FOLLOW_UP)
        threads = ThreadIndex(db).list()
        say(f"\nThreads in {db.relative_to(project)}: "
            + "; ".join(f"{t.thread_id} “{t.title[:40]}”" for t in threads))
        ok = (result.status == "done" and follow.status == "done" and guide.exists()
              and "# calc: a guide" in guide.read_text(encoding="utf-8")
              and "edited its title" in follow.answer)
    say("\nThat was a scripted model. To use a real one, in your project run:")
    say('  export OPENAI_API_KEY=...   and   fathom --model openai:gpt-4.1')
    say('  or put  model = "anthropic:claude-sonnet-4-5"  (or base_url for Ollama/vLLM) in '
        "fathom.toml and run  fathom")
    if not ok:
        say("error: the demo did not finish as scripted (see above)")
        return 1
    return 0
