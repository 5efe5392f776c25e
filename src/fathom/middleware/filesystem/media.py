"""What `read_file` answers for images, audio, video and documents (PDF, slides).

Such a file comes back as one multimodal content block of its type (`image`, `audio`,
`video`, or `file` for a document) holding the file's bytes in base64, in a `ToolMessage`
whose `additional_kwargs` name the path (`read_file_path`) and MIME type
(`read_file_media_type`); a model that cannot take the block gets a text notice instead
(`UnsupportedContentMiddleware`).

A video is different when the `fathom[video]` extra is installed
(`video.video_dependencies_available()`): `offset` and `limit` are then seconds, and the
answer is a `Command` adding two messages, a short `ToolMessage` (how many frames were
sampled) and a `HumanMessage` with the frames (`video.extract_video_frames`), marked
`additional_kwargs["read_file_media_result"] = True`. Providers want all the tool results of
one model turn before any other message, so `media_after_tool_results` moves such frame
messages behind the whole batch of results on every model call.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Awaitable, Callable, Sequence
from pathlib import PurePosixPath
from typing import Any, Final, Literal

from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain.tools import ToolRuntime
from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.types import Command
from pydantic import BaseModel, Field, create_model

from fathom.backends.utils import IMAGE_EXTENSIONS, file_bytes
from fathom.middleware.filesystem.video import (
    VideoExtractionError,
    extract_video_frames,
    video_dependencies_available,
)
from fathom.tool_answers import tool_error

__all__ = [
    "MAX_VIDEO_INPUT_BYTES",
    "MEDIA_EXTENSIONS",
    "READ_FILE_MEDIA_RESULT",
    "REJECTED_MEDIA_TEXT",
    "VIDEO_EXTRA_EXTENSIONS",
    "VIDEO_SAMPLING_RATE",
    "RejectedMediaRetry",
    "media_after_tool_results",
    "media_answer",
    "media_request",
    "video_read_description",
    "video_read_schema",
]

BlockType = Literal["image", "audio", "video", "file"]

MEDIA_EXTENSIONS: Final[dict[str, BlockType]] = {
    **dict.fromkeys(IMAGE_EXTENSIONS, "image"),
    ".heic": "image",
    ".heif": "image",
    **dict.fromkeys(
        (".mp4", ".mpeg", ".mov", ".avi", ".flv", ".mpg", ".webm", ".wmv", ".3gpp"), "video"
    ),
    **dict.fromkeys((".wav", ".mp3", ".aiff", ".aac", ".ogg", ".flac"), "audio"),
    **dict.fromkeys((".pdf", ".ppt", ".pptx"), "file"),
}
"""The extensions `read_file` answers with a content block, and the block's type (the
formats multimodal models take: the reference's list)."""

VIDEO_EXTRA_EXTENSIONS: Final = frozenset({".mkv"})
"""Video containers read as video only with the `fathom[video]` extra (as a `file` block
without it)."""

READ_FILE_MEDIA_RESULT: Final = "read_file_media_result"
"""The `additional_kwargs` key (value `True`) of the `HumanMessage` that carries the frames
of a video `read_file`."""

VIDEO_SAMPLING_RATE: Final = 0.5
"""Frames per second sampled from a video (one every two seconds)."""

MAX_VIDEO_INPUT_BYTES: Final = 1024 * 1024 * 1024
"""The largest video (decoded bytes) `read_file` takes frames from."""

_MIME_TYPES: Final = {".heic": "image/heic", ".heif": "image/heif", ".3gpp": "video/3gpp"}


def _suffix(path: str) -> str:
    return PurePosixPath(path).suffix.lower()


def _block_type(path: str, video: bool) -> BlockType | None:
    suffix = _suffix(path)
    if suffix in VIDEO_EXTRA_EXTENSIONS:
        return "video" if video else "file"
    return MEDIA_EXTENSIONS.get(suffix)


def _mime_type(path: str) -> str:
    suffix = _suffix(path)
    known = IMAGE_EXTENSIONS.get(suffix) or _MIME_TYPES.get(suffix)
    return known or mimetypes.guess_type("file" + suffix)[0] or "application/octet-stream"


def media_answer(result: Any, file_path: str, offset: int, limit: int, runtime: ToolRuntime,
                 *, video: bool) -> Any:  # fmt: skip
    """The `read_file` answer to `result` when `file_path` is a media file read whole, else
    `None` (the text answer applies: errors, text windows and empty files). `video` says
    whether videos are read as frames (the extra is installed)."""
    data = getattr(result, "file_data", None)
    if result.error or data is None or getattr(result, "start_line", None) is not None:
        return None
    if getattr(result, "no_lines_requested", False) or not str(data.get("content") or ""):
        return None
    kind = _block_type(file_path, video)
    if kind is None:
        return None
    if kind == "video" and video:
        return _frames_answer(data, file_path, runtime, offset, limit)
    if data.get("encoding") == "base64":
        payload = data["content"]
    else:
        payload = base64.b64encode(file_bytes(data)).decode("ascii")
    mime = _mime_type(file_path)
    return ToolMessage(
        content_blocks=[{"type": kind, "base64": payload, "mime_type": mime}],  # type: ignore[list-item]
        name="read_file",
        tool_call_id=runtime.tool_call_id,
        additional_kwargs={"read_file_path": file_path, "read_file_media_type": mime},
    )


def _window_header(path: str, offset_seconds: float, duration_seconds: float) -> str:
    if offset_seconds <= 0.0:
        return f"Reading first {int(duration_seconds)}s of {path} at {VIDEO_SAMPLING_RATE} fps."
    end = offset_seconds + duration_seconds
    return (
        f"Reading [{offset_seconds:.3f}s, {end:.3f}s) of {path} at {VIDEO_SAMPLING_RATE} fps."
    )


def _frames_answer(data: Any, path: str, runtime: ToolRuntime, offset: int, limit: int) -> Any:
    """Frames of the window `offset` .. `offset + limit` seconds of the video `data`: a
    `Command` adding the tool's answer and the frames' message, or an error answer (a bad
    window, a payload that is not a video, no PyAV) the model can act on."""
    call_id = runtime.tool_call_id

    def error(detail: str, header: str | None = None) -> ToolMessage:
        text = f"Error reading video {path}: {detail}" + (f"\n{header}" if header else "")
        return tool_error(text, tool_call_id=call_id, name="read_file")

    if limit <= 0:
        return error(f"limit must be > 0, got {limit!r}")
    offset_seconds, duration_seconds = max(0.0, float(offset)), float(limit)
    header = _window_header(path, offset_seconds, duration_seconds)
    content = data["content"]
    if data.get("encoding") == "base64":
        try:
            raw = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as exc:
            return error(f"video bytes are not valid base64 ({exc})", header)
    else:
        raw = file_bytes(data)
    if len(raw) > MAX_VIDEO_INPUT_BYTES:
        return error(
            f"video payload exceeds maximum input size of {MAX_VIDEO_INPUT_BYTES} bytes", header
        )
    try:
        frames = extract_video_frames(
            raw,
            offset_seconds=offset_seconds,
            duration_seconds=duration_seconds,
            sampling_rate=VIDEO_SAMPLING_RATE,
        )
    except VideoExtractionError as exc:
        return error(str(exc), header)
    blocks = [{"type": "text", "text": header}, *frames]
    count = sum(1 for block in blocks if isinstance(block, dict) and block.get("type") == "image")
    noun = "frame" if count == 1 else "frames"
    answer = ToolMessage(
        content=(
            f"Read video {path}: sampled {count} {noun}. The sampled frames are attached in "
            "the following message."
        ),
        name="read_file",
        tool_call_id=call_id,
        additional_kwargs={"read_file_path": path, "read_file_frame_count": count},
    )
    attached = HumanMessage(
        content=blocks,
        additional_kwargs={
            READ_FILE_MEDIA_RESULT: True,
            "read_file_path": path,
            "read_file_tool_call_id": call_id,
        },
    )
    return Command(update={"messages": [answer, attached]})


def _is_media_result(message: Any) -> bool:
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get(READ_FILE_MEDIA_RESULT) is True
    )


def media_after_tool_results(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """`messages` with each video's frame message moved behind the whole batch of tool
    results it sits in (the results of one AI message's tool calls), order otherwise kept."""
    ordered: list[AnyMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        ordered.append(message)
        i += 1
        if not (isinstance(message, AIMessage) and message.tool_calls):
            continue
        batch: list[AnyMessage] = []
        while i < len(messages) and (
            isinstance(messages[i], ToolMessage) or _is_media_result(messages[i])
        ):
            batch.append(messages[i])
            i += 1
        ordered.extend(m for m in batch if isinstance(m, ToolMessage))
        ordered.extend(m for m in batch if not isinstance(m, ToolMessage))
    return ordered


def media_request(request: ModelRequest) -> ModelRequest:
    """`request`, with its messages in the order `media_after_tool_results` gives."""
    messages = list(request.messages)
    if not any(_is_media_result(m) for m in messages):
        return request
    ordered = media_after_tool_results(messages)
    if all(a is b for a, b in zip(ordered, messages, strict=True)):
        return request
    return request.override(messages=ordered)


REJECTED_MEDIA_TEXT: Final = (
    "Unsupported content. The file may be invalid, too large, or of an unsupported mime-type."
)
"""What replaces a media read the provider refused (the reference's words)."""

_MULTIMODAL = frozenset({"image", "audio", "video", "file"})


def rejected_media_replaced(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """`messages` with the media reads since the last AI message (the `read_file` answers
    and frame messages that carry a multimodal block) replaced by `REJECTED_MEDIA_TEXT`."""
    last_ai = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=-1)
    replaced: list[AnyMessage] = []
    for index, message in enumerate(messages):
        read = _is_media_result(message) or (
            isinstance(message, ToolMessage) and message.name == "read_file"
        )
        if (
            index > last_ai
            and read
            and any(b.get("type") in _MULTIMODAL for b in message.content_blocks)
        ):
            message = message.model_copy(update={"content": REJECTED_MEDIA_TEXT})
        replaced.append(message)
    return replaced


class RejectedMediaRetry:
    """A model call that the provider refuses as an invalid request (`ModelInvalidRequestError`)
    while the newest turn holds media reads is made once more with those reads replaced by
    `REJECTED_MEDIA_TEXT`; `replaced` then holds the replacements, for the state, so later
    calls do not send the file again. Any other refusal is raised as it was."""

    def __init__(self) -> None:
        self.replaced: list[AnyMessage] = []

    def _retry(self, request: ModelRequest) -> ModelRequest | None:
        messages = rejected_media_replaced(request.messages)
        pairs = zip(messages, request.messages, strict=True)
        changed = [new for new, old in pairs if new is not old]
        if not changed:
            return None
        self.replaced = changed
        return request.override(messages=messages)

    def wrap(self, handler: Callable[[ModelRequest], ModelResponse]
             ) -> Callable[[ModelRequest], ModelResponse]:  # fmt: skip
        def call(request: ModelRequest) -> ModelResponse:
            try:
                return handler(request)
            except ModelInvalidRequestError:
                if (retried := self._retry(request)) is None:
                    raise
                return handler(retried)

        return call

    def awrap(self, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
              ) -> Callable[[ModelRequest], Awaitable[ModelResponse]]:  # fmt: skip
        async def call(request: ModelRequest) -> ModelResponse:
            try:
                return await handler(request)
            except ModelInvalidRequestError:
                if (retried := self._retry(request)) is None:
                    raise
                return await handler(retried)

        return call


def video_enabled() -> bool:
    """Whether `read_file` reads videos as frames (PyAV and Pillow are installed)."""
    return video_dependencies_available()


def video_read_description(description: str, default_limit: int) -> str:
    """`description` of `read_file` with what `offset` and `limit` mean for a video."""
    return (
        f"{description} For videos, offset and limit are seconds (by default the first "
        f"{default_limit} s), and frames sampled at a fixed rate come back as images; ask for "
        "a shorter window to see more detail."
    )


def video_read_schema(schema: type[BaseModel]) -> type[BaseModel]:
    """`read_file`'s argument schema `schema`, its `offset` and `limit` described for videos
    too (their types, defaults and bounds kept)."""
    extra = {
        "offset": "For videos, seconds into the video to start sampling.",
        "limit": "For videos, seconds of video to sample.",
    }
    fields: dict[str, Any] = {}
    for name, note in extra.items():
        info = schema.model_fields[name]
        described = Field(
            default=info.default,
            description=f"{info.description or ''} {note}".strip(),
        )
        merged = type(info).merge_field_infos(info, described)
        fields[name] = (info.annotation, merged)
    return create_model(f"{schema.__name__}WithVideo", __base__=schema, **fields)
