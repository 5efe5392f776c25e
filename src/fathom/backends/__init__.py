"""Backends: where the agent's files live.

Layer: foundation; it must not import capabilities, agent, project, server, protocols or cli.
"""

from typing import TYPE_CHECKING

from fathom._lazy import lazy_exports

if TYPE_CHECKING:
    from fathom.backends.base import BackendBase
    from fathom.backends.composite import CompositeBackend
    from fathom.backends.filesystem import FilesystemBackend
    from fathom.backends.langsmith import LangSmithSandbox
    from fathom.backends.local_shell import DEFAULT_EXECUTE_TIMEOUT
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
    from fathom.backends.sandbox import BaseSandbox
    from fathom.backends.shell.bubblewrap import BubblewrapSandbox
    from fathom.backends.shell.local import LocalShellBackend
    from fathom.backends.shell.scope import SandboxScope
    from fathom.backends.state import StateBackend, UploadResults
    from fathom.backends.store import NamespaceFactory, StoreBackend
    from fathom.backends.utils import create_file_data

_WHERE = {
    "fathom.backends.base": ("BackendBase",),
    "fathom.backends.composite": ("CompositeBackend",),
    "fathom.backends.filesystem": ("FilesystemBackend",),
    "fathom.backends.langsmith": ("LangSmithSandbox",),
    "fathom.backends.local_shell": ("DEFAULT_EXECUTE_TIMEOUT",),
    "fathom.backends.policy": ("BackendPolicy", "FileOperation", "PolicyBackend"),
    "fathom.backends.protocol": (
        "BackendFactory", "BackendProtocol", "DeleteResult", "EditResult", "ExecuteResponse",
        "FileDownloadResponse", "FileInfo", "FileUploadResponse", "GlobResult", "GrepMatch",
        "GrepResult", "LsResult", "ReadResult", "SandboxBackendProtocol", "WriteResult",
        "supports_delete", "supports_execute",
    ),
    "fathom.backends.sandbox": ("BaseSandbox",),
    "fathom.backends.shell.bubblewrap": ("BubblewrapSandbox",),
    "fathom.backends.shell.local": ("LocalShellBackend",),
    "fathom.backends.shell.scope": ("SandboxScope",),
    "fathom.backends.state": ("StateBackend", "UploadResults"),
    "fathom.backends.store": ("NamespaceFactory", "StoreBackend"),
    "fathom.backends.utils": ("create_file_data",),
}

__all__ = [
    "DEFAULT_EXECUTE_TIMEOUT",
    "BackendBase",
    "BackendFactory",
    "BackendPolicy",
    "BackendProtocol",
    "BaseSandbox",
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
    "LangSmithSandbox",
    "LocalShellBackend",
    "LsResult",
    "NamespaceFactory",
    "PolicyBackend",
    "ReadResult",
    "SandboxBackendProtocol",
    "SandboxScope",
    "StateBackend",
    "StoreBackend",
    "UploadResults",
    "WriteResult",
    "create_file_data",
    "supports_delete",
    "supports_execute",
]

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
