"""``/ok`` and ``/info``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.errors import json_response

__all__ = ["routes"]


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


async def ok(request: Request) -> Response:
    """Liveness: ``{"ok": true}``."""
    return json_response({"ok": True})


async def info(request: Request) -> Response:
    """Server identity and feature flags, in the shape the SDK reads."""
    return json_response(
        {
            "version": _version("fathom"),
            "server": "fathom",
            "langgraph_py_version": _version("langgraph"),
            "flags": {"assistants": True, "crons": True, "langsmith": False},
            "host": {"kind": "self-hosted", "project_id": None, "revision_id": None},
        }
    )


routes = [Route("/ok", ok, methods=["GET"]), Route("/info", info, methods=["GET"])]
