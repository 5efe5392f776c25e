"""The filesystem capability: the file tools and the words they answer with.

- `middleware`: `FilesystemMiddleware` and its tools (`ls`, `read_file`, `write_file`,
  `edit_file`, `delete`, `glob`, `grep`) over any backend, with the reference's public
  names (`*_TOOL_DESCRIPTION`, the tools' `*Schema`s, `GLOB_TIMEOUT`, ...);
- `answers`: every answer the model reads, success and error, written once from the
  backends' typed results (`BackendError` with an `ErrorKind`);
- `media`: `read_file`'s answers for images, audio, video and documents; `video`: frames
  from a video (the `fathom[video]` extra).

`fathom.middleware.filesystem` stands for the reference's `deepagents.middleware.filesystem`
module: its names are importable from here, and `GLOB_TIMEOUT` is read from here when a
`glob` runs. The `execute` tool and its names are `fathom.middleware.execute`'s.

Layer: capabilities. Imports the core and `fathom.backends`.
"""

import sys
import types

from fathom.middleware.filesystem import media as _media
from fathom.middleware.filesystem import middleware as _middleware
from fathom.middleware.filesystem.media import (
    MAX_VIDEO_INPUT_BYTES,
    VideoExtractionError,
    extract_video_frames,
    media_after_tool_results,
    video_dependencies_available,
)
from fathom.middleware.filesystem.middleware import *  # noqa: F403  (its __all__)

__all__ = [
    "MAX_VIDEO_INPUT_BYTES",
    "VideoExtractionError",
    "extract_video_frames",
    "video_dependencies_available",
]
__all__ += _middleware.__all__

_move_media_results_after_tool_results = media_after_tool_results  # the reference's name

# The reference's `deepagents.middleware.filesystem` is one module, so its users (and its
# tests) replace these names on it with `monkeypatch.setattr`. Here they live in `media`,
# where `read_file` looks them up: setting one on this package sets it there too.
_MEDIA_NAMES = frozenset(
    {"MAX_VIDEO_INPUT_BYTES", "extract_video_frames", "video_dependencies_available"}
)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name in _MEDIA_NAMES:
            setattr(_media, name, value)


sys.modules[__name__].__class__ = _Package
