"""Installed packages register profiles through entry points, fathom's groups and the
reference package's."""

from __future__ import annotations

import pytest

from fathom.profiles import get_harness_profile, get_provider_profile
from fathom.profiles.registry import load_plugins

PLUGIN = '''
from fathom.profiles import (
    HarnessProfile, ProviderProfile, register_harness_profile, register_provider_profile,
)

def harness():
    register_harness_profile("plugco", HarnessProfile(system_prompt_suffix="FROM PLUGIN"))

def provider():
    register_provider_profile("plugco", ProviderProfile(init_kwargs={"temperature": 0.5}))

def reference_group():
    register_harness_profile("plugco:ref", HarnessProfile(excluded_tools=frozenset({"execute"})))

def broken():
    raise RuntimeError("plugin bug")
'''

ENTRY_POINTS = """\
[fathom.harness_profiles]
plugco = plugco_profiles:harness
broken = plugco_profiles:broken

[fathom.provider_profiles]
plugco = plugco_profiles:provider

[deepagents.harness_profiles]
plugco-ref = plugco_profiles:reference_group
"""


def test_entry_point_plugins_register_profiles(tmp_path, monkeypatch) -> None:
    (tmp_path / "plugco_profiles.py").write_text(PLUGIN)
    dist = tmp_path / "plugco_profiles-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugco-profiles\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_harness_profile("plugco:any") is None

    with pytest.warns(UserWarning, match="broken.*plugin bug"):
        load_plugins(again=True)

    harness = get_harness_profile("plugco:ref")
    assert harness is not None
    assert harness.system_prompt_suffix == "FROM PLUGIN"  # provider level, fathom group
    assert harness.excluded_tools == {"execute"}  # model level, the reference's group
    provider = get_provider_profile("plugco:any")
    assert provider is not None and dict(provider.init_kwargs) == {"temperature": 0.5}
