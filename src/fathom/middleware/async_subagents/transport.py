"""How the async subagent tools reach a spec's server, all through `langgraph-sdk`.

- No `url`: in process (ASGI) to the fathom app that hosts the running parent
  (`fathom.hosting.loopback`); when no fathom app exists, `langgraph_sdk.get_client(url=None)`,
  which targets `langgraph-api` in process.
- `url`: HTTP with the spec's `headers` and an API key from the environment
  (`LANGGRAPH_API_KEY`, `LANGSMITH_API_KEY`, `LANGCHAIN_API_KEY`, then `FATHOM_API_KEY`).
- `client`: the spec's own object with the SDK client's `threads` and `runs` methods
  (`fathom.a2a.a2a_async_subagent`: an A2A agent), used as it is.

It also papers over servers that implement less of the API: a thread without `values` or
`interrupts` is completed from `threads.get_state`, and a server that refuses
`multitask_strategy="interrupt"` (409/422) gets a cancel followed by a plain create.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import weakref
from collections.abc import Mapping
from typing import Any

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from fathom.errors import FathomError
from fathom.middleware.async_subagents.tasks import AsyncSubAgent
from fathom.tool_answers import exception_text

__all__ = ["REMOTE_ERRORS", "ClientPool", "NoServerError", "create_run", "describe_error",
           "read_thread", "status_code"]  # fmt: skip

logger = logging.getLogger(__name__)


class NoServerError(FathomError, RuntimeError):
    """An async subagent without a url, and no Agent Protocol server in process to run it."""


REMOTE_ERRORS = (httpx.HTTPError, OSError, ValueError, NoServerError)
"""What a failed call to an Agent Protocol server through `langgraph_sdk` raises: httpx's
errors (the SDK's own are `httpx.HTTPStatusError`s), `OSError` (timeouts too), `ValueError`
(a body that is not JSON), and `NoServerError`."""

_KEY_VARIABLES = ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "FATHOM_API_KEY")


def api_key_from_env() -> str | None:
    """The first API key set among the SDK's variables and fathom's own."""
    for name in _KEY_VARIABLES:
        if value := os.environ.get(name):
            return value
    return None


def _headers(spec: AsyncSubAgent) -> dict[str, str]:
    headers = dict(spec.get("headers") or {})
    # LangSmith Deployments read it to pick their auth; other servers ignore it
    if not any(key.lower() == "x-auth-scheme" for key in headers):
        headers["x-auth-scheme"] = "langsmith"
    return headers


class ClientPool:
    """One SDK client per server (url and headers) and event loop, made on first use.

    An `httpx.AsyncClient` belongs to the loop it first ran in, so a pool keeps separate
    clients per loop (a sync `invoke` runs each tool call in a loop of its own).
    """

    def __init__(self) -> None:
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[Any, ...], LangGraphClient]
        ] = weakref.WeakKeyDictionary()

    def get(self, spec: AsyncSubAgent) -> LangGraphClient:
        """The client for `spec`'s server, in the running loop."""
        if (own := spec.get("client")) is not None:
            return own  # the spec brings its own (an A2A agent, say): one for every loop
        loop = asyncio.get_running_loop()
        clients = self._clients.setdefault(loop, {})
        url = spec.get("url")
        headers = _headers(spec)
        if url is None:
            from fathom.hosting.loopback import hosting_app

            app = hosting_app()
            key: tuple[Any, ...] = ("app", id(app))
            if key not in clients:
                clients[key] = self._in_process(app, headers)
            return clients[key]
        key = ("url", url, frozenset(headers.items()))
        if key not in clients:
            clients[key] = get_client(url=url, headers=headers, api_key=api_key_from_env())
        return clients[key]

    @staticmethod
    def _in_process(app: Any, headers: dict[str, str]) -> LangGraphClient:
        if app is None:
            # not under a fathom app: langgraph-api's own in-process transport, if any
            if importlib.util.find_spec("langgraph_api") is None:
                raise NoServerError(
                    "no Agent Protocol server hosts this agent, so an async subagent without "
                    "a url has nowhere to run: serve the agent with `fathom serve` (or "
                    "fathom.server.create_app), or give the spec a url"
                )
            return get_client(url=None, headers=headers)
        from fathom.hosting.client import in_process_client

        client = in_process_client(app, loopback=True)  # as the caller of this run
        client.http.client.headers.update(headers)
        return client


def status_code(error: BaseException) -> int | None:
    """The HTTP status of an SDK error, or `None` when there was no answer."""
    response = getattr(error, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def _detail(error: BaseException) -> str:
    response = getattr(error, "response", None)
    try:
        body = response.json() if response is not None else None
    except ValueError:
        body = None
    if isinstance(body, Mapping) and body.get("detail"):
        return str(body["detail"])
    text = getattr(response, "text", "") if response is not None else ""
    return str(text)[:300] or str(error)


def describe_error(error: BaseException, spec: AsyncSubAgent) -> str:
    """A failure talking to the server, in words the model can act on."""
    where = spec.get("url") or "this server (in process)"
    if isinstance(error, httpx.TimeoutException):
        return f"the server at {where} did not answer in time; it may be overloaded or down"
    if isinstance(error, httpx.TransportError):
        return (
            f"cannot reach the server at {where} ({type(error).__name__}); it may be down. "
            "Try again later"
        )
    code = status_code(error)
    if code is not None:
        return f"the server at {where} answered {code}: {_detail(error)}"
    return exception_text(error)


async def read_thread(client: LangGraphClient, thread_id: str) -> dict[str, Any]:
    """The thread with its `values`, `status` and `interrupts`.

    A server whose thread lacks `values` or `interrupts` (aegra) has them filled from the
    thread's state: `values`, and the pending interrupts of its tasks (a thread with
    pending interrupts is `interrupted`).
    """
    thread: dict[str, Any] = dict(await client.threads.get(thread_id))
    if thread.get("values") is not None and "interrupts" in thread:
        return thread
    state = await client.threads.get_state(thread_id)
    if thread.get("values") is None:
        thread["values"] = state.get("values")
    if "interrupts" not in thread:
        interrupts = {
            str(task.get("id")): list(task.get("interrupts") or [])
            for task in state.get("tasks") or []
            if task.get("interrupts")
        }
        thread["interrupts"] = interrupts
        if interrupts and thread.get("status") in (None, "idle"):
            thread["status"] = "interrupted"
    return thread


async def create_run(
    client: LangGraphClient,
    *,
    thread_id: str,
    assistant_id: str,
    input: dict[str, Any],
    multitask_strategy: str | None = None,
    active_run_id: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """`runs.create`; a server that refuses `multitask_strategy="interrupt"` (409 or
    422) gets the active run cancelled and a plain create instead."""
    kwargs = dict(options)
    if multitask_strategy is not None:
        kwargs["multitask_strategy"] = multitask_strategy
    try:
        return dict(await client.runs.create(thread_id, assistant_id, input=input, **kwargs))
    except httpx.HTTPStatusError as error:
        if multitask_strategy != "interrupt" or status_code(error) not in (409, 422):
            raise
        logger.info("server refused multitask_strategy=interrupt (%s); cancelling first",
                    status_code(error))
    if active_run_id is not None:
        try:
            await client.runs.cancel(thread_id, active_run_id, wait=True)
        except httpx.HTTPStatusError as error:
            if status_code(error) not in (404, 409):
                raise
    kwargs.pop("multitask_strategy", None)
    return dict(await client.runs.create(thread_id, assistant_id, input=input, **kwargs))
