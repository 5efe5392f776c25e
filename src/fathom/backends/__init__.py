"""Backends: where the agent's files live."""

from fathom.backends.base import BackendBase
from fathom.backends.composite import CompositeBackend
from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.policy import BackendPolicy, FileOperation, PolicyBackend
from fathom.backends.protocol import (
    BackendFactory,
    BackendProtocol,
    DeleteResult,
    EditResult,
    ExecuteResponse,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    SandboxBackendProtocol,
    WriteResult,
    supports_delete,
    supports_execute,
)
from fathom.backends.shell.bubblewrap import BubblewrapSandbox
from fathom.backends.shell.local import LocalShellBackend
from fathom.backends.shell.scope import SandboxScope
from fathom.backends.state import StateBackend
from fathom.backends.store import StoreBackend
from fathom.backends.utils import create_file_data

__all__ = [
    "BackendBase",
    "BackendFactory",
    "BackendPolicy",
    "BackendProtocol",
    "BubblewrapSandbox",
    "CompositeBackend",
    "DeleteResult",
    "EditResult",
    "ExecuteResponse",
    "FileDownloadResponse",
    "FileInfo",
    "FileOperation",
    "FileUploadResponse",
    "FilesystemBackend",
    "GlobResult",
    "GrepMatch",
    "GrepResult",
    "LocalShellBackend",
    "LsResult",
    "PolicyBackend",
    "ReadResult",
    "SandboxBackendProtocol",
    "SandboxScope",
    "StateBackend",
    "StoreBackend",
    "WriteResult",
    "create_file_data",
    "supports_delete",
    "supports_execute",
]
