"""Prompt content: ACP content blocks to LangChain content blocks, and back for replay.

An editor sends a prompt as ACP content blocks (text, images, links to files, embedded
file contents). The agent's model gets LangChain's standard content blocks. A block the
agent cannot pass on (audio, a binary file that is not an image) is refused with
`UnsupportedContentError` before anything runs, so nothing half-sent reaches the thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from fathom.errors import FathomError

__all__ = ["PromptBlock", "UnsupportedContentError", "from_acp", "to_acp"]

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
"""A content block of an ACP `session/prompt` request."""


class UnsupportedContentError(FathomError, ValueError):
    """A prompt block the agent cannot pass to its model; the message says which and why."""


def _agent_path(uri: str, project_dir: Path) -> str | None:
    """Where a `file://` URI under the project appears in the agent's filesystem."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    try:
        relative = Path(unquote(parts.path)).resolve().relative_to(project_dir.resolve())
    except ValueError:
        return None
    return "/" + relative.as_posix()


def _link_text(uri: str, name: str, project_dir: Path) -> str:
    path = _agent_path(uri, project_dir)
    if path is not None:
        return f"[file {name}: {path} (read it with read_file)]"
    return f"[resource {name}: {uri}]"


def _image(data: str, mime_type: str, where: str) -> dict[str, Any]:
    if not mime_type.startswith("image/"):
        raise UnsupportedContentError(
            f"{where}: the image has MIME type {mime_type!r}; send an image/* type"
        )
    return {"type": "image", "base64": data, "mime_type": mime_type}


def _one(block: Any, position: int, project_dir: Path) -> dict[str, Any]:
    where = f"prompt block {position}"
    if isinstance(block, TextContentBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageContentBlock):
        return _image(block.data, block.mime_type, where)
    if isinstance(block, ResourceContentBlock):
        return {"type": "text", "text": _link_text(block.uri, block.name, project_dir)}
    if isinstance(block, EmbeddedResourceContentBlock):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            path = _agent_path(resource.uri, project_dir) or resource.uri
            return {"type": "text", "text": f'<file path="{path}">\n{resource.text}\n</file>'}
        if isinstance(resource, BlobResourceContents):
            mime = resource.mime_type or "application/octet-stream"
            if mime.startswith("image/"):
                return _image(resource.blob, mime, where)
            raise UnsupportedContentError(
                f"{where}: embedded binary resource {resource.uri} ({mime}) is not supported; "
                "send text, an image, or a link to the file"
            )
    if isinstance(block, AudioContentBlock):
        raise UnsupportedContentError(
            f"{where}: audio is not supported (this agent does not advertise the audio "
            "prompt capability); send text or an image"
        )
    kind = getattr(block, "type", type(block).__name__)
    raise UnsupportedContentError(f"{where}: content of type {kind!r} is not supported")


def from_acp(blocks: Sequence[Any], project_dir: Path) -> list[dict[str, Any]]:
    """LangChain content blocks for an ACP prompt.

    Links to files under `project_dir` become the agent's own paths (`/src/app.py`), so it
    can read them with its file tools. Raises `UnsupportedContentError` for audio, a
    binary resource that is not an image, or an empty prompt.
    """
    converted = [_one(block, i, project_dir) for i, block in enumerate(blocks)]
    if not converted:
        raise UnsupportedContentError("the prompt is empty; send at least one text block")
    return converted


def to_acp(content: Any) -> list[TextContentBlock | ImageContentBlock]:
    """ACP blocks for a stored message's content (a string or LangChain blocks), for replay.

    Blocks with no ACP counterpart (reasoning, tool-call parts) are left out.
    """
    if isinstance(content, str):
        return [TextContentBlock(type="text", text=content)] if content else []
    blocks: list[TextContentBlock | ImageContentBlock] = []
    for item in content or []:
        if isinstance(item, str):
            if item:
                blocks.append(TextContentBlock(type="text", text=item))
            continue
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text" and item.get("text"):
            blocks.append(TextContentBlock(type="text", text=str(item["text"])))
        elif item.get("type") == "image" and isinstance(item.get("base64"), str):
            mime = str(item.get("mime_type") or "image/png")
            blocks.append(ImageContentBlock(type="image", data=item["base64"], mime_type=mime))
    return blocks
