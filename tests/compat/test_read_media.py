"""`read_file` on images, audio, documents and videos, as a reference user's agent sees it:
one content block of the file's type, or, with the video extra (PyAV and Pillow), sampled
frames in a message that comes after all the tool results of the turn."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import fathom.middleware.filesystem as filesystem_middleware
from fathom import create_deep_agent
from fathom.backends import FilesystemBackend
from fathom.testing import ScriptedModel, ai, tool_call

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
BINARY = b"\x00\x01\x02\x03 not text \xff\xfe"


def read_in_agent(root: Path, *calls: dict[str, Any]) -> tuple[list[Any], ScriptedModel]:
    """Run an agent whose model reads with the given `read_file`/`ls` calls in one turn,
    then answers; the thread's messages and the model."""
    model = ScriptedModel(
        replies=[ai("", *(tool_call(c.pop("tool", "read_file"), c) for c in calls)), "done"]
    )
    agent = create_deep_agent(
        model=model,
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "media"}}
    agent.invoke({"messages": [HumanMessage("read them")]}, config)
    return agent.get_state(config).values["messages"], model


def answers(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def read_file_tool(root: Path) -> Any:
    middleware = filesystem_middleware.FilesystemMiddleware(
        backend=FilesystemBackend(root_dir=root, virtual_mode=True)
    )
    return next(t for t in middleware.tools if t.name == "read_file")


def runtime(call_id: str) -> ToolRuntime:
    return ToolRuntime(
        state={"messages": [], "files": {}},
        context=None,
        tool_call_id=call_id,
        store=None,
        stream_writer=lambda _: None,
        config={},
    )


@pytest.mark.parametrize(
    ("name", "content", "block", "mime_type"),
    [
        ("pic.png", PNG, "image", "image/png"),
        ("song.mp3", BINARY, "audio", "audio/mpeg"),
        ("talk.wav", BINARY, "audio", "audio/x-wav"),
        ("paper.pdf", b"%PDF-1.4\n\x00\x01binary", "file", "application/pdf"),
    ],
)
def test_media_files_come_back_as_one_block_of_their_type(
    tmp_path: Path, name: str, content: bytes, block: str, mime_type: str
) -> None:
    (tmp_path / name).write_bytes(content)

    answer = read_file_tool(tmp_path).invoke(
        {"file_path": f"/{name}", "runtime": runtime("media-1")}
    )

    assert isinstance(answer, ToolMessage)
    assert answer.status == "success"
    assert answer.tool_call_id == "media-1"
    [only] = answer.content_blocks
    assert only["type"] == block
    assert base64.b64decode(only["base64"]) == content
    assert only["mime_type"] == answer.additional_kwargs["read_file_media_type"]
    assert answer.additional_kwargs["read_file_media_type"] in {mime_type, "audio/wav"}
    assert answer.additional_kwargs["read_file_path"] == f"/{name}"


@pytest.mark.parametrize("name", ["pic.png", "paper.pdf"])
def test_an_agent_keeps_image_and_pdf_blocks_in_the_thread(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(PNG if name.endswith(".png") else b"%PDF-1.4\n\x00binary")

    messages, model = read_in_agent(tmp_path, {"file_path": f"/{name}"})

    [answer] = answers(messages)
    assert [b["type"] for b in answer.content_blocks] == ["image" if "png" in name else "file"]
    sent = next(m for m in model.requests[1].messages if isinstance(m, ToolMessage))
    assert sent.content_blocks[0]["base64"] == answer.content_blocks[0]["base64"]


def test_without_the_video_extra_a_video_is_one_video_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filesystem_middleware, "video_dependencies_available", lambda: False)
    (tmp_path / "clip.mp4").write_bytes(BINARY)
    (tmp_path / "clip.mkv").write_bytes(BINARY)
    read_file = read_file_tool(tmp_path)

    mp4 = read_file.invoke({"file_path": "/clip.mp4", "runtime": runtime("v1")})
    mkv = read_file.invoke({"file_path": "/clip.mkv", "runtime": runtime("v2")})

    assert [b["type"] for b in mp4.content_blocks] == ["video"]
    assert base64.b64decode(mp4.content_blocks[0]["base64"]) == BINARY
    assert [b["type"] for b in mkv.content_blocks] == ["file"]  # .mkv needs the extra


def test_without_the_video_extra_read_file_says_nothing_of_videos(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(filesystem_middleware, "video_dependencies_available", lambda: False)
    read_file = next(
        t for t in filesystem_middleware.FilesystemMiddleware().tools if t.name == "read_file"
    )

    assert "For videos" not in read_file.description
    properties = read_file.args_schema.model_json_schema()["properties"]
    assert "For videos" not in properties["offset"]["description"]


def test_with_the_video_extra_read_file_describes_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(filesystem_middleware, "video_dependencies_available", lambda: True)
    read_file = next(
        t for t in filesystem_middleware.FilesystemMiddleware().tools if t.name == "read_file"
    )

    assert "For videos" in read_file.description
    properties = read_file.args_schema.model_json_schema()["properties"]
    assert "For videos" in properties["offset"]["description"]
    assert "For videos" in properties["limit"]["description"]


def make_clip(path: Path, seconds: int = 3, fps: int = 5) -> bytes:
    """A real H.264 clip of `seconds` seconds whose frames differ (made with PyAV)."""
    av = pytest.importorskip("av", reason="the video extra (PyAV) is not installed")
    image = pytest.importorskip("PIL.Image", reason="the video extra (Pillow) is not installed")
    container = av.open(str(path), mode="w")
    stream = container.add_stream("libx264", rate=fps)
    stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
    for i in range(seconds * fps):
        frame = av.VideoFrame.from_image(image.new("RGB", (32, 32), (i * 16 % 255, 90, 30)))
        frame.pts = i
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    return path.read_bytes()


def test_with_the_video_extra_a_video_comes_as_sampled_frames(tmp_path: Path) -> None:
    make_clip(tmp_path / "clip.mp4")

    messages, model = read_in_agent(tmp_path, {"file_path": "/clip.mp4", "limit": 30})

    [answer] = answers(messages)
    assert answer.content == (
        "Read video /clip.mp4: sampled 2 frames. The sampled frames are attached in the "
        "following message."
    )
    assert answer.additional_kwargs["read_file_frame_count"] == 2
    frames = messages[messages.index(answer) + 1]
    assert isinstance(frames, HumanMessage)
    assert frames.additional_kwargs["read_file_media_result"] is True
    assert frames.additional_kwargs["read_file_tool_call_id"] == answer.tool_call_id
    kinds = [b["type"] for b in frames.content_blocks]
    assert kinds == ["text", "text", "image", "text", "image"]
    assert frames.content_blocks[0]["text"] == "Reading first 30s of /clip.mp4 at 0.5 fps."
    assert frames.content_blocks[1]["text"] == "Frame at t=00:00:00.000"
    assert frames.content_blocks[3]["text"] == "Frame at t=00:00:02.000"
    jpeg = base64.b64decode(frames.content_blocks[2]["base64"])
    assert jpeg[:3] == b"\xff\xd8\xff"
    assert model.requests[1].messages[-1].additional_kwargs.get("read_file_media_result")


def test_a_window_past_the_end_of_the_video_is_an_error_answer(tmp_path: Path) -> None:
    make_clip(tmp_path / "clip.mp4")

    messages, _ = read_in_agent(tmp_path, {"file_path": "/clip.mp4", "offset": 10, "limit": 5})

    [answer] = answers(messages)
    assert answer.status == "error"
    assert "Error reading video /clip.mp4" in answer.text
    assert "No frames decoded" in answer.text


def test_video_frames_come_after_every_tool_result_of_their_turn(tmp_path: Path) -> None:
    make_clip(tmp_path / "clip.mp4")
    (tmp_path / "notes.txt").write_text("hello\n")

    messages, model = read_in_agent(
        tmp_path, {"file_path": "/clip.mp4"}, {"tool": "ls", "path": "/"}
    )

    # in the thread the frames follow their own answer ...
    ordered = [type(m).__name__ for m in messages]
    assert ordered[:5] == [
        "HumanMessage", "AIMessage", "ToolMessage", "HumanMessage", "ToolMessage"
    ]
    # ... and the model gets both tool results first
    sent = [m for m in model.requests[1].messages if m.type != "system"]
    turn = sent[sent.index(next(m for m in sent if isinstance(m, AIMessage))) + 1 :]
    assert [type(m).__name__ for m in turn[:3]] == ["ToolMessage", "ToolMessage", "HumanMessage"]
    assert turn[2].additional_kwargs["read_file_media_result"] is True


def test_a_media_read_the_provider_refuses_is_sent_again_as_a_notice(tmp_path: Path) -> None:
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00 not really an image")

    def refuse(_request: Any) -> AIMessage:
        raise ModelInvalidRequestError("Invalid image data")

    model = ScriptedModel(
        replies=[ai("", tool_call("read_file", {"file_path": "/broken.png"})), refuse, "moved on"]
    )
    agent = create_deep_agent(
        model=model,
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "refused"}}

    result = agent.invoke({"messages": [HumanMessage("look at /broken.png")]}, config)

    assert result["messages"][-1].content == "moved on"
    notice = "Unsupported content. The file may be invalid, too large, or of an unsupported"
    sent = next(m for m in model.requests[1].messages if isinstance(m, ToolMessage))
    assert sent.text.startswith(notice)
    [kept] = answers(agent.get_state(config).values["messages"])
    assert kept.text.startswith(notice)  # later calls do not send the file again


def test_a_refusal_with_no_media_read_is_raised(tmp_path: Path) -> None:
    def refuse(_request: Any) -> AIMessage:
        raise ModelInvalidRequestError("bad request")

    agent = create_deep_agent(
        model=ScriptedModel(replies=[refuse]),
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
    )

    with pytest.raises(ModelInvalidRequestError):
        agent.invoke({"messages": [HumanMessage("hi")]})
