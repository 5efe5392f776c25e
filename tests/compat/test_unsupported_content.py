"""`UnsupportedContentMiddleware`: a block the model's profile refuses reaches the model as
a text notice, the thread keeps the original, and `create_deep_agent` adds it."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.backends import FilesystemBackend
from fathom.middleware import UnsupportedContentMiddleware
from fathom.testing import ScriptedModel, ai, tool_call

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def texts(message: Any) -> list[str]:
    return [b["text"] for b in message.content_blocks if b.get("type") == "text"]


def kinds(message: Any) -> list[str]:
    return [b["type"] for b in message.content_blocks]


def image_message() -> HumanMessage:
    payload = base64.b64encode(PNG).decode("ascii")
    return HumanMessage(
        content=[
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image", "base64": payload, "mime_type": "image/png"},
        ]
    )


def test_an_image_a_text_only_model_cannot_take_becomes_a_notice() -> None:
    model = ScriptedModel(replies=["I cannot see it"], profile={"image_inputs": False})
    agent = create_agent(
        model=model, middleware=[UnsupportedContentMiddleware()], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "image"}}

    agent.invoke({"messages": [image_message()]}, config)

    sent = model.requests[0].messages[-1]
    assert kinds(sent) == ["text", "text"]
    assert texts(sent)[1] == (
        "[read_file: the requested file was not attached because this model does not support "
        "image content (image/png).]"
    )
    kept = agent.get_state(config).values["messages"][0]
    assert kinds(kept) == ["text", "image"]


async def test_an_async_run_replaces_the_image_too() -> None:
    model = ScriptedModel(replies=["I cannot see it"], profile={"image_inputs": False})
    agent = create_agent(model=model, middleware=[UnsupportedContentMiddleware()])

    await agent.ainvoke({"messages": [image_message()]})

    assert kinds(model.requests[0].messages[-1]) == ["text", "text"]


def test_a_model_without_a_profile_gets_the_image() -> None:
    model = ScriptedModel(replies=["a pixel"])
    agent = create_agent(model=model, middleware=[UnsupportedContentMiddleware()])

    agent.invoke({"messages": [image_message()]})

    assert kinds(model.requests[0].messages[-1]) == ["text", "image"]


def test_a_profile_that_takes_images_gets_the_image() -> None:
    model = ScriptedModel(replies=["a pixel"], profile={"image_inputs": True})
    agent = create_agent(model=model, middleware=[UnsupportedContentMiddleware()])

    agent.invoke({"messages": [image_message()]})

    assert kinds(model.requests[0].messages[-1]) == ["text", "image"]


def test_audio_and_pdf_follow_their_own_profile_fields() -> None:
    audio = base64.b64encode(b"RIFF....WAVE").decode("ascii")
    pdf = base64.b64encode(b"%PDF-1.4 ...").decode("ascii")
    message = HumanMessage(
        content=[
            {"type": "audio", "base64": audio, "mime_type": "audio/wav"},
            {"type": "file", "base64": pdf, "mime_type": "application/pdf"},
        ]
    )
    model = ScriptedModel(replies=["ok"], profile={"audio_inputs": False, "pdf_inputs": True})
    agent = create_agent(model=model, middleware=[UnsupportedContentMiddleware()])

    agent.invoke({"messages": [message]})

    sent = model.requests[0].messages[-1]
    assert kinds(sent) == ["text", "file"]
    assert "does not support audio content (audio/wav)" in texts(sent)[0]


def test_an_inline_office_document_goes_only_to_an_openai_responses_model() -> None:
    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    message = HumanMessage(
        content=[{"type": "file", "base64": "UEsDBA==", "mime_type": docx}]
    )
    model = ScriptedModel(replies=["ok"])
    agent = create_agent(model=model, middleware=[UnsupportedContentMiddleware()])

    agent.invoke({"messages": [message]})

    [notice] = texts(model.requests[0].messages[-1])
    assert f"does not support file content ({docx})" in notice


def test_a_document_by_url_is_left_to_the_provider() -> None:
    message = HumanMessage(
        content=[
            {"type": "file", "url": "https://example.com/a.pdf", "mime_type": "application/pdf"}
        ]
    )
    model = ScriptedModel(replies=["ok"], profile={"pdf_inputs": False})
    agent = create_agent(model=model, middleware=[UnsupportedContentMiddleware()])

    agent.invoke({"messages": [message]})

    assert kinds(model.requests[0].messages[-1]) == ["file"]


def test_create_deep_agent_replaces_an_image_read_file_result_the_model_cannot_take(
    tmp_path: Path,
) -> None:
    (tmp_path / "pic.png").write_bytes(PNG)
    model = ScriptedModel(
        replies=[ai("", tool_call("read_file", {"file_path": "/pic.png"})), "seen"],
        profile={"image_tool_message": False},
    )
    agent = create_deep_agent(
        model=model,
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "read-image"}}

    agent.invoke({"messages": [HumanMessage("look at /pic.png")]}, config)

    sent = next(m for m in model.requests[1].messages if isinstance(m, ToolMessage))
    assert texts(sent) == [
        "[read_file: /pic.png was not attached because this model does not support image "
        "content (image/png).]"
    ]
    kept = next(
        m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage)
    )
    assert kinds(kept) == ["image"]
    assert kept.additional_kwargs["read_file_path"] == "/pic.png"
    assert kept.additional_kwargs["read_file_media_type"] == "image/png"


def test_create_deep_agent_sends_the_image_to_a_model_that_takes_it(tmp_path: Path) -> None:
    (tmp_path / "pic.png").write_bytes(PNG)
    model = ScriptedModel(
        replies=[ai("", tool_call("read_file", {"file_path": "/pic.png"})), "seen"],
        profile={"image_inputs": True, "image_tool_message": True},
    )
    agent = create_deep_agent(
        model=model, backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    )

    agent.invoke({"messages": [HumanMessage("look at /pic.png")]})

    sent = next(m for m in model.requests[1].messages if isinstance(m, ToolMessage))
    assert kinds(sent) == ["image"]
    assert sent.content_blocks[0]["base64"] == base64.b64encode(PNG).decode("ascii")


def test_an_own_instance_in_middleware_is_accepted_by_create_deep_agent() -> None:
    model = ScriptedModel(replies=["ok"], profile={"image_inputs": False})
    agent = create_deep_agent(model=model, middleware=[UnsupportedContentMiddleware()])

    agent.invoke({"messages": [image_message()]})

    assert kinds(model.requests[0].messages[-1]) == ["text", "text"]
