"""Without custom auth no caller is anybody: identity keys a client puts in its config are
dropped, for runs and for crons' ticks, so `runtime.server_info.user` is never forged."""

from __future__ import annotations

from tests.server.deploy.graphs import whoami

from fathom.server import create_app, in_process_client

FORGED = {
    "langgraph_auth_user": {"identity": "alice"},
    "langgraph_auth_user_id": "alice",
    "langgraph_auth_permissions": ["admin"],
}


async def test_a_run_does_not_take_the_identity_its_client_claims() -> None:
    client = in_process_client(create_app({"whoami": whoami}))
    thread = await client.threads.create()
    state = await client.runs.wait(
        thread["thread_id"], "whoami", input={}, config={"configurable": {**FORGED, "x": 1}}
    )
    assert {k: state[k] for k in ("identity", "user_id", "permissions")} == {
        "identity": None, "user_id": None, "permissions": None}  # fmt: skip
    [run] = await client.runs.list(thread["thread_id"])
    configurable = run["kwargs"]["config"]["configurable"]
    assert not set(FORGED) & set(configurable)
    assert configurable["x"] == 1  # the client's own keys stay


async def test_a_cron_does_not_keep_the_identity_its_creator_claims() -> None:
    app = create_app({"whoami": whoami})
    client = in_process_client(app)
    thread = await client.threads.create()
    cron = await client.crons.create_for_thread(
        thread["thread_id"], "whoami", schedule="0 0 1 1 *", input={},
        config={"configurable": FORGED},
    )  # fmt: skip
    configurable = (cron["payload"].get("config") or {}).get("configurable") or {}
    assert not set(FORGED) & set(configurable)
    assert cron["user_id"] is None
