"""Helpers for the server tests: gates that hold a run in flight, polling, small builders."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient

POLL_DEADLINE_S = 60.0
"""Bounds a hang in `eventually`; conditions normally hold within milliseconds."""


class Gate:
    """One pass through the `gated` graph: the run waits until the test calls `release`.

    The graph creates `<path>/started` when the run reaches the gate and returns once
    `<path>/release` exists, so a test holds a run in flight across processes for exactly
    as long as it needs, with no timing.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def input(self, text: str) -> dict[str, Any]:
        """The `gated` graph's input for a run through this gate."""
        return {"gate": str(self.path), "messages": [{"role": "user", "content": text}]}

    @property
    def started(self) -> bool:
        """Whether a run has reached the gate."""
        return (self.path / "started").exists()

    def release(self) -> None:
        """Let the run through."""
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "release").touch()


async def eventually(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `condition` until it holds; fail after `POLL_DEADLINE_S` (which only bounds a hang)."""
    deadline = time.monotonic() + POLL_DEADLINE_S
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def wait_started(gate: Gate) -> None:
    """Wait until a run has reached `gate`."""

    async def reached() -> bool:
        return gate.started

    await eventually(reached, f"a run to reach {gate.path}")


async def wait_status(client: LangGraphClient, thread_id: str, run_id: str, status: str) -> None:
    """Wait until the run's status is `status`."""

    async def has_status() -> bool:
        return (await client.runs.get(thread_id, run_id))["status"] == status

    await eventually(has_status, f"run {run_id} to be {status}")


def user(text: str) -> dict[str, Any]:
    """A run input with one user message."""
    return {"messages": [{"role": "user", "content": text}]}


def contents(values: object) -> list[str]:
    """The `content` of each message in a thread's values."""
    assert isinstance(values, dict)
    return [str(message["content"]) for message in values.get("messages", [])]
