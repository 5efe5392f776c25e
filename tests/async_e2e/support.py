"""Helpers for the async subagent end-to-end tests: the deployment, gates and user turns.

`deploy/` holds one `langgraph.json` with a scripted supervisor and two gated children
(`researcher`, `coder`); see `deploy/graphs.py` for the commands the supervisor obeys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from langgraph_sdk.client import LangGraphClient
from tests.server.support import Gate, eventually

DEPLOY_DIR = Path(__file__).resolve().parent / "deploy"
"""The deployment the end-to-end servers serve (a copy of it, so state stays out of the repo)."""


def copy_e2e_deployment(destination: Path) -> Path:
    """Copy `deploy/` to `destination`; the server's state files land there."""
    shutil.copytree(DEPLOY_DIR, destination, ignore=shutil.ignore_patterns("__pycache__"))
    return destination


class Gates:
    """The gates of the children's runs, by name (the task text a child waits on)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __getitem__(self, name: str) -> Gate:
        return Gate(self.root / name)

    async def wait_started(self, *names: str) -> None:
        """Wait until a child run has reached each named gate."""

        async def reached() -> bool:
            return all(self[name].started for name in names)

        await eventually(reached, f"child runs to reach the gates {names}")


class Conversation:
    """The user's side of one supervisor thread on a server."""

    def __init__(self, client: LangGraphClient, thread_id: str) -> None:
        self.client = client
        self.thread_id = thread_id

    @classmethod
    async def open(cls, client: LangGraphClient) -> Conversation:
        """A new thread for the `supervisor` graph."""
        return cls(client, (await client.threads.create())["thread_id"])

    async def turn(self, text: str) -> dict[str, Any]:
        """One user turn; the thread's values after it. Queued behind a run a child's
        notification may have started, so a turn never collides with one."""
        values = await self.client.runs.wait(
            self.thread_id, "supervisor", input={"messages": [{"role": "user", "content": text}]},
            multitask_strategy="enqueue",
        )  # fmt: skip
        assert isinstance(values, dict), values
        assert "__error__" not in values, values
        return values

    async def tool_answers(self, text: str) -> list[dict[str, Any]]:
        """The tool messages that answer the model's tool calls for this user turn."""
        values = await self.turn(text)
        messages = values["messages"]
        asked = max(i for i, m in enumerate(messages) if m["type"] == "human"
                    and m["content"] == text)  # fmt: skip
        return [m for m in messages[asked:] if m["type"] == "tool"]

    async def check(self, task_id: str) -> dict[str, Any]:
        """`check_async_task`'s report on `task_id`, as JSON."""
        [answer] = await self.tool_answers(f"check {task_id}")
        assert answer["status"] != "error", answer
        return json.loads(answer["content"])

    async def tasks(self) -> dict[str, Any]:
        """The thread's `async_tasks` channel."""
        state = await self.client.threads.get_state(self.thread_id)
        values = state["values"]
        assert isinstance(values, dict)
        return dict(values.get("async_tasks") or {})


def launched_id(answer: dict[str, Any]) -> str:
    """The task id in a `start_async_task` answer."""
    content = str(answer["content"])
    assert content.startswith("Launched async subagent. task_id: "), content
    return content.split("task_id: ", 1)[1]


def use_gates(root: Path, monkeypatch: Any) -> Gates:
    """Make `root` the gate folder, named in `FATHOM_E2E_GATES` for servers started later."""
    root.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("FATHOM_E2E_GATES", str(root))
    return Gates(root)
