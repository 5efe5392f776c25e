"""ACP prompt blocks become LangChain content blocks; what cannot be passed on is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import (
    audio_block,
    embedded_blob_resource,
    embedded_text_resource,
    image_block,
    resource_block,
    resource_link_block,
    text_block,
)

from fathom.protocols.acp import UnsupportedContentError, from_acp, to_acp


def test_links_and_embedded_files_under_the_project_use_the_agents_paths(tmp_path: Path) -> None:
    uri = (tmp_path / "src" / "app.py").as_uri()
    blocks = from_acp([
        text_block("look"),
        resource_link_block("app.py", uri),
        resource_block(embedded_text_resource(uri, "print(1)")),
        resource_link_block("elsewhere", "https://example.com/x"),
    ], tmp_path)  # fmt: skip
    assert blocks[0] == {"type": "text", "text": "look"}
    assert "/src/app.py (read it with read_file)" in blocks[1]["text"]
    assert blocks[2]["text"] == '<file path="/src/app.py">\nprint(1)\n</file>'
    assert "https://example.com/x" in blocks[3]["text"]


def test_images_inline_or_embedded_become_image_blocks(tmp_path: Path) -> None:
    blocks = from_acp([
        image_block("aW1n", "image/png"),
        resource_block(embedded_blob_resource("file:///x.jpg", "anBn", mime_type="image/jpeg")),
    ], tmp_path)  # fmt: skip
    assert blocks == [{"type": "image", "base64": "aW1n", "mime_type": "image/png"},
                      {"type": "image", "base64": "anBn", "mime_type": "image/jpeg"}]
    assert [b.type for b in to_acp(blocks)] == ["image", "image"]


@pytest.mark.parametrize(("block", "message"), [
    (audio_block("AAAA", "audio/wav"), "prompt block 0: audio is not supported"),
    (resource_block(embedded_blob_resource("file:///a.zip", "UEs=", mime_type="application/zip")),
     "prompt block 0: embedded binary resource file:///a.zip (application/zip) is not supported"),
    (image_block("AAAA", "text/plain"), "the image has MIME type 'text/plain'"),
])  # fmt: skip
def test_blocks_the_model_cannot_take_are_refused_with_a_reason(
    tmp_path: Path, block: object, message: str,
) -> None:
    with pytest.raises(UnsupportedContentError, match=message.replace("(", r"\(").replace(
            ")", r"\)")):  # fmt: skip
        from_acp([block], tmp_path)


def test_an_empty_prompt_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedContentError, match="the prompt is empty"):
        from_acp([], tmp_path)
