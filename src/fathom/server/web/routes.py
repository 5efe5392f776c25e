"""Routes of the web page: `/` (the page), `/ui/*` (its static files), `POST /ui/render`.

The page and its static files answer without an API key (they hold no data; the page then asks
the person for the key and sends it as `x-api-key`). `POST /ui/render` sits behind the key
like the API.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fathom.server.errors import ApiError
from fathom.server.web.render import pygments_css, render_code, render_diff, render_markdown

__all__ = ["MAX_RENDER_ITEMS", "OPEN_WEB_PATHS", "routes"]

logger = logging.getLogger(__name__)

MAX_RENDER_ITEMS = 200
"""Items one `POST /ui/render` may ask for."""
_STATIC = {"app.js": "text/javascript", "app.css": "text/css"}
OPEN_WEB_PATHS = frozenset({"/", "/ui/app.js", "/ui/app.css", "/ui/pygments.css"})
"""Paths that need no API key: the page shell, which holds no data."""
_NO_CACHE = {"Cache-Control": "no-cache"}


def _static(name: str) -> str:
    return resources.files("fathom.server.web").joinpath("static", name).read_text("utf-8")


async def index(request: Request) -> Response:
    """`GET /`: the page."""
    return Response(_static("index.html"), media_type="text/html", headers=_NO_CACHE)


async def static(request: Request) -> Response:
    """`GET /ui/{name}`: the page's script and style sheet."""
    name = request.path_params["name"]
    if name == "pygments.css":
        return Response(pygments_css(), media_type="text/css", headers=_NO_CACHE)
    if name not in _STATIC:
        raise ApiError(f"no such file: /ui/{name}", 404)
    return Response(_static(name), media_type=_STATIC[name], headers=_NO_CACHE)


def _text(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key, "")
    if not isinstance(value, str):
        raise ApiError(f"{where}.{key} must be a string", 422)
    return value


def _render(item: Any, where: str) -> str:
    if not isinstance(item, dict):
        raise ApiError(f"{where} must be an object with a 'kind'", 422)
    kind = item.get("kind")
    path = item.get("path") if isinstance(item.get("path"), str) else None
    if kind == "markdown":
        return render_markdown(_text(item, "text", where))
    if kind == "code":
        return render_code(_text(item, "text", where), path)
    if kind == "diff":
        return render_diff(_text(item, "old", where), _text(item, "new", where), path)
    raise ApiError(f"{where}.kind must be 'markdown', 'code' or 'diff', not {kind!r}", 422)


async def render(request: Request) -> Response:
    """`POST /ui/render` `{"items": [{"kind": "markdown"|"code"|"diff", ...}]}` → `{"html": [...]}`.

    `markdown` takes `text`; `code` takes `text` and an optional `path` (to guess the
    language); `diff` takes `old`, `new` and an optional `path`. The HTML is safe to insert.
    """
    try:
        body = await request.json()
    except ValueError:
        raise ApiError("the body must be JSON", 422) from None
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ApiError("the body must be {\"items\": [...]}", 422)
    if len(items) > MAX_RENDER_ITEMS:
        raise ApiError(f"at most {MAX_RENDER_ITEMS} items per request, not {len(items)}", 422)
    return JSONResponse({"html": [_render(item, f"items[{n}]") for n, item in enumerate(items)]})


routes = [
    Route("/", index, methods=["GET"]),
    Route("/ui/render", render, methods=["POST"]),
    Route("/ui/{name}", static, methods=["GET"]),
]
