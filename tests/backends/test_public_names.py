"""The backends package's public names: star import, reference module paths."""

from __future__ import annotations

import importlib


def test_star_import_of_the_backends_package_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from fathom.backends import *", namespace)
    import fathom.backends as backends

    missing = [name for name in backends.__all__ if name not in namespace]
    assert missing == []


def test_local_shell_is_importable_from_the_reference_module_path() -> None:
    legacy = importlib.import_module("fathom.backends.local_shell")
    current = importlib.import_module("fathom.backends.shell.local")
    assert legacy.LocalShellBackend is current.LocalShellBackend
