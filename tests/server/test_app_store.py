"""Store routes of fathom's server through the real langgraph-sdk client."""

from __future__ import annotations

import httpx
from tests.server.app_support import GatedGraph

from fathom.server import create_app, in_process_client


async def test_put_get_search_list_delete() -> None:
    client = in_process_client(create_app({"g": GatedGraph().graph()}))
    await client.store.put_item(["users", "u1"], "prefs", {"theme": "dark"})
    await client.store.put_item(["users", "u2"], "prefs", {"theme": "light"})
    item = await client.store.get_item(["users", "u1"], "prefs")
    assert item["value"] == {"theme": "dark"} and item["namespace"] == ["users", "u1"]
    found = await client.store.search_items(["users"], filter={"theme": "light"})
    assert [i["namespace"] for i in found["items"]] == [["users", "u2"]]
    spaces = await client.store.list_namespaces(prefix=["users"])
    assert sorted(spaces["namespaces"]) == [["users", "u1"], ["users", "u2"]]
    await client.store.delete_item(["users", "u1"], "prefs")
    assert await client.store.get_item(["users", "u1"], "prefs") is None


async def test_server_records_are_hidden_and_refused() -> None:
    app = create_app({"g": GatedGraph().graph()})
    client = in_process_client(app)
    await client.threads.create()
    await client.store.put_item(["mine"], "k", {"v": 1})
    assert (await client.store.list_namespaces())["namespaces"] == [["mine"]]
    assert [i["key"] for i in (await client.store.search_items([]))["items"]] == ["k"]
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    put = await http.put(
        "/store/items", json={"namespace": ["fathom_server", "threads"], "key": "x", "value": {}}
    )
    assert put.status_code == 422 and "reserved" in put.json()["detail"]
    bad = await http.put("/store/items", json={"namespace": ["a"], "key": "k", "value": 3})
    assert bad.status_code == 422
