"""Store routes: put, get, delete, search items and list namespaces (``/store/...``).

The namespace prefix ``fathom_server`` holds the server's own records; these routes refuse it
(422) and hide it from search and namespace listings.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fathom.server.auth.authorize import Filter, authorize
from fathom.server.context import server_of
from fathom.server.errors import Unprocessable, json_response
from fathom.server.records import RESERVED_PREFIX
from fathom.server.validation import opt_dict, opt_int, opt_str, read_json

__all__ = ["routes"]


def _namespace(value: Any, key: str = "namespace", *, allow_empty: bool = False) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(".") if value else []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise Unprocessable(f"'{key}' must be a list of non-empty strings")
    if not value and not allow_empty:
        raise Unprocessable(f"'{key}' must not be empty")
    if value and value[0] == RESERVED_PREFIX:
        raise Unprocessable(f"Namespace {RESERVED_PREFIX!r} is reserved for the server")
    return tuple(value)


async def _authorize(request: Request, action: str, value: dict[str, Any]) -> Filter | None:
    """The ``store`` handler for ``action``; then ``value["namespace"]`` is checked again, since
    a handler may change it (prefix it with the caller's identity, say)."""
    flt = await authorize(request, "store", action, value)
    for key in ("namespace", "suffix"):
        if key in value and value[key] is not None:
            value[key] = _namespace(list(value[key]), key, allow_empty=True)
    return flt


def _with_filter(flt: dict[str, Any] | None, auth_filter: Filter | None) -> dict[str, Any] | None:
    """The client's item filter narrowed by the handler's (the handler's wins on a shared key)."""
    if not auth_filter:
        return flt
    return {**(flt or {}), **auth_filter}


def _item(item: Any) -> dict[str, Any]:
    out = item.dict()
    out["namespace"] = list(item.namespace)
    return out


async def put_item(request: Request) -> Response:
    """``PUT /store/items``: ``namespace``, ``key``, ``value``, optional ``index``, ``ttl``."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    namespace = _namespace(body.get("namespace"))
    key = opt_str(body, "key")
    value = opt_dict(body, "value")
    if not key or value is None:
        raise Unprocessable("'key' (string) and 'value' (object) are required")
    event = {"namespace": namespace, "key": key, "value": value,
             "index": body.get("index"), "ttl": body.get("ttl")}  # fmt: skip
    await _authorize(request, "put", event)
    kwargs: dict[str, Any] = {}
    if event["ttl"] is not None:
        kwargs["ttl"] = event["ttl"]
    await server.store.aput(
        event["namespace"], event["key"], event["value"], index=event["index"], **kwargs
    )
    return Response(status_code=204)


async def get_item(request: Request) -> Response:
    """``GET /store/items?namespace=a.b&key=k``."""
    server = await server_of(request)
    namespace = _namespace(request.query_params.get("namespace", ""))
    key = request.query_params.get("key")
    if not key:
        raise Unprocessable("Query parameter 'key' is required")
    event: dict[str, Any] = {"namespace": namespace, "key": key}
    await _authorize(request, "get", event)
    item = await server.store.aget(event["namespace"], event["key"])
    # A missing item is ``null`` (200), as LangGraph's server answers; the SDK returns None.
    return json_response(_item(item) if item is not None else None)


async def delete_item(request: Request) -> Response:
    """``DELETE /store/items`` with ``{"namespace", "key"}``."""
    server = await server_of(request)
    body = await read_json(request, allow_empty=False)
    key = opt_str(body, "key")
    if not key:
        raise Unprocessable("'key' is required")
    event = {"namespace": _namespace(body.get("namespace")), "key": key}
    await _authorize(request, "delete", event)
    await server.store.adelete(event["namespace"], event["key"])
    return Response(status_code=204)


async def search_items(request: Request) -> Response:
    """``POST /store/items/search``: ``namespace_prefix``, ``filter``, ``query``, paging."""
    server = await server_of(request)
    body = await read_json(request)
    prefix = _namespace(body.get("namespace_prefix") or [], "namespace_prefix", allow_empty=True)
    limit, offset = opt_int(body, "limit", 10), opt_int(body, "offset", 0)
    query, flt = opt_str(body, "query"), opt_dict(body, "filter")
    event = {"namespace": prefix, "filter": flt, "limit": limit, "offset": offset, "query": query}
    flt = _with_filter(event["filter"], await _authorize(request, "search", event))
    prefix, limit, offset = event["namespace"], event["limit"], event["offset"]
    if prefix:
        items = await server.store.asearch(
            prefix, query=query, filter=flt, limit=limit, offset=offset
        )
        return json_response({"items": [_item(i) for i in items]})
    # Searching every namespace: page past the server's own records.
    visible: list[Any] = []
    cursor = 0
    while len(visible) < offset + limit:
        page = await server.store.asearch((), query=query, filter=flt, limit=500, offset=cursor)
        visible.extend(i for i in page if not i.namespace or i.namespace[0] != RESERVED_PREFIX)
        if len(page) < 500:
            break
        cursor += 500
    return json_response({"items": [_item(i) for i in visible[offset : offset + limit]]})


async def list_namespaces(request: Request) -> Response:
    """``POST /store/namespaces``: ``prefix``, ``suffix``, ``max_depth``, paging."""
    server = await server_of(request)
    body = await read_json(request)
    prefix = _namespace(body.get("prefix") or [], "prefix", allow_empty=True)
    suffix = _namespace(body.get("suffix") or [], "suffix", allow_empty=True)
    limit, offset = opt_int(body, "limit", 100), opt_int(body, "offset", 0)
    max_depth = body.get("max_depth")
    event = {"namespace": prefix or None, "suffix": suffix or None, "max_depth": max_depth,
             "limit": limit, "offset": offset}  # fmt: skip
    await _authorize(request, "list_namespaces", event)
    prefix, suffix, max_depth = event["namespace"], event["suffix"], event["max_depth"]
    found = await server.store.alist_namespaces(
        prefix=prefix or None, suffix=suffix or None, max_depth=max_depth, limit=10_000, offset=0
    )
    visible = [list(ns) for ns in found if ns and ns[0] != RESERVED_PREFIX]
    return json_response({"namespaces": visible[offset : offset + limit]})


routes = [
    Route("/store/items", put_item, methods=["PUT"]),
    Route("/store/items", get_item, methods=["GET"]),
    Route("/store/items", delete_item, methods=["DELETE"]),
    Route("/store/items/search", search_items, methods=["POST"]),
    Route("/store/namespaces", list_namespaces, methods=["POST"]),
]
