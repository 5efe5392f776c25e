"""Caller identity over HTTP, on both servers: `langgraph.json`'s `auth` with the same auth.py.

A copy of the shared deployment gets `auth_deploy/auth.py` (alice and bob by bearer token,
owners on threads and assistants, store namespaces per user); the real `langgraph-sdk` client
talks to `fathom serve` and `langgraph dev` serving it. The tests assert what each user sees
and may do, and that the identity reaches a graph node.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError
from tests.postgres import postgres_uri
from tests.server.servers import (
    SERVER_KINDS,
    ServerProcess,
    copy_deployment,
    fathom_binary,
    fathom_serve_available,
    langgraph_dev_binary,
)
from tests.server.support import Gate, eventually, wait_started, wait_status
from tests.system_requirements import needs

__all__ = ["postgres_uri"]  # the fixture, imported for the replica test

AUTH_FILE = Path(__file__).resolve().parent / "auth_deploy" / "auth.py"

Clients = Callable[[str], LangGraphClient]


@pytest.fixture(scope="module", params=SERVER_KINDS)
def auth_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server of each kind serving the deployment with `auth.py` as its `auth`."""
    kind: str = request.param
    if kind == "langgraph-dev" and langgraph_dev_binary() is None:
        pytest.skip(needs("langgraph dev"))
    if kind == "fathom" and not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = copy_deployment(tmp_path_factory.mktemp(f"auth-{kind}") / "deploy")
    shutil.copy(AUTH_FILE, workdir / "auth.py")
    config_path = workdir / "langgraph.json"
    config = json.loads(config_path.read_text())
    config["auth"] = {"path": "./auth.py:auth", "disable_studio_auth": True}
    config_path.write_text(json.dumps(config))
    process = ServerProcess(kind=kind, workdir=workdir)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def clients(auth_server: ServerProcess) -> AsyncIterator[Clients]:
    """`clients("alice")`: an SDK client sending that user's bearer token; closed after."""
    made: list[LangGraphClient] = []

    def make(user: str) -> LangGraphClient:
        sdk = get_client(
            url=auth_server.url, api_key=None, headers={"Authorization": f"Bearer {user}-token"}
        )
        made.append(sdk)
        return sdk

    try:
        yield make
    finally:
        for sdk in made:
            await sdk.http.client.aclose()


async def _status(call: Awaitable[Any]) -> int:
    """The HTTP status a client call failed with (the SDK raises different error types)."""
    try:
        await call
    except httpx.HTTPStatusError as error:
        return error.response.status_code
    return 200


def _tag() -> dict[str, Any]:
    return {"test_tag": uuid.uuid4().hex}


async def test_a_thread_gets_its_creators_identity_as_owner(clients: Clients) -> None:
    alice = clients("alice")

    thread = await alice.threads.create(metadata=_tag())

    assert thread["metadata"]["owner"] == "alice"
    assert (await alice.threads.get(thread["thread_id"]))["metadata"]["owner"] == "alice"


async def test_another_users_thread_is_not_found_on_every_thread_route(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]
    run_id = (await alice.runs.create(thread_id, "whoami", input={}))["run_id"]
    await alice.runs.join(thread_id, run_id)

    calls = {
        "get run": lambda: bob.runs.get(thread_id, run_id),
        "join run": lambda: bob.runs.join(thread_id, run_id),
        "get": lambda: bob.threads.get(thread_id),
        "patch": lambda: bob.threads.update(thread_id, metadata={"owner": "bob"}),
        "state": lambda: bob.threads.get_state(thread_id),
        "history": lambda: bob.threads.get_history(thread_id),
        "copy": lambda: bob.threads.copy(thread_id),
        "list runs": lambda: bob.runs.list(thread_id),
    }
    statuses = {name: await _status(call()) for name, call in calls.items()}

    # langgraph dev answers 409 to a copy of a thread it cannot find (hidden or unknown alike).
    assert statuses.pop("copy") in (404, 409)
    assert statuses == dict.fromkeys(statuses, 404)
    assert (await alice.threads.get(thread_id))["metadata"]["owner"] == "alice"
    assert len(await alice.runs.list(thread_id)) == 1


async def test_search_and_count_list_only_the_callers_threads(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    tag = _tag()
    mine = await alice.threads.create(metadata=tag)
    theirs = await bob.threads.create(metadata=tag)

    alice_found = await alice.threads.search(metadata=tag, limit=100)
    bob_found = await bob.threads.search(metadata=tag, limit=100)

    assert [t["thread_id"] for t in alice_found] == [mine["thread_id"]]
    assert [t["thread_id"] for t in bob_found] == [theirs["thread_id"]]
    assert await alice.threads.count(metadata=tag) == 1
    assert await bob.threads.count(metadata=tag) == 1


async def test_a_user_cannot_start_a_run_on_another_users_thread(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]

    assert await _status(bob.runs.create(thread_id, "whoami", input={})) == 404
    assert await _status(bob.runs.wait(thread_id, "whoami", input={})) == 404

    assert await alice.runs.list(thread_id) == []


async def test_the_graph_sees_the_callers_identity(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]

    on_thread = await alice.runs.wait(thread_id, "whoami", input={})
    stateless = await bob.runs.wait(None, "whoami", input={})

    assert isinstance(on_thread, dict) and isinstance(stateless, dict)
    assert on_thread["identity"] == on_thread["user_id"] == "alice"
    assert on_thread["permissions"] == ["threads:delete"]
    assert stateless["identity"] == stateless["user_id"] == "bob"


async def test_a_client_cannot_claim_another_identity_in_the_run_config(clients: Clients) -> None:
    bob = clients("bob")
    forged = {"langgraph_auth_user_id": "alice", "langgraph_auth_user": {"identity": "alice"}}

    try:
        values = await bob.runs.wait(None, "whoami", input={}, config={"configurable": forged})
    except httpx.HTTPStatusError as error:  # refusing the forged keys is also safe
        assert error.response.status_code in (400, 403, 422)
        return

    assert isinstance(values, dict)
    assert values["identity"] == values["user_id"] == "bob"


async def test_a_request_without_a_token_is_401_and_ok_stays_open(
    auth_server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=auth_server.url) as http:
        missing = await http.post("/threads/search", json={})
        wrong = await http.post(
            "/threads/search", json={}, headers={"Authorization": "Bearer mallory-token"}
        )
        ok = await http.get("/ok")

    assert missing.status_code == 401
    assert "bearer token" in missing.json()["detail"]
    assert wrong.status_code == 401
    assert ok.status_code == 200


async def test_a_handler_returning_false_is_403_and_changes_nothing(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    bobs = (await bob.threads.create(metadata=_tag()))["thread_id"]
    alices = (await alice.threads.create(metadata=_tag()))["thread_id"]

    with pytest.raises(PermissionDeniedError):
        await bob.threads.delete(bobs)  # bob lacks threads:delete
    with pytest.raises(NotFoundError):
        await alice.threads.delete(bobs)  # alice may delete, but only her own
    await alice.threads.delete(alices)

    assert (await bob.threads.get(bobs))["metadata"]["owner"] == "bob"
    with pytest.raises(NotFoundError):
        await alice.threads.get(alices)


async def test_created_assistants_are_visible_to_their_owner_only(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    created = await alice.assistants.create("agent", metadata=_tag(), name="alices")

    assert created["metadata"]["owner"] == "alice"
    assert (await alice.assistants.get(created["assistant_id"]))["name"] == "alices"
    with pytest.raises(NotFoundError):
        await bob.assistants.get(created["assistant_id"])
    bob_ids = [a["assistant_id"] for a in await bob.assistants.search(limit=100)]
    assert created["assistant_id"] not in bob_ids


async def test_store_handlers_guard_namespaces(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    namespace = ["alice", uuid.uuid4().hex]

    await alice.store.put_item(namespace, "note", {"text": "hi"})

    item = await alice.store.get_item(namespace, "note")
    assert item is not None and item["value"] == {"text": "hi"}
    with pytest.raises(PermissionDeniedError):
        await bob.store.get_item(namespace, "note")
    with pytest.raises(PermissionDeniedError):
        await bob.store.put_item(namespace, "note", {"text": "overwritten"})
    with pytest.raises(PermissionDeniedError):
        await bob.store.search_items(["alice"])
    found = await alice.store.search_items(namespace)
    assert [i["key"] for i in found["items"]] == ["note"]
    again = await alice.store.get_item(namespace, "note")
    assert again is not None and again["value"] == {"text": "hi"}


def _auth_workdir(tmp_path: Path) -> Path:
    workdir = copy_deployment(tmp_path / "deploy")
    shutil.copy(AUTH_FILE, workdir / "auth.py")
    config = json.loads((workdir / "langgraph.json").read_text())
    config["auth"] = {"path": "./auth.py:auth"}
    (workdir / "langgraph.json").write_text(json.dumps(config))
    return workdir


async def test_on_replicas_the_identity_survives_the_run_queue(
    tmp_path: Path, postgres_uri: str
) -> None:
    """Two `fathom serve` replicas on one PostgreSQL: a run queued as JSON still knows its
    caller wherever it executes, and either replica hides alice's thread from bob."""
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = _auth_workdir(tmp_path)
    replicas = [
        ServerProcess(kind="fathom", workdir=workdir, name=name,
                      extra_args=("--database", postgres_uri))
        for name in ("-a", "-b")
    ]  # fmt: skip
    made: list[LangGraphClient] = []

    def client(replica: ServerProcess, user: str) -> LangGraphClient:
        made.append(get_client(url=replica.url, api_key=None,
                               headers={"Authorization": f"Bearer {user}-token"}))  # fmt: skip
        return made[-1]

    try:
        for replica in replicas:
            replica.start()
        alice_a, alice_b = client(replicas[0], "alice"), client(replicas[1], "alice")
        bob_b = client(replicas[1], "bob")
        thread_id = (await alice_a.threads.create(metadata=_tag()))["thread_id"]
        values = [await sdk.runs.wait(thread_id, "whoami", input={}) for sdk in (alice_a, alice_b)]
        bob_get = await _status(bob_b.threads.get(thread_id))
        bob_run = await _status(bob_b.runs.wait(thread_id, "whoami", input={}))
    finally:
        for sdk in made:
            await sdk.http.client.aclose()
        for replica in replicas:
            replica.stop()

    for answer in values:
        assert isinstance(answer, dict)
        assert answer["identity"] == answer["user_id"] == "alice"
    assert (bob_get, bob_run) == (404, 404)


def test_with_an_api_key_too_the_key_is_checked_first(tmp_path: Path) -> None:
    """`fathom serve --api-key` with `auth`: no key is refused before the handler runs; with the
    key, the handler names the caller (langgraph dev has no API key option)."""
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = _auth_workdir(tmp_path)
    process = ServerProcess(kind="fathom", workdir=workdir, extra_args=("--api-key", "k3y"))
    process.start()
    try:
        bearer = {"Authorization": "Bearer alice-token"}
        with httpx.Client(base_url=process.url) as http:
            no_key = http.post("/threads", json={}, headers=bearer)
            no_token = http.post("/threads", json={}, headers={"x-api-key": "k3y"})
            both = http.post("/threads", json={}, headers={"x-api-key": "k3y", **bearer})
    finally:
        process.stop()

    # Without x-api-key the bearer token is taken for the key, and it is the wrong one.
    assert no_key.status_code == 403 and "API key" in no_key.json()["detail"]
    assert no_token.status_code == 401 and "bearer token" in no_token.json()["detail"]
    assert both.status_code == 200 and both.json()["metadata"]["owner"] == "alice"


async def test_a_stateless_run_is_joined_by_its_caller_only(
    auth_server: ServerProcess,
) -> None:
    """fathom's Agent Protocol run routes (`/runs/{run_id}/wait`, which langgraph dev does
    not serve): the run's thread carries its caller as owner."""
    if auth_server.kind != "fathom":
        pytest.skip("langgraph dev has no /runs/{run_id} routes")
    alice = {"Authorization": "Bearer alice-token"}
    bob = {"Authorization": "Bearer bob-token"}
    body = {"assistant_id": "whoami", "input": {}, "on_completion": "keep"}
    async with httpx.AsyncClient(base_url=auth_server.url, timeout=60) as http:
        run = (await http.post("/runs", json=body, headers=alice)).json()
        mine = await http.get(f"/runs/{run['run_id']}/wait", headers=alice)
        theirs = await http.get(f"/runs/{run['run_id']}/wait", headers=bob)
        thread = await http.get(f"/threads/{run['thread_id']}", headers=alice)

    assert mine.status_code == 200 and mine.json()["identity"] == "alice"
    assert theirs.status_code == 404
    assert thread.json()["metadata"]["owner"] == "alice"


def test_custom_auth_lets_fathom_serve_listen_beyond_loopback_without_a_key(
    tmp_path: Path,
) -> None:
    """Without `auth`, `--host 0.0.0.0` needs `--api-key`; the handlers guard the server too."""
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    process = ServerProcess(kind="fathom", workdir=_auth_workdir(tmp_path),
                            extra_args=("--host", "0.0.0.0"))  # fmt: skip
    process.start()
    try:
        with httpx.Client(base_url=process.url) as http:
            anonymous = http.post("/threads", json={})
    finally:
        process.stop()

    assert anonymous.status_code == 401
    assert "auth handlers from langgraph.json" in process.log()


def test_an_auth_without_an_authenticate_handler_may_not_listen_beyond_loopback(
    tmp_path: Path,
) -> None:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = _auth_workdir(tmp_path)
    (workdir / "auth.py").write_text(
        "from langgraph_sdk import Auth\n\nauth = Auth()\n\n\n"
        "@auth.on\nasync def allow(ctx, value):\n    return True\n"
    )
    result = subprocess.run(
        [str(fathom_binary()), "serve", "--config", str(workdir / "langgraph.json"),
         "--host", "0.0.0.0", "--port", "0"],
        cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert result.returncode == 2
    assert "no @auth.authenticate handler" in result.stderr


EVERY_TWO_SECONDS = "* * * * * */2"
"""croniter's sixth field (seconds), which both servers accept: a tick comes within seconds."""
YEARLY = "0 0 1 1 *"


async def test_another_users_cron_is_unknown_to_every_cron_route(clients: Clients) -> None:
    alice, bob = clients("alice"), clients("bob")
    tag = _tag()
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]
    cron: Any = await alice.crons.create_for_thread(
        thread_id, "whoami", schedule=YEARLY, input={}, metadata=tag
    )
    cron_id = cron["cron_id"]

    calls = {
        "get": lambda: bob.http.get(f"/runs/crons/{cron_id}"),
        "update": lambda: bob.crons.update(cron_id, schedule="0 0 2 1 *"),
        "delete": lambda: bob.crons.delete(cron_id),
        "create on her thread": lambda: bob.crons.create_for_thread(
            thread_id, "whoami", schedule=YEARLY, input={}
        ),
    }
    statuses = {name: await _status(call()) for name, call in calls.items()}

    assert statuses == dict.fromkeys(statuses, 404)
    assert cron["metadata"]["owner"] == "alice" and cron["user_id"] == "alice"
    assert await bob.crons.search(metadata=tag) == []
    assert await bob.crons.count(metadata=tag) == 0
    assert [c["cron_id"] for c in await alice.crons.search(metadata=tag)] == [cron_id]
    assert await alice.crons.count(metadata=tag) == 1
    kept = await alice.http.get(f"/runs/crons/{cron_id}")
    assert kept["schedule"] == YEARLY
    await alice.crons.delete(cron_id)
    assert await _status(alice.http.get(f"/runs/crons/{cron_id}")) == 404


async def test_a_cron_update_cannot_change_whom_its_ticks_run_as(
    clients: Clients, auth_server: ServerProcess
) -> None:
    alice = clients("alice")
    cron: Any = await alice.crons.create("whoami", schedule=YEARLY, input={}, metadata=_tag())
    forged = {"langgraph_auth_user_id": "bob", "langgraph_auth_user": {"identity": "bob"}}

    try:
        await alice.crons.update(cron["cron_id"], config={"configurable": forged})
    except httpx.HTTPStatusError as error:  # refusing the forged keys is also safe
        assert error.response.status_code in (400, 403, 422)
    kept = await alice.http.get(f"/runs/crons/{cron['cron_id']}")
    await alice.crons.delete(cron["cron_id"])

    assert kept["user_id"] == "alice"
    if auth_server.kind == "fathom":  # where fathom keeps the creator for the ticks
        configurable = kept["payload"]["config"]["configurable"]
        assert configurable["langgraph_auth_user_id"] == "alice"
        assert configurable["langgraph_auth_user"]["identity"] == "alice"


async def test_a_crons_tick_runs_as_the_user_who_created_it(clients: Clients) -> None:
    alice = clients("alice")
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]
    cron: Any = await alice.crons.create_for_thread(
        thread_id, "whoami", schedule=EVERY_TWO_SECONDS, input={}
    )

    async def ran() -> bool:
        runs = await alice.runs.list(thread_id, limit=100)
        return any(run["status"] == "success" for run in runs)

    try:
        await eventually(ran, "a tick's run to succeed")
    finally:
        await alice.crons.delete(cron["cron_id"])
    values = (await alice.threads.get_state(thread_id))["values"]
    assert isinstance(values, dict)
    assert values["identity"] == values["user_id"] == "alice"


async def test_batch_runs_belong_to_their_caller_and_a_refused_item_is_403(
    clients: Clients, auth_server: ServerProcess
) -> None:
    alice, bob = clients("alice"), clients("bob")
    tag = _tag()
    item: Any = {"assistant_id": "whoami", "input": {}, "metadata": tag, "on_completion": "keep"}

    runs = await alice.runs.create_batch([item, item])
    refused_tag = _tag()
    refused: Any = [
        {**item, "metadata": refused_tag},
        {**item, "metadata": {**refused_tag, "refuse": True}},
    ]
    refusal = await _status(alice.runs.create_batch(refused))

    assert refusal == 403
    for run in runs:
        assert await _status(bob.runs.get(run["thread_id"], run["run_id"])) == 404
        await alice.runs.join(run["thread_id"], run["run_id"])
        values = (await alice.threads.get_state(run["thread_id"]))["values"]
        assert isinstance(values, dict) and values["identity"] == "alice"
    owners = {(t["metadata"] or {})["owner"] for t in await alice.threads.search(metadata=tag)}
    assert owners == {"alice"}
    if auth_server.kind == "fathom":  # langgraph dev starts the items it allowed
        assert await alice.threads.search(metadata=refused_tag) == []


async def test_prune_deletes_only_the_threads_the_caller_may_delete(
    clients: Clients, auth_server: ServerProcess
) -> None:
    alice, bob = clients("alice"), clients("bob")
    mine = (await alice.threads.create(metadata=_tag()))["thread_id"]
    other = (await alice.threads.create(metadata=_tag()))["thread_id"]
    theirs = (await bob.threads.create(metadata=_tag()))["thread_id"]

    assert await _status(bob.threads.prune([theirs])) == 403  # bob lacks threads:delete
    if auth_server.kind == "fathom":  # a hidden thread counts as unknown
        assert await alice.threads.prune([mine, theirs]) == {"pruned_count": 1}
    else:  # langgraph dev refuses the whole call when one thread is hidden
        assert await _status(alice.threads.prune([mine, theirs])) == 404
        assert await alice.threads.prune([mine]) == {"pruned_count": 1}
    assert await alice.threads.prune([other]) == {"pruned_count": 1}

    assert await _status(alice.threads.get(mine)) == 404
    assert await _status(alice.threads.get(other)) == 404
    assert ((await bob.threads.get(theirs))["metadata"] or {})["owner"] == "bob"


async def test_another_users_thread_stream_is_not_found(
    clients: Clients, auth_server: ServerProcess
) -> None:
    alice, bob = clients("alice"), clients("bob")
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]
    seen: list[Any] = []

    async def first_event() -> None:
        async with asyncio.timeout(60):  # bounds a hang only
            async for part in await bob.threads.join_stream(thread_id):
                seen.append(part)
                return

    status = await _status(first_event())

    if auth_server.kind == "fathom":
        assert status == 404 and seen == []
    else:  # langgraph dev opens the stream, then sends the 404 as its only event
        assert status == 200 and [p.event for p in seen] == ["error"]
        assert "404" in str(seen[0].data)


async def test_protocol_commands_and_events_need_the_thread_to_be_visible(
    auth_server: ServerProcess, clients: Clients
) -> None:
    """fathom's answers to a refused command (langgraph dev words its errors otherwise)."""
    if auth_server.kind != "fathom":
        pytest.skip("fathom's own command errors")
    alice = clients("alice")
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]
    start = {"id": 1, "method": "run.start", "params": {"assistant_id": "whoami", "input": {}}}
    respond = {
        "id": 2,
        "method": "input.respond",
        "params": {"interrupt_id": "x", "response": "y", "assistant_id": "whoami"},
    }
    bob = {"Authorization": "Bearer bob-token"}
    async with httpx.AsyncClient(base_url=auth_server.url, timeout=60) as http:
        refused = [
            (await http.post(f"/threads/{thread_id}/commands", json=c, headers=bob)).json()
            for c in (start, respond)
        ]
        events = await http.post(
            f"/threads/{thread_id}/stream/events", json={"channels": ["values"]}, headers=bob
        )
        started = await http.post(
            f"/threads/{thread_id}/commands",
            json=start,
            headers={"Authorization": "Bearer alice-token"},
        )

    assert [r["error"] for r in refused] == ["no_such_run", "no_such_run"]
    assert events.status_code == 404
    run_id = started.json()["result"]["run_id"]
    await alice.runs.join(thread_id, run_id)
    values = (await alice.threads.get_state(thread_id))["values"]
    assert isinstance(values, dict) and values["identity"] == "alice"
    assert [r["run_id"] for r in await alice.runs.list(thread_id)] == [run_id]


async def test_cancel_many_leaves_another_users_runs_alone(
    clients: Clients, new_gate: Callable[[], Gate]
) -> None:
    alice, bob = clients("alice"), clients("bob")
    gate = new_gate()
    thread_id = (await alice.threads.create(metadata=_tag()))["thread_id"]
    run = await alice.runs.create(thread_id, "gated", input=gate.input("held"))
    await wait_started(gate)
    await wait_status(alice, thread_id, run["run_id"], "running")

    by_ids = await _status(bob.runs.cancel_many(thread_id=thread_id, run_ids=[run["run_id"]]))

    assert by_ids == 404
    assert (await alice.runs.get(thread_id, run["run_id"]))["status"] == "running"
    gate.release()
    await alice.runs.join(thread_id, run["run_id"])
    assert (await alice.runs.get(thread_id, run["run_id"]))["status"] == "success"
