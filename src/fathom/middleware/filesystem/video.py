"""Frames from a video, for `read_file`: the optional `fathom[video]` extra (PyAV and Pillow).

A video is not sent to the model as a video. `read_file` decodes one window of it (its
`offset` and `limit` read as seconds) and sends still frames sampled at a fixed rate, each a
JPEG `image` block after a text block that gives its time (`Frame at t=HH:MM:SS.mmm`).

PyAV and Pillow are imported only when a video is read, so fathom without the extra loads
nothing of them; `video_dependencies_available()` says whether they are there (read_file
then describes its video reading, and reads `.mkv` as a video too). What one read may cost
is bounded on every axis: frames (`MAX_VIDEO_SAMPLED_FRAMES`), encoded bytes
(`MAX_VIDEO_EMITTED_BYTES`), frame size (`MAX_VIDEO_FRAME_SIDE`; larger frames than
`MAX_VIDEO_OUTPUT_WIDTH` x `MAX_VIDEO_OUTPUT_HEIGHT` are scaled down) and decoding time
(`MAX_VIDEO_DECODE_SECONDS`). When a cap stops a window early, a last text block says where
to continue.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import logging
import math
import time
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Final

from fathom.errors import FathomError

__all__ = [
    "MAX_VIDEO_DECODE_SECONDS",
    "MAX_VIDEO_EMITTED_BYTES",
    "MAX_VIDEO_FRAME_PIXELS",
    "MAX_VIDEO_FRAME_SIDE",
    "MAX_VIDEO_OUTPUT_HEIGHT",
    "MAX_VIDEO_OUTPUT_WIDTH",
    "MAX_VIDEO_SAMPLED_FRAMES",
    "MISSING_VIDEO_HINT",
    "VideoExtractionError",
    "extract_video_frames",
    "video_dependencies_available",
]

logger = logging.getLogger(__name__)

MISSING_VIDEO_HINT = (
    "Reading video files needs the optional video dependencies (PyAV and Pillow): "
    "pip install 'fathom[video]'."
)
"""What a video read says when PyAV or Pillow cannot be imported."""

MAX_VIDEO_SAMPLED_FRAMES: Final = 64
"""The most frames one read returns."""

MAX_VIDEO_FRAME_PIXELS: Final = 1920 * 1080
"""Frames with more pixels than this are scaled down before they are encoded."""

MAX_VIDEO_FRAME_SIDE: Final = 4096
"""A decoded frame wider or taller than this is refused (the read fails)."""

MAX_VIDEO_OUTPUT_WIDTH: Final = 1920
"""The widest frame sent to the model."""

MAX_VIDEO_OUTPUT_HEIGHT: Final = 1080
"""The tallest frame sent to the model."""

MAX_VIDEO_EMITTED_BYTES: Final = 4 * 1024 * 1024
"""The most bytes (base64 images and their time lines) one read returns."""

MAX_VIDEO_DECODE_SECONDS: Final = 10.0
"""How long one read may spend decoding before it fails."""

JPEG_QUALITY: Final = 85
"""The JPEG quality of the frames sent."""


class VideoExtractionError(FathomError, RuntimeError):
    """PyAV could not give frames for the requested window (or is not installed)."""


@lru_cache(maxsize=1)
def video_dependencies_available() -> bool:
    """Whether PyAV (`av`) and Pillow can be found (found, not imported: a broken install
    shows up as a `VideoExtractionError` when a video is read)."""
    try:
        return (
            importlib.util.find_spec("av") is not None
            and importlib.util.find_spec("PIL.Image") is not None
        )
    except (ImportError, ValueError):
        # find_spec returns None for a missing package; raising means a broken one
        logger.warning("Could not probe the video dependencies; video frames are off.",
                       exc_info=True)  # fmt: skip
        return False


def _import_av() -> Any:
    """The `av` module, imported on first use."""
    try:
        import av
    except ImportError as exc:
        raise VideoExtractionError(f"{MISSING_VIDEO_HINT} ({exc})") from exc
    return av


def _format_timestamp(seconds: float) -> str:
    """`seconds` as `HH:MM:SS.mmm` (negative times read as zero)."""
    millis = round(max(seconds, 0.0) * 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}"


def _check_window(*, offset_seconds: float, duration_seconds: float,
                  sampling_rate: float) -> None:  # fmt: skip
    if offset_seconds < 0:
        raise VideoExtractionError(f"offset_seconds must be >= 0, got {offset_seconds!r}")
    if sampling_rate <= 0:
        raise VideoExtractionError(f"sampling_rate must be > 0, got {sampling_rate!r}")
    if duration_seconds <= 0:
        raise VideoExtractionError(f"duration_seconds must be > 0, got {duration_seconds!r}")


def extract_video_frames(
    content: bytes,
    *,
    offset_seconds: float,
    duration_seconds: float,
    sampling_rate: float,
) -> list[dict[str, Any]]:
    """Frames of the video `content` from `offset_seconds` for `duration_seconds`, one every
    `1 / sampling_rate` seconds: a text block with each frame's time, then its JPEG `image`
    block (base64). The video's own bytes are never returned.

    Raises:
        VideoExtractionError: a bad window, PyAV missing, a payload PyAV cannot open or
            decode, a frame too large, the decoding time or byte budget spent before the
            first frame, or no frame in the window.
    """
    _check_window(offset_seconds=offset_seconds, duration_seconds=duration_seconds,
                  sampling_rate=sampling_rate)  # fmt: skip
    av = _import_av()
    errors = _video_backend_error_types(av)
    container = _open(av, content, errors)
    try:
        try:
            stream = next((s for s in container.streams if s.type == "video"), None)
            if stream is None:
                raise VideoExtractionError("Video payload contains no video stream")
            if stream.time_base is None:
                raise VideoExtractionError(
                    "Video stream has no time_base; cannot determine frame timestamps"
                )
            time_base = float(stream.time_base)
            if time_base == 0.0:
                raise VideoExtractionError(
                    "Video stream time_base is zero; cannot determine frame timestamps"
                )
            start_pts = _start_pts(stream)
            if offset_seconds > 0:
                # seek from the stream's own start, which a trimmed clip has past zero
                target = start_pts + int(offset_seconds / time_base)
                container.seek(target, any_frame=False, backward=True, stream=stream)
            blocks = _sample_frames_in_window(
                container.decode(stream),
                offset_seconds=offset_seconds,
                duration_seconds=float(duration_seconds),
                sampling_rate=float(sampling_rate),
                time_base=time_base,
                stream_start_seconds=start_pts * time_base,
                deadline_seconds=time.monotonic() + MAX_VIDEO_DECODE_SECONDS,
                decode_error_types=errors,
            )
        except errors as exc:
            raise VideoExtractionError(f"Failed to decode video frames: {exc}") from exc
    finally:
        container.close()
    if not blocks:
        end = offset_seconds + duration_seconds
        raise VideoExtractionError(
            f"No frames decoded for window [{offset_seconds:.3f}s, {end:.3f}s)"
        )
    return blocks


def _open(av: Any, content: bytes, errors: tuple[type[BaseException], ...]) -> Any:
    """The PyAV container of `content`; PyAV's own errors, and the `OSError` it raises when
    its FFmpeg libraries fail to load, become `VideoExtractionError`."""
    try:
        return av.open(io.BytesIO(content))
    except errors as exc:
        raise VideoExtractionError(f"Failed to open video payload: {exc}") from exc


def _video_backend_error_types(av: Any) -> tuple[type[BaseException], ...]:
    """The exceptions of PyAV (and `OSError`) that mean "this video cannot be decoded"."""
    found: list[type[BaseException]] = [OSError]
    namespace = getattr(av, "error", None)
    for name in ("FFmpegError", "InvalidDataError"):
        kind = getattr(namespace, name, None)
        if (
            isinstance(kind, type)
            and issubclass(kind, BaseException)
            and not any(issubclass(kind, known) for known in found)
        ):
            found.append(kind)
    return tuple(found)


def _start_pts(stream: Any) -> int:
    start = getattr(stream, "start_time", None)
    return int(start) if start is not None else 0


def _frame_seconds(frame: Any, time_base: float, stream_start_seconds: float) -> float | None:
    """When `frame` is shown, in seconds from the start of the video."""
    pts = getattr(frame, "pts", None)
    if pts is not None:
        return max(0.0, float(pts) * time_base - stream_start_seconds)
    shown = getattr(frame, "time", None)
    if shown is not None:
        return max(0.0, float(shown) - stream_start_seconds)
    return None


def _refuse_oversized(width: int, height: int) -> None:
    if width > MAX_VIDEO_FRAME_SIDE or height > MAX_VIDEO_FRAME_SIDE:
        raise VideoExtractionError(
            f"Video frame dimensions {width}x{height} exceed the maximum "
            f"{MAX_VIDEO_FRAME_SIDE}px side"
        )


def _sample_frames_in_window(
    decoded_frames: Iterable[Any],
    *,
    offset_seconds: float,
    duration_seconds: float,
    sampling_rate: float,
    time_base: float,
    stream_start_seconds: float = 0.0,
    deadline_seconds: float | None = None,
    decode_error_types: tuple[type[BaseException], ...] = (),
) -> list[dict[str, Any]]:
    """The time and image blocks of the frames of `decoded_frames` inside the window, one
    per sampling interval (the first frame at or after each interval's start)."""
    interval = 1.0 / sampling_rate
    end = offset_seconds + duration_seconds
    due = offset_seconds
    blocks: list[dict[str, Any]] = []
    frames = 0
    spent = 0
    last_shown: float | None = None
    cut_short = False
    try:
        for frame in decoded_frames:
            if deadline_seconds is not None and time.monotonic() > deadline_seconds:
                raise VideoExtractionError(
                    f"Video decoding exceeded the {MAX_VIDEO_DECODE_SECONDS:.1f}s safety budget"
                )
            shown = _frame_seconds(frame, time_base, stream_start_seconds)
            if shown is None:
                continue
            if shown >= end:
                break
            if shown + 1e-6 < due:
                continue
            if frames >= MAX_VIDEO_SAMPLED_FRAMES:
                cut_short = True
                break
            image = base64.b64encode(_encode_jpeg(frame))
            text = f"Frame at t={_format_timestamp(shown)}"
            size = len(text.encode()) + len(image)
            if spent + size > MAX_VIDEO_EMITTED_BYTES:
                if frames == 0:
                    raise VideoExtractionError(
                        f"Video frame output exceeded the {MAX_VIDEO_EMITTED_BYTES} byte "
                        "safety budget before emitting a frame"
                    )
                cut_short = True
                break
            blocks.append({"type": "text", "text": text})
            blocks.append(
                {"type": "image", "base64": image.decode("ascii"), "mime_type": "image/jpeg"}
            )
            frames += 1
            spent += size
            last_shown = shown
            # the next interval that starts after this frame: a late frame does not push
            # the sampling grid back
            passed = math.floor((shown - offset_seconds) / interval) + 1
            due = max(due + interval, offset_seconds + interval * passed)
    except decode_error_types as exc:
        raise VideoExtractionError(f"Failed to decode video frames: {exc}") from exc
    if cut_short and last_shown is not None:
        blocks.append(
            {
                "type": "text",
                "text": (
                    f"Coverage truncated at t={_format_timestamp(last_shown)}: the output or "
                    "frame cap was reached before the full window was decoded. Continue from "
                    f"offset={last_shown:.3f} to see the remaining frames."
                ),
            }
        )
    return blocks


def _encode_jpeg(frame: Any) -> bytes:
    """`frame` as JPEG bytes, scaled down to the output bounds when larger."""
    try:
        from PIL import Image
    except ImportError as exc:
        raise VideoExtractionError(f"{MISSING_VIDEO_HINT} ({exc})") from exc
    width, height = getattr(frame, "width", None), getattr(frame, "height", None)
    if width is not None and height is not None:
        _refuse_oversized(int(width), int(height))  # before converting, which would copy it
    if hasattr(frame, "to_image"):
        image = frame.to_image()
    else:
        image = Image.fromarray(frame.to_ndarray(format="rgb24"))
    _refuse_oversized(*image.size)
    width, height = image.size
    if (
        width * height > MAX_VIDEO_FRAME_PIXELS
        or width > MAX_VIDEO_OUTPUT_WIDTH
        or height > MAX_VIDEO_OUTPUT_HEIGHT
    ):
        image = image.copy()
        image.thumbnail((MAX_VIDEO_OUTPUT_WIDTH, MAX_VIDEO_OUTPUT_HEIGHT),
                        Image.Resampling.LANCZOS)  # fmt: skip
        # thumbnail keeps the aspect ratio inside the box; a box of 1920x1080 holds at most
        # MAX_VIDEO_FRAME_PIXELS pixels
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()
