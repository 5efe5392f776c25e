"""`create_app` serves each assistant over A2A: a2a-sdk's real client against real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.helpers.proto_helpers import (
    get_artifact_text,
    get_message_text,
    new_data_part,
    new_message,
)
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from langgraph_sdk import get_client
from tests.protocols.a2a.support import (
    Gated,
    a2a_client,
    approval_agent,
    echo_agent,
    eventually,
    serve,
    user_message,
)


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, Gated]]:
    gated = Gated()
    graphs = {"echo": echo_agent(), "approver": approval_agent(), "gated": gated.graph()}
    async with serve(graphs) as (url, _app):
        yield url, gated
        gated.release.set()


async def _send(url: str, request: SendMessageRequest) -> Task:
    async with a2a_client(url) as client:
        events = [event async for event in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


# ------------------------------------------------------------------------------ card


async def test_agent_card_names_the_assistant_its_tools_and_its_jsonrpc_url(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    async with httpx.AsyncClient() as http:
        res = await http.get(f"{url}/a2a/approver/.well-known/agent-card.json")
    assert res.status_code == 200
    card = res.json()
    assert card["name"] == "approver"
    assert card["description"] == "approver assistant"
    interfaces = card["supportedInterfaces"]
    jsonrpc = {"url": f"{url}/a2a/approver", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    assert jsonrpc in interfaces
    assert card["capabilities"]["streaming"] is True
    skill_ids = [skill["id"] for skill in card["skills"]]
    assert skill_ids[0] == "approver"
    assert "tool:send_email" in skill_ids


# ------------------------------------------------------------------------------ send


async def test_send_completes_a_task_with_the_agent_answer_as_artifact_and_message(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    task = await _send(f"{url}/a2a/echo", user_message("hello"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(task.artifacts[0]) == "echo: hello"
    assert get_message_text(task.status.message) == "echo: hello"


async def test_a_context_is_a_thread_that_the_next_task_continues(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    first = await _send(f"{url}/a2a/echo", user_message("one"))
    second = await _send(f"{url}/a2a/echo", user_message("two", context_id=first.context_id))
    assert second.context_id == first.context_id and second.id != first.id
    lg = get_client(url=url)
    thread = await lg.threads.get(first.context_id)
    assert thread["metadata"]["a2a_context_id"] == first.context_id
    texts = [m["content"] for m in thread["values"]["messages"]]
    assert texts == ["one", "echo: one", "two", "echo: two"]
    runs = await lg.runs.list(first.context_id)
    assert sorted(r["metadata"]["a2a_task_id"] for r in runs) == sorted([first.id, second.id])
    assert {r["status"] for r in runs} == {"success"}


async def test_a_context_id_naming_a_thread_made_through_the_api_continues_that_thread(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    lg = get_client(url=url)
    await lg.threads.create(thread_id="my-chat-1")
    first = await _send(f"{url}/a2a/echo", user_message("a", context_id="my-chat-1"))
    second = await _send(f"{url}/a2a/echo", user_message("b", context_id="my-chat-1"))
    assert first.context_id == second.context_id == "my-chat-1"
    assert get_message_text(second.status.message) == "echo: b"
    thread = await lg.threads.get("my-chat-1")
    assert [m["content"] for m in thread["values"]["messages"]] == ["a", "echo: a", "b", "echo: b"]


# ---------------------------------------------------------------------------- stream


async def test_stream_sends_the_task_then_working_then_the_answer_and_completion(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    async with a2a_client(f"{url}/a2a/echo", streaming=True) as client:
        events: list[StreamResponse] = [e async for e in client.send_message(user_message("hi"))]
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    artifacts = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [get_artifact_text(a.artifact) for a in artifacts] == ["echo: hi"]
    assert kinds.index("artifact_update") < len(kinds) - 1  # the answer before completion


# -------------------------------------------------------------------------- approval


async def test_approval_becomes_input_required_and_approve_resumes_to_completion(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    agent = f"{url}/a2a/approver"
    waiting = await _send(agent, user_message("mail bob"))
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    prompt = get_message_text(waiting.status.message)
    assert "send_email" in prompt and '"to": "bob"' in prompt and "approve" in prompt
    lg = get_client(url=url)
    assert (await lg.threads.get(waiting.context_id))["status"] == "interrupted"

    done = await _send(
        agent, user_message("approve", context_id=waiting.context_id, task_id=waiting.id)
    )
    assert done.id == waiting.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(done.status.message) == "done: email sent to bob"
    assert (await lg.threads.get(waiting.context_id))["status"] == "idle"


async def test_reject_in_text_resumes_with_the_reason_and_the_tool_does_not_run(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    agent = f"{url}/a2a/approver"
    waiting = await _send(agent, user_message("mail bob"))
    done = await _send(
        agent,
        user_message("Reject: not today", context_id=waiting.context_id, task_id=waiting.id),
    )
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    answer = get_message_text(done.status.message)
    assert "email sent" not in answer and "not today" in answer


async def test_a_data_part_decision_resumes_the_approval(served: tuple[str, Gated]) -> None:
    url, _ = served
    agent = f"{url}/a2a/approver"
    waiting = await _send(agent, user_message("mail bob"))
    reply = new_message(
        [new_data_part({"decision": "edit", "args": {"to": "carol"}})],
        context_id=waiting.context_id,
        task_id=waiting.id,
        role=Role.ROLE_USER,
    )
    done = await _send(agent, SendMessageRequest(message=reply))
    answer = get_message_text(done.status.message)
    assert answer.startswith("done: ") and answer.endswith("email sent to carol")


async def test_an_unreadable_reply_keeps_the_task_waiting_and_says_what_is_accepted(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    agent = f"{url}/a2a/approver"
    waiting = await _send(agent, user_message("mail bob"))
    again = await _send(
        agent, user_message("hmm, maybe", context_id=waiting.context_id, task_id=waiting.id)
    )
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "Cannot read 'hmm, maybe' as a decision" in get_message_text(again.status.message)
    done = await _send(
        agent, user_message("yes", context_id=waiting.context_id, task_id=waiting.id)
    )
    assert get_message_text(done.status.message) == "done: email sent to bob"


async def test_a_new_task_in_a_context_waiting_for_approval_fails_naming_the_waiting_task(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    agent = f"{url}/a2a/approver"
    waiting = await _send(agent, user_message("mail bob"))
    other = await _send(agent, user_message("something else", context_id=waiting.context_id))
    assert other.status.state == TaskState.TASK_STATE_FAILED
    assert waiting.id in get_message_text(other.status.message)
    # The waiting task is intact and still answers.
    done = await _send(
        agent, user_message("approve", context_id=waiting.context_id, task_id=waiting.id)
    )
    assert done.status.state == TaskState.TASK_STATE_COMPLETED


# ---------------------------------------------------------------------------- cancel


async def test_cancel_stops_the_running_run_and_ends_the_task_canceled(
    served: tuple[str, Gated],
) -> None:
    url, gated = served
    agent = f"{url}/a2a/gated"
    async with a2a_client(agent, streaming=True) as client:
        stream = client.send_message(user_message("wait"))
        first = await anext(stream)
        task_id, context_id = first.task.id, first.task.context_id
        await eventually(lambda: gated.started == 1, "the gated node to start")
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        await stream.aclose()
        fetched = await client.get_task(GetTaskRequest(id=task_id))
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED
    assert gated.cancelled == 1
    lg = get_client(url=url)
    runs = await lg.runs.list(context_id)
    assert [r["status"] for r in runs] == ["interrupted"]


async def test_cancel_of_a_task_waiting_for_approval_lets_a_new_task_supersede_it(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    agent = f"{url}/a2a/approver"
    waiting = await _send(agent, user_message("mail bob"))
    async with a2a_client(agent) as client:
        cancelled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    fresh = await _send(agent, user_message("mail bob", context_id=waiting.context_id))
    assert fresh.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


# ------------------------------------------------------------------------- bad input


async def _rpc(url: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        if isinstance(body, bytes):
            return await http.post(url, content=body, headers=headers)
        return await http.post(url, json=body, headers=headers)


async def test_malformed_json_is_a_json_rpc_parse_error(served: tuple[str, Gated]) -> None:
    url, _ = served
    res = await _rpc(f"{url}/a2a/echo", b"{not json", {"content-type": "application/json"})
    assert res.status_code == 200
    assert res.json()["error"]["code"] == -32700


async def test_a_request_without_jsonrpc_fields_is_an_invalid_request_error(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    res = await _rpc(f"{url}/a2a/echo", {"id": 1, "params": {}})
    error = res.json()["error"]
    assert error["code"] == -32600


async def test_an_unknown_method_is_a_method_not_found_error(served: tuple[str, Gated]) -> None:
    url, _ = served
    res = await _rpc(f"{url}/a2a/echo", {"jsonrpc": "2.0", "id": 1, "method": "tasks/explode"})
    assert res.json()["error"]["code"] == -32601


async def test_bad_params_are_an_invalid_params_error(served: tuple[str, Gated]) -> None:
    url, _ = served
    body = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 7}}
    res = await _rpc(f"{url}/a2a/echo", body, {"A2A-Version": "1.0"})
    assert res.json()["error"]["code"] == -32602
    # The 0.3 method family rejects the same body as an invalid request, naming the field.
    body["method"] = "message/send"
    error = (await _rpc(f"{url}/a2a/echo", body)).json()["error"]
    assert error["code"] == -32600 and "params.message" in str(error)


async def test_tasks_get_of_an_unknown_task_is_a_task_not_found_error(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    body = {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": "no-such-task"}}
    res = await _rpc(f"{url}/a2a/echo", body)
    error = res.json()["error"]
    assert error["code"] == -32001 and res.json()["id"] == 3


async def test_a_message_naming_an_unknown_task_is_a_task_not_found_error(
    served: tuple[str, Gated],
) -> None:
    url, _ = served
    body = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "messageId": "m1",
                "taskId": "no-such-task",
                "contextId": "nowhere",
                "parts": [{"kind": "text", "text": "hi"}],
            }
        },
    }
    res = await _rpc(f"{url}/a2a/echo", body)
    assert res.json()["error"]["code"] == -32001
    lg = get_client(url=url)
    assert await lg.threads.search(metadata={"a2a_context_id": "nowhere"}) == []


async def test_an_unknown_assistant_is_a_404_with_detail(served: tuple[str, Gated]) -> None:
    url, _ = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}
    res = await _rpc(f"{url}/a2a/nobody", body)
    assert res.status_code == 404 and "nobody" in res.json()["detail"]
    async with httpx.AsyncClient() as http:
        card = await http.get(f"{url}/a2a/nobody/.well-known/agent-card.json")
    assert card.status_code == 404 and "nobody" in card.json()["detail"]


# --------------------------------------------------------------------- v0.3 methods


async def test_v03_message_send_over_plain_json_rpc_completes(served: tuple[str, Gated]) -> None:
    url, _ = served
    body = {
        "jsonrpc": "2.0",
        "id": "x",
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "messageId": "m2",
                "parts": [{"kind": "text", "text": "old client"}],
            }
        },
    }
    res = await _rpc(f"{url}/a2a/echo", body)
    result = res.json()["result"]
    assert result["kind"] == "task" and result["status"]["state"] == "completed"
    get = {"jsonrpc": "2.0", "id": "y", "method": "tasks/get", "params": {"id": result["id"]}}
    fetched = (await _rpc(f"{url}/a2a/echo", get)).json()["result"]
    assert fetched["status"]["state"] == "completed"
    assert fetched["artifacts"][0]["parts"][0]["text"] == "echo: old client"


async def test_an_api_key_guards_the_a2a_routes_too() -> None:
    async with serve({"echo": echo_agent()}, api_key="sekrit") as (url, _app):
        async with httpx.AsyncClient() as http:
            refused = await http.get(f"{url}/a2a/echo/.well-known/agent-card.json")
        assert refused.status_code in (401, 403) and "x-api-key" in refused.json()["detail"]
        task = await _send_with(f"{url}/a2a/echo", {"x-api-key": "sekrit"}, user_message("k"))
    assert get_message_text(task.status.message) == "echo: k"


async def _send_with(url: str, headers: dict[str, str], request: SendMessageRequest) -> Task:
    async with a2a_client(url, headers=headers) as client:
        events = [event async for event in client.send_message(request)]
    return events[-1].task
