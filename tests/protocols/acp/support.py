"""Helpers for driving `fathom acp` with the real ACP client library.

A test gets a temporary project whose `fathom.toml` points at a `ScriptedModel` served over
HTTP (so the subprocess streams real OpenAI chunks, tool calls included), and `open_agent`,
which spawns `fathom acp` with `acp.spawn_agent_process` and initializes the connection.
`EditorClient` plays the editor: it records every session update and answers permission
requests from a queue of option ids.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    RequestPermissionResponse,
)

from fathom.testing import ScriptedModel, ScriptedOpenAIServer

FATHOM = Path(sys.executable).parent / "fathom"
if not FATHOM.exists():  # pragma: no cover - a venv without the console script
    FATHOM = Path(shutil.which("fathom") or FATHOM)

DEADLINE = 60.0
"""Seconds a wait may take before the test fails as hung (never a timing assertion)."""


@dataclass
class EditorClient:
    """The editor's side of ACP: records updates, answers permission requests."""

    answers: list[str] = field(default_factory=list)
    """Option ids to pick, in order; "cancelled" answers with the cancelled outcome."""
    updates: list[tuple[str, Any]] = field(default_factory=list)
    permission_requests: list[Any] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options))
        self.changed.set()
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def write_text_file(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def on_connect(self, conn: Any) -> None:
        pass

    def of_kind(self, kind: str, session_id: str | None = None) -> list[Any]:
        """Updates whose `session_update` is `kind` (e.g. "plan", "tool_call")."""
        return [u for s, u in self.updates
                if u.session_update == kind and (session_id is None or s == session_id)]

    def agent_text(self, session_id: str | None = None) -> str:
        return "".join(u.content.text for u in self.of_kind("agent_message_chunk", session_id)
                       if getattr(u.content, "text", None))

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition()` holds (checked after every update)."""
        async def wait() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), DEADLINE)


@dataclass
class AcpProject:
    """A project directory with a scripted model, and a private home."""

    project: Path
    home: Path
    model: ScriptedModel
    server: ScriptedOpenAIServer

    @property
    def env(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        for kept in ("TMPDIR", "PYTHONPATH"):  # PYTHONPATH: the command runs the code under test
            if kept in os.environ:
                env[kept] = os.environ[kept]
        return env

    def write_config(self, extra: str = "", *, base_url: str | None = None) -> None:
        url = base_url or self.server.base_url
        (self.project / "fathom.toml").write_text(
            f'model = "openai:scripted"\nbase_url = "{url}"\n{extra}', encoding="utf-8")

    @asynccontextmanager
    async def open_agent(self, client: EditorClient, *args: str) -> AsyncIterator[Any]:
        """`fathom acp` in the project, initialized; yields the client connection."""
        async with spawn_agent_process(
            client, str(FATHOM), "acp", *args, env=self.env, cwd=self.project,
            transport_kwargs={"stderr": None},
        ) as (conn, _process):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION),
                                   DEADLINE)
            yield conn




class RecordingProxy:
    """An HTTP proxy in front of the scripted model's server that records the `model`
    named in each chat-completions request (the scripted server answers any name)."""

    def __init__(self, upstream: str) -> None:
        import json
        import urllib.request
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.models: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                proxy.models.append(str(json.loads(body).get("model")))
                request = urllib.request.Request(
                    upstream.rstrip("/") + self.path.removeprefix("/v1"), data=body,
                    headers={"content-type": "application/json"}, method="POST")
                with urllib.request.urlopen(request, timeout=DEADLINE) as answer:
                    data = answer.read()
                    self.send_response(answer.status)
                    self.send_header("content-type", answer.headers["content-type"])
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        import threading

        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
