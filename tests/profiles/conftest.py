"""Each profile test starts from the registries as they were and leaves them so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fathom.profiles import registry


@pytest.fixture(autouse=True)
def clean_registries() -> Iterator[None]:
    registry._ensure_plugins()
    harness, provider = dict(registry._HARNESS), dict(registry._PROVIDER)
    yield
    registry._HARNESS.clear()
    registry._HARNESS.update(harness)
    registry._PROVIDER.clear()
    registry._PROVIDER.update(provider)
