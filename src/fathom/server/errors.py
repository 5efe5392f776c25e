"""Errors the API reports to clients, as JSON ``{"detail": "..."}`` with an HTTP status.

Route code raises :class:`ApiError` (or one of its subclasses); the handler installed by
``create_app`` turns it into the response. Status codes follow LangGraph's server: 404 for an
unknown thread, run or assistant, 409 for a busy thread under ``multitask_strategy="reject"``,
422 for a malformed body or id, 413 for a body over the size limit.
"""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from fathom.errors import FathomError
from fathom.server.serde import dumps

__all__ = [
    "ApiError",
    "Conflict",
    "NotFound",
    "Unprocessable",
    "api_error_handler",
    "http_exception_handler",
    "json_response",
    "unhandled_error_handler",
]

logger = logging.getLogger(__name__)


def json_response(
    content: object, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A JSON response encoded with :func:`fathom.server.serde.dumps`."""
    return Response(dumps(content), status_code, headers, media_type="application/json")


class ApiError(FathomError):
    """An error to report to the client with ``status`` and a human-readable ``detail``."""

    status: int = 400

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status


class NotFound(ApiError):
    """The thread, run, assistant or item does not exist (404)."""

    status = 404


class Conflict(ApiError):
    """The request conflicts with the thread's current state (409)."""

    status = 409


class Unprocessable(ApiError):
    """The body or a path/query parameter is malformed (422)."""

    status = 422


async def api_error_handler(request: Request, exc: Exception) -> Response:
    """Render an :class:`ApiError` as ``{"detail": ...}``."""
    assert isinstance(exc, ApiError)
    return json_response({"detail": exc.detail}, exc.status)


async def http_exception_handler(request: Request, exc: Exception) -> Response:
    """Render Starlette's own HTTP errors (404 no route, 405 method) as ``{"detail": ...}``."""
    assert isinstance(exc, HTTPException)
    return json_response({"detail": exc.detail}, exc.status_code, dict(exc.headers or {}))


async def unhandled_error_handler(request: Request, exc: Exception) -> Response:
    """Log an unexpected error and answer 500 without leaking a traceback."""
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return json_response({"detail": f"Internal server error: {type(exc).__name__}"}, 500)
