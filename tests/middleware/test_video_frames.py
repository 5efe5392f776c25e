"""Frames from a real video (`fathom.middleware.filesystem.video`, the `video` extra): the
sampling grid, the window, the caps that stop a read early and the errors it gives."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest

from fathom.middleware.filesystem import video

av = pytest.importorskip("av", reason="the video extra (PyAV) is not installed")
Image = pytest.importorskip("PIL.Image", reason="the video extra (Pillow) is not installed")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Four seconds at 5 frames a second, each frame a different colour."""
    path = tmp_path_factory.mktemp("video") / "clip.mp4"
    container = av.open(str(path), mode="w")
    stream = container.add_stream("libx264", rate=5)
    stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
    for i in range(20):
        frame = av.VideoFrame.from_image(Image.new("RGB", (32, 32), (i * 12, 100, 50)))
        frame.pts = i
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    return path.read_bytes()


def headers(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["text"] for b in blocks if b["type"] == "text"]


def test_frames_are_sampled_on_a_fixed_grid_with_their_times(clip: bytes) -> None:
    blocks = video.extract_video_frames(
        clip, offset_seconds=0, duration_seconds=60, sampling_rate=1.0
    )

    assert headers(blocks) == [f"Frame at t=00:00:0{s}.000" for s in range(4)]
    assert [b["type"] for b in blocks] == ["text", "image"] * 4
    for block in blocks[1::2]:
        assert block["mime_type"] == "image/jpeg"
        assert base64.b64decode(block["base64"])[:3] == b"\xff\xd8\xff"


def test_an_offset_starts_the_window_later(clip: bytes) -> None:
    blocks = video.extract_video_frames(
        clip, offset_seconds=2.0, duration_seconds=1.5, sampling_rate=1.0
    )

    assert headers(blocks) == ["Frame at t=00:00:02.000", "Frame at t=00:00:03.000"]


def test_the_frame_cap_ends_the_read_with_where_to_go_on(
    clip: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(video, "MAX_VIDEO_SAMPLED_FRAMES", 2)

    blocks = video.extract_video_frames(
        clip, offset_seconds=0, duration_seconds=60, sampling_rate=1.0
    )

    assert sum(b["type"] == "image" for b in blocks) == 2
    assert headers(blocks)[-1].startswith("Coverage truncated at t=00:00:01.000")
    assert "Continue from offset=1.000" in headers(blocks)[-1]


def test_a_window_past_the_end_is_an_error(clip: bytes) -> None:
    with pytest.raises(video.VideoExtractionError, match="No frames decoded"):
        video.extract_video_frames(clip, offset_seconds=30, duration_seconds=5, sampling_rate=1)


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ({"offset_seconds": -1, "duration_seconds": 1, "sampling_rate": 1}, "offset_seconds"),
        ({"offset_seconds": 0, "duration_seconds": 0, "sampling_rate": 1}, "duration_seconds"),
        ({"offset_seconds": 0, "duration_seconds": 1, "sampling_rate": 0}, "sampling_rate"),
    ],
)
def test_a_bad_window_is_refused_before_decoding(window: dict[str, float], message: str) -> None:
    with pytest.raises(video.VideoExtractionError, match=message):
        video.extract_video_frames(b"not even a video", **window)


def test_bytes_that_are_no_video_are_an_extraction_error() -> None:
    with pytest.raises(video.VideoExtractionError):
        video.extract_video_frames(
            b"\x00\x01 definitely not a container", offset_seconds=0, duration_seconds=5,
            sampling_rate=1,
        )  # fmt: skip


class _Frame:
    def __init__(self, width: int, height: int) -> None:
        self.pts, self.width, self.height = 0, width, height
        self.converted = False

    def to_image(self) -> Any:
        self.converted = True
        return Image.new("RGB", (self.width, self.height), "black")


def test_a_huge_frame_is_refused_before_it_is_converted() -> None:
    frame = _Frame(video.MAX_VIDEO_FRAME_SIDE + 1, 10)

    with pytest.raises(video.VideoExtractionError, match="dimensions"):
        video._encode_jpeg(frame)
    assert not frame.converted


def test_a_large_frame_is_scaled_down_to_the_output_bounds() -> None:
    jpeg = video._encode_jpeg(_Frame(2400, 1500))

    with Image.open(io.BytesIO(jpeg)) as image:
        width, height = image.size
    assert width <= video.MAX_VIDEO_OUTPUT_WIDTH
    assert height <= video.MAX_VIDEO_OUTPUT_HEIGHT


def test_the_decoding_budget_stops_a_slow_read() -> None:
    with pytest.raises(video.VideoExtractionError, match="decoding exceeded"):
        video._sample_frames_in_window(
            [_Frame(10, 10)], offset_seconds=0, duration_seconds=1, sampling_rate=1,
            time_base=1, deadline_seconds=0,
        )  # fmt: skip


def test_the_probe_says_whether_the_extra_is_installed() -> None:
    video.video_dependencies_available.cache_clear()
    try:
        assert video.video_dependencies_available() is True
    finally:
        video.video_dependencies_available.cache_clear()
