"""`fathom demo --server`: a deep agent served by `fathom serve`, one run streamed over HTTP.

The demo writes a small deployment into a temporary folder (a `langgraph.json` naming
`agent.py:graph`, a `create_deep_agent` graph whose model is a `ScriptedModel`, so it is
offline), starts the real `fathom serve` command on it as a subprocess on a free loopback
port (`--port 0`: the server picks one and prints its URL), and then talks to it with the
real LangGraph SDK client, as any Agent Protocol client would: it creates a thread, streams
one run (each SSE event printed as it arrives), reads the thread's final state, and stops
the server with SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from langchain_core.messages import AIMessage, ToolMessage

from fathom.middleware.async_subagents.transport import REMOTE_ERRORS
from fathom.middleware.planning import WRITE_TODOS_TOOL
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

__all__ = ["SERVER_TASK", "run_server_demo", "server_demo_model"]

SERVER_TASK = "Write NOTES.md: two lines on what fathom serve is for."
NOTES = (
    "fathom serve runs a langgraph.json's graphs as an Agent Protocol server.\n"
    "Clients (the LangGraph SDK, LangChain's UIs) create threads and stream runs over HTTP.\n"
)
START_DEADLINE_S = 180.0
"""Bounds a hang while the server starts; a healthy one is up in seconds, even on 2 loaded cores."""
RUN_TIMEOUT_S = 180.0

DEPLOYMENT = {"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}
AGENT_PY = '''"""The demo's deployed graph: a deep agent with a scripted (offline) model."""

from fathom import create_deep_agent
from fathom.cli.demo_server import server_demo_model

graph = create_deep_agent(model=server_demo_model(), system_prompt="You write short notes.")
'''

_URL = re.compile(r"fathom serve: (http://\S+)")


def _todos(done: int) -> list[dict[str, str]]:
    steps = ["Write NOTES.md", "Report back"]
    return [{"content": step, "status": "completed" if i < done else
             "in_progress" if i == done else "pending"} for i, step in enumerate(steps)]


def _policy(request: ScriptRequest) -> AIMessage:
    """Plan, write the note, close the plan, answer: each step chosen from what it is sent."""
    calls = [c["name"] for m in request.turn_messages if isinstance(m, AIMessage)
             for c in m.tool_calls]  # fmt: skip
    if not calls:
        return ai("I'll plan it, then write the note.",
                  tool_call(WRITE_TODOS_TOOL, {"todos": _todos(0)}))
    if "write_file" not in calls:
        return ai("", tool_call("write_file", {"file_path": "/NOTES.md", "content": NOTES}),
                  tool_call(WRITE_TODOS_TOOL, {"todos": _todos(1)}))
    if calls.count(WRITE_TODOS_TOOL) < 3:
        return ai("", tool_call(WRITE_TODOS_TOOL, {"todos": _todos(2)}))
    written = [m for m in request.turn_messages
               if isinstance(m, ToolMessage) and m.name == "write_file"]  # fmt: skip
    if not written or "Updated file" not in str(written[-1].content):
        return ai(f"Writing NOTES.md failed: {written[-1].content if written else 'no result'}")
    return ai(f"NOTES.md is written ({len(NOTES.splitlines())} lines) and the plan is done.")


def server_demo_model() -> ScriptedModel:
    """The scripted model of the served demo agent (imported by the deployment's `agent.py`)."""
    return ScriptedModel(policy=_policy)


def _summary(event: str, data: Any) -> str:
    """One short line describing an SSE event's payload."""
    if event == "metadata" and isinstance(data, dict):
        return f"run_id={data.get('run_id')} attempt={data.get('attempt')}"
    if event == "updates" and isinstance(data, dict):
        parts = []
        for node, update in data.items():
            if not isinstance(update, dict):
                parts.append(f"{node}: no change")
                continue
            messages = update.get("messages") or []
            last = messages[-1] if isinstance(messages, list) and messages else None
            if isinstance(last, dict) and last.get("tool_calls"):
                detail = "calls " + ", ".join(c["name"] for c in last["tool_calls"])
            elif isinstance(last, dict) and last.get("type") == "tool":
                detail = f"{last.get('name')} → {str(last.get('content'))[:70]}"
            elif isinstance(last, dict):
                detail = f"says {str(last.get('content'))[:60]!r}"
            else:
                detail = ", ".join(sorted(update)) or "no change"
            parts.append(f"{node}: {detail}")
        return "; ".join(parts)
    if event == "values" and isinstance(data, dict):
        keys = [f"{len(data.get('messages') or [])} messages"]
        if data.get("todos"):
            keys.append(f"{len(data['todos'])} todos")
        if data.get("files"):
            keys.append("files " + ", ".join(sorted(data["files"])))
        return ", ".join(keys)
    if event == "error":
        return json.dumps(data)[:200]
    return json.dumps(data, default=str)[:80]


@contextlib.contextmanager
def _served(deploy: Path, log: TextIO, say: Any) -> Iterator[str]:
    """Run `fathom serve` on `deploy/langgraph.json` and yield its URL; SIGTERM it after."""
    command = [sys.executable, "-m", "fathom.cli", "serve", "--config",
               str(deploy / "langgraph.json"), "--port", "0", "--log-level", "warning"]
    say(f"$ fathom serve --config {deploy.name}/langgraph.json --port 0")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, cwd=deploy, env=env, stdout=subprocess.PIPE,
                               stderr=log, text=True, start_new_session=True)  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        url = None
        while url is None:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"fathom serve did not start in {START_DEADLINE_S:.0f}s"
                                   ) from None  # fmt: skip
            if line is None:
                raise RuntimeError(f"fathom serve exited with {process.wait()}")
            say("  " + line.rstrip())
            match = _URL.search(line)
            url = match.group(1) if match else None
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _stream_one_run(url: str, say: Any) -> tuple[list[str], dict[str, Any]]:
    """Create a thread, stream a run, print its events; the event names and the final state."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None, timeout=RUN_TIMEOUT_S)
    try:
        thread = client.threads.create(metadata={"demo": "server"})
        say(f"POST /threads → thread {thread['thread_id']}")
        say(f"POST /threads/{{id}}/runs/stream  assistant=agent  "
            f"stream_mode=[updates, values]\n› {SERVER_TASK}")
        names = []
        for part in client.runs.stream(
            thread["thread_id"], "agent", input={"messages": [
                {"role": "user", "content": SERVER_TASK}]},
            stream_mode=["updates", "values"],
        ):  # fmt: skip
            names.append(part.event)
            say(f"  event: {part.event:<9} {_summary(part.event, part.data)}")
        state = client.threads.get_state(thread["thread_id"])
        final = client.threads.get(thread["thread_id"])
        values = state["values"] if isinstance(state["values"], dict) else {}
        say(f"\nGET /threads/{{id}}/state → thread {final['status']}, next={state['next']}")
        messages = values.get("messages") or []
        say(f"  messages: {len(messages)}; todos: "
            + ", ".join(f"[{'x' if t['status'] == 'completed' else ' '}] {t['content']}"
                        for t in values.get("todos") or []))
        for path, data in sorted((values.get("files") or {}).items()):
            content = data.get("content") if isinstance(data, dict) else data
            text = "\n".join(content) if isinstance(content, list) else str(content)
            say(f"  file {path}:\n" + "".join(f"    {line}\n" for line in text.splitlines()))
        answer = str(messages[-1]["content"]) if messages else ""
        say(f"  final answer: {answer}")
        return names, {"status": final["status"], "answer": answer, "values": values}
    finally:
        client.http.client.close()


def run_server_demo(*, out: TextIO | None = None) -> int:
    """Serve the demo agent with `fathom serve`, stream one run over HTTP; 0 when it worked."""
    stream: TextIO = out or sys.stdout
    say = lambda text: (stream.write(text + "\n"), stream.flush())  # noqa: E731
    say("\nfathom demo --server: the same kind of agent behind `fathom serve`, "
        "driven over HTTP by the LangGraph SDK.")
    with tempfile.TemporaryDirectory(prefix="fathom-demo-server-") as tmp:
        deploy = Path(tmp) / "deploy"
        deploy.mkdir()
        (deploy / "langgraph.json").write_text(json.dumps(DEPLOYMENT, indent=2) + "\n")
        (deploy / "agent.py").write_text(AGENT_PY, encoding="utf-8")
        say(f"Deployment: {deploy}/langgraph.json → {json.dumps(DEPLOYMENT['graphs'])}")
        log_path = Path(tmp) / "server.log"
        try:
            with log_path.open("w") as log, _served(deploy, log, say) as url:
                names, final = _stream_one_run(url, say)
        except (*REMOTE_ERRORS, RuntimeError) as error:  # RuntimeError: serve did not start
            say(f"error: {type(error).__name__}: {error}")
            say(log_path.read_text(errors="replace")[-3000:] if log_path.exists() else "")
            return 1
        say(f"Server stopped (SIGTERM). A restart on {deploy.name}/.fathom/ (its SQLite storage) "
            "would find the thread and its checkpoints.")
    ok = (names[:1] == ["metadata"] and "updates" in names and "values" in names
          and "error" not in names and final["status"] == "idle"
          and "NOTES.md is written" in final["answer"])
    say("See docs/server.md for the endpoints, storage and deploying the same langgraph.json "
        "on langgraph dev or LangSmith.")
    if not ok:
        say("error: the server demo did not finish as scripted (see above)")
        return 1
    return 0
