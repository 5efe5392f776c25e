"""The reply grammar that answers an ``input-required`` task (``fathom.a2a.approvals``)."""

from __future__ import annotations

import pytest

from fathom.protocols.a2a.approvals import PendingInterrupt, ReplyError, describe, resume_value

HITL = PendingInterrupt(
    "i1",
    {
        "action_requests": [
            {"name": "send_email", "args": {"to": "bob"}},
            {"name": "delete", "args": {"path": "/x"}},
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]},
            {"action_name": "delete", "allowed_decisions": ["approve", "reject"]},
        ],
    },
)


@pytest.mark.parametrize("text", ["approve", "Approved.", "yes", "OK!", "y"])
def test_text_approval_words_approve_every_action(text: str) -> None:
    assert resume_value([HITL], text, None) == {"decisions": [{"type": "approve"}] * 2}


@pytest.mark.parametrize("text", ["reject: too risky", "No - too risky", "deny too risky"])
def test_text_rejection_words_reject_with_the_rest_as_reason(text: str) -> None:
    decision = {"type": "reject", "message": "too risky"}
    assert resume_value([HITL], text, None) == {"decisions": [decision] * 2}


def test_a_bare_reject_has_no_reason() -> None:
    assert resume_value([HITL], "reject", None) == {"decisions": [{"type": "reject"}] * 2}


def test_data_decisions_answer_each_action_in_order() -> None:
    data = {"decisions": [{"decision": "edit", "args": {"to": "carol"}}, {"type": "reject"}]}
    assert resume_value([HITL], "", data) == {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "carol"}}},
            {"type": "reject"},
        ]
    }


def test_a_decision_the_action_does_not_allow_is_refused() -> None:
    with pytest.raises(ReplyError, match="`delete` does not allow 'edit'"):
        resume_value([HITL], "", {"decision": "edit", "args": {}})


def test_a_wrong_number_of_decisions_is_refused() -> None:
    with pytest.raises(ReplyError, match="1 entries but 2 actions"):
        resume_value([HITL], "", {"decisions": [{"decision": "approve"}]})


def test_unreadable_text_is_refused_with_what_is_accepted() -> None:
    with pytest.raises(ReplyError, match="reply 'approve' or 'reject: <reason>'"):
        resume_value([HITL], "perhaps", None)


def test_a_plain_interrupt_is_resumed_with_the_text_or_the_data() -> None:
    plain = PendingInterrupt("i2", {"question": "name?"})
    assert resume_value([plain], "Ada", None) == "Ada"
    assert resume_value([plain], "ignored", {"name": "Ada"}) == {"name": "Ada"}


def test_several_interrupts_are_answered_by_id() -> None:
    a, b = PendingInterrupt("a", "first?"), PendingInterrupt("b", "second?")
    assert resume_value([a, b], "same", None) == {"a": "same", "b": "same"}


def test_describe_names_each_action_its_args_and_how_to_answer() -> None:
    text = describe([HITL])
    assert 'call `send_email` with {"to": "bob"} (allowed: approve, edit, reject)' in text
    assert "call `delete`" in text and "(allowed: approve, reject)" in text
    assert "Reply 'approve'" in text
    assert describe([PendingInterrupt("q", {"question": "name?"})]) == "name?"
