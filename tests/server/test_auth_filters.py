"""`matches_filter` and `normalize_user`: the pieces of custom auth that need no server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from fathom.server.auth import AuthUser, BadFilter, BadUserError, matches_filter, normalize_user
from fathom.server.auth.run_config import attach_identity, rebuild_identity

RECORD = {"owner": "alice", "tags": ["a", "b"], "team": "red"}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (None, True),
        ({}, True),
        ({"owner": "alice"}, True),
        ({"owner": "bob"}, False),
        ({"missing": None}, False),
        ({"owner": {"$eq": "alice"}}, True),
        ({"owner": {"$eq": "bob"}}, False),
        ({"tags": {"$contains": "a"}}, True),
        ({"tags": {"$contains": ["a", "b"]}}, True),
        ({"tags": {"$contains": ["a", "z"]}}, False),
        ({"owner": {"$contains": "a"}}, False),  # not a list
        ({"owner": "alice", "team": "blue"}, False),  # every key must hold
        ({"$or": [{"owner": "bob"}, {"team": "red"}]}, True),
        ({"$or": [{"owner": "bob"}, {"team": "blue"}]}, False),
        ({"$and": [{"owner": "alice"}, {"team": "red"}]}, True),
        ({"$and": [{"owner": "alice"}, {"team": "blue"}]}, False),
        ({"$or": [{"owner": "bob"}, {"team": "red"}], "owner": "bob"}, False),
    ],
)
def test_a_filter_matches_metadata_as_langgraph_api_does(
    flt: dict[str, Any] | None, expected: bool
) -> None:
    assert matches_filter(RECORD, flt) is expected


@pytest.mark.parametrize(
    "flt",
    [
        {"$or": [{"owner": "alice"}]},  # fewer than two groups
        {"$and": "owner"},
        {"owner": {"$gt": 1}},
        {"owner": {"$eq": "a", "$contains": "b"}},
        {"$or": [{"$or": [{"$or": [{"a": 1}, {"b": 2}]}, {"c": 3}]}, {"d": 4}]},  # too deep
    ],
)
def test_a_malformed_filter_is_the_handlers_bug_reported_as_500(flt: dict[str, Any]) -> None:
    with pytest.raises(BadFilter) as caught:
        matches_filter(RECORD, flt)
    assert caught.value.status == 500


@dataclass
class _Member:
    identity: str
    org: str
    permissions: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    ("result", "identity", "permissions"),
    [
        ("alice", "alice", []),
        ({"identity": "bob", "permissions": ["read"], "org": "x"}, "bob", ["read"]),
        ((["write"], "carol"), "carol", ["write"]),
        (_Member("dave", "y", ["admin"]), "dave", ["admin"]),
    ],
)
def test_every_shape_an_authenticate_handler_returns_becomes_a_user(
    result: Any, identity: str, permissions: list[str]
) -> None:
    user, granted = normalize_user(result)

    assert user.identity == user["identity"] == identity
    assert granted == permissions == user.permissions
    assert user.display_name == identity
    assert user.is_authenticated is True


def test_a_user_keeps_the_handlers_extra_fields_as_attributes_and_keys() -> None:
    user, _ = normalize_user({"identity": "bob", "org": "x", "display_name": "Bob"})

    assert user.org == user["org"] == "x"
    assert user.display_name == "Bob"
    with pytest.raises(AttributeError):
        _ = user.nothing


@pytest.mark.parametrize("result", [None, 42, {"name": "no identity"}, ("a", "b", "c"), ""])
def test_a_result_naming_no_user_is_refused(result: Any) -> None:
    with pytest.raises(BadUserError):
        normalize_user(result)


def test_the_identity_survives_the_run_records_json_and_drops_forged_keys() -> None:
    user, permissions = normalize_user({"identity": "alice", "permissions": ["p"]})
    config: dict[str, Any] = {"configurable": {"langgraph_auth_user_id": "mallory", "x": 1}}

    attach_identity(config, (user, permissions))
    configurable = dict(config["configurable"])
    rebuild_identity(configurable)

    assert config["configurable"]["langgraph_auth_user"] == user.to_dict()  # plain JSON
    assert isinstance(configurable["langgraph_auth_user"], AuthUser)
    assert configurable["langgraph_auth_user"].identity == "alice"
    assert configurable["langgraph_auth_user_id"] == "alice"
    assert configurable["langgraph_auth_permissions"] == ["p"]
    assert configurable["x"] == 1
