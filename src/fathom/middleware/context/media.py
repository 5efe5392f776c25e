"""Inline media of summarized messages, saved as files before the messages are archived.

The archive and the summary prompt are text (LangChain's XML rendering of the messages),
which leaves out every inline `data:` block. So before a summarization the inline images,
audio, video and other files of the messages it replaces are written, once per distinct
content, to `<artifacts_root>/conversation_history/media/<sha256[:16]>.<ext>`, and each
block becomes a reference to its file: `<image url="..." />` (audio and video alike), or
a text block `<file url="..." />` for other types. A block that cannot be decoded or
written becomes the text `<image error="failed_to_offload" />`, so the archive still shows
that something was there. These are the entries the reference's archive holds.

Owns the detection, decoding and rewriting of the blocks and the upload plan (`offload`,
for `fathom.backends.protocol.drive` / `adrive`). Imports only `fathom.backends` and
`fathom.tool_answers`.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import mimetypes
import urllib.parse
from collections.abc import Sequence
from typing import Any

from fathom.backends.protocol import Plan, call
from fathom.tool_answers import Failure, aattempt, attempt

__all__ = [
    "FAILED_PLACEHOLDER",
    "Guarded",
    "decode_data_url",
    "inline_data_url",
    "offload",
    "reference_block",
    "upload_error",
]

logger = logging.getLogger(__name__)

FAILED_PLACEHOLDER = '<image error="failed_to_offload" />'
"""What a media block that could not be saved becomes in the archive."""


class Guarded:
    """A backend whose calls hand back the `Failure` they raise instead of raising it, so
    a plan can answer a failed write (the archive is given up, the run goes on).

    The backend may be the caller's own, which may raise anything: each call is a
    boundary (`fathom.tool_answers.attempt`, which logs the failure), and the plan that
    reads a `Failure` says what was given up.
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def _sync(self, name: str, *args: Any) -> Any:
        return attempt(lambda: getattr(self.backend, name)(*args), f"the backend's {name}")

    async def _async(self, name: str, *args: Any) -> Any:
        async def run() -> Any:
            return await getattr(self.backend, name)(*args)

        return await aattempt(run(), f"the backend's {name}")

    def upload_files(self, files: list[tuple[str, bytes]]) -> Any:
        return self._sync("upload_files", files)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> Any:
        return await self._async("aupload_files", files)

    def download_files(self, paths: list[str]) -> Any:
        return self._sync("download_files", paths)

    async def adownload_files(self, paths: list[str]) -> Any:
        return await self._async("adownload_files", paths)

    def write(self, path: str, content: str) -> Any:
        return self._sync("write", path, content)

    async def awrite(self, path: str, content: str) -> Any:
        return await self._async("awrite", path, content)

    def edit(self, path: str, old: str, new: str) -> Any:
        return self._sync("edit", path, old, new)

    async def aedit(self, path: str, old: str, new: str) -> Any:
        return await self._async("aedit", path, old, new)


def inline_data_url(block: Any) -> str | None:
    """The `data:` URL of a content block that carries its media inline, else `None`.

    Three shapes carry it: a `base64` field (with `mime_type`), a `url` that is a `data:`
    URL, and an OpenAI-style `image_url` whose `url` is one.
    """
    if not isinstance(block, dict):
        return None
    if payload := block.get("base64"):
        return f"data:{block.get('mime_type') or 'application/octet-stream'};base64,{payload}"
    url = block.get("url")
    if isinstance(url, str) and url.startswith("data:"):
        return url
    image_url = block.get("image_url")
    inner = image_url.get("url") if isinstance(image_url, dict) else None
    return inner if isinstance(inner, str) and inner.startswith("data:") else None


def decode_data_url(url: str) -> tuple[bytes, str, str] | None:
    """`(bytes, extension, mime type)` of a `data:` URL (base64 or percent-encoded);
    `None`, logged, when it does not decode."""
    try:
        header, payload = url.split(",", 1)
        parts = header.removeprefix("data:").split(";")
        mime = parts[0] or "application/octet-stream"
        raw = (
            base64.b64decode(payload)
            if "base64" in (p.lower() for p in parts[1:])
            else urllib.parse.unquote_to_bytes(payload)
        )
    except ValueError as error:
        logger.warning("An inline media block could not be decoded: %s", error)
        return None
    extension = (mimetypes.guess_extension(mime) or ".bin").lstrip(".")
    return raw, extension, mime


def reference_block(path: str, mime: str) -> dict[str, Any]:
    """The block that stands for media saved at `path`: typed for images, audio and video
    (rendered `<image url="..." />` and so on), a `<file url="..." />` text otherwise."""
    kind = mime.split("/", 1)[0]
    if kind in {"image", "audio", "video"}:
        return {"type": kind, "url": path}
    return {"type": "text", "text": f'<file url="{path}" />'}


def upload_error(responses: Any) -> str | None:
    """The error of a one-file `upload_files` answer (`None` when it succeeded)."""
    if not responses:
        return "missing_upload_response"
    error = responses[0].error
    return None if error is None else str(error)


def _blocks(message: Any) -> list[Any]:
    try:
        blocks = message.content_blocks
    except (AttributeError, TypeError, ValueError):
        return []
    return list(blocks) if isinstance(blocks, list) else []


def offload(
    backend: Any, messages: Sequence[Any], media_dir: str, files: dict[str, Any]
) -> Plan[tuple[Sequence[Any], int]]:
    """Save the inline media of `messages` under `media_dir` and return the messages with
    each such block replaced, and how many blocks could not be saved. `messages` itself is
    returned when none has inline media. What a state backend stores is added to `files`.
    """
    saved: dict[str, str] = {}
    failed: set[str] = set()
    rewritten: list[Any] = []
    failures = 0
    seen_media = False
    guarded = Guarded(backend)
    for message in messages:
        blocks = _blocks(message)
        if not any(inline_data_url(block) for block in blocks):
            rewritten.append(message)
            continue
        seen_media = True
        new_blocks: list[Any] = []
        for block in blocks:
            url = inline_data_url(block)
            if url is None:
                new_blocks.append(block)
                continue
            decoded = decode_data_url(url)
            if decoded is None:
                failures += 1
                new_blocks.append({"type": "text", "text": FAILED_PLACEHOLDER})
                continue
            raw, extension, mime = decoded
            key = hashlib.sha256(raw).hexdigest()[:16]
            if key not in saved and key not in failed:
                path = f"{media_dir}/{key}.{extension}"
                answer = yield call(guarded, "upload_files", [(path, raw)])
                error = str(answer.error) if isinstance(answer, Failure) else upload_error(answer)
                if error is None:
                    saved[key] = path
                    files.update(getattr(answer, "files_update", None) or {})
                else:
                    logger.warning("Media could not be saved to %s: %s", path, error)
                    failed.add(key)
            if key in saved:
                new_blocks.append(reference_block(saved[key], mime))
            else:
                failures += 1
                new_blocks.append({"type": "text", "text": FAILED_PLACEHOLDER})
        copy = message.model_copy()
        copy.content = new_blocks
        rewritten.append(copy)
    if not seen_media:
        return messages, 0  # the same list: nothing was rewritten
    return rewritten, failures
