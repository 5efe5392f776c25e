"""The repeated-request ratio: the formula, the measurement card and the turns of a thread.

The fixture is a turn log of four threads (minutes, labels):

- A: (0, coffee) (2, coffee) (5, coffee) (7, flight)
- B: (0, order#1) (40, order#1)
- C: (0, coffee)
- D: (0, hotel) (1, hotel) (3, flight) (4, flight) (200, flight)

8 adjacent pairs; sticky at 30 min: A 2, D 2 (B's gap of 40 and D's of 196 are fresh
starts) = 4/8; at 5 min the same; at 120 min B's pair counts too = 5/8. Switches: A's
coffee -> flight and D's hotel -> flight = 2/8. Same-domain runs by label: [3, 1, 2, 1, 2, 3],
mean 2.0. Session lengths [4, 2, 1, 5]: single-turn 25 %, P50 2, P90 5 (nearest rank).
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from fathom.measure.sticky import (
    REVERSE_CRITERION,
    Turn,
    TurnView,
    adjacent_pairs,
    domain_runs,
    format_duration,
    format_sticky_card,
    nearest_rank,
    parse_duration,
    session_lengths,
    sticky_card,
    sticky_pairs,
    sticky_rate,
    thread_turns,
)
from fathom.pricing import Price

MIN = 60.0


def _log(thread: str, *turns: tuple[float, str | None]) -> list[Turn]:
    return [Turn(thread, minute * MIN, label) for minute, label in turns]


A = _log("A", (0, "coffee"), (2, "coffee"), (5, "coffee"), (7, "flight"))
B = _log("B", (0, "order#1"), (40, "order#1"))
C = _log("C", (0, "coffee"))
D = _log("D", (0, "hotel"), (1, "hotel"), (3, "flight"), (4, "flight"), (200, "flight"))
ALL = [*A, *B, *C, *D]


def test_three_coffees_then_a_flight_is_two_sticky_pairs_of_three() -> None:
    assert sticky_pairs(A, 30 * MIN) == (2, 3)
    assert sticky_rate(A, 30 * MIN) == pytest.approx(2 / 3)


def test_a_gap_over_the_idle_threshold_is_a_fresh_start() -> None:
    assert sticky_rate(B, 30 * MIN) == 0.0
    assert sticky_rate(B, 40 * MIN) == 1.0  # at most the threshold: still sticky


def test_the_fixture_gives_the_ratio_at_each_threshold() -> None:
    assert sticky_pairs(ALL, 30 * MIN) == (4, 8)
    assert sticky_rate(ALL, 5 * MIN) == 0.5
    assert sticky_rate(ALL, 120 * MIN) == 5 / 8


def test_a_single_turn_thread_adds_no_pairs_and_no_ratio_without_pairs() -> None:
    assert adjacent_pairs(C) == []
    assert sticky_rate(C) is None
    assert sticky_rate([*A, *C]) == pytest.approx(2 / 3)  # the denominator is pairs, not threads


def test_pairs_are_never_formed_across_threads() -> None:
    # Ordered globally by time, thread C's coffee (minute 0) would sit between A's turns and
    # D's flights next to A's flight; partitioned by thread it pairs with nothing.
    mixed = sorted(ALL, key=lambda t: t.ts)
    pairs = adjacent_pairs(mixed)
    assert all(a.thread_id == b.thread_id for a, b in pairs)
    assert len(pairs) == 8
    # Two threads that each say "coffee" once are not a sticky pair.
    assert sticky_rate([Turn("x", 0, "coffee"), Turn("y", 1, "coffee")]) is None


def test_turns_given_out_of_order_are_ordered_by_time_inside_their_thread() -> None:
    shuffled = [A[3], A[0], A[2], A[1]]
    assert sticky_pairs(shuffled) == (2, 3)


def test_unlabelled_turns_are_never_sticky_and_never_a_switch() -> None:
    turns = _log("u", (0, None), (1, None), (2, "coffee"))
    card = sticky_card(turns)
    assert card.rate == 0.0 and card.switch_rate == 0.0
    assert card.unlabelled_turns == 2
    assert domain_runs(turns) == [1, 1, 1]


def test_the_card_reports_the_five_numbers() -> None:
    card = sticky_card(ALL, idle_s=30 * MIN)
    assert (card.threads, card.turns, card.pairs, card.sticky_pairs) == (4, 12, 8, 4)
    assert session_lengths(ALL) == [4, 2, 1, 5]
    assert card.single_turn_share == 0.25
    assert (card.p50_turns, card.p90_turns) == (2, 5)
    assert card.rate == 0.5
    assert domain_runs(ALL) == [3, 1, 2, 1, 2, 3]
    assert card.mean_run_length == 2.0
    assert card.switch_rate == 0.25
    assert card.by_threshold == {5 * MIN: 0.5, 30 * MIN: 0.5, 120 * MIN: 5 / 8}
    assert card.domains == {"coffee": 4, "flight": 4, "hotel": 2, "order#1": 2}


def test_nearest_rank_percentiles() -> None:
    assert nearest_rank([1, 2, 4, 5], 0.5) == 2
    assert nearest_rank([1, 2, 4, 5], 0.9) == 5
    assert nearest_rank([7], 0.9) == 7
    assert nearest_rank([], 0.5) is None


def test_savings_are_daily_turns_times_the_ratio_then_tokens_money_and_seconds() -> None:
    card = sticky_card(ALL, turns_per_day=1000, tokens_per_call=(1500.0, 500.0),
                       price=Price(2.0, 8.0), seconds_per_call=2.0)
    savings = card.savings
    assert savings is not None
    assert savings.calls_per_day == 500.0
    assert savings.tokens_per_day == 500 * 2000
    assert savings.usd_per_day == pytest.approx((500 * 1500 * 2.0 + 500 * 500 * 8.0) / 1e6)
    assert savings.seconds_per_day == 1000.0


def test_turns_per_day_default_to_the_turns_over_the_days_they_span() -> None:
    week = [Turn("w", day * 86_400.0, "coffee") for day in range(8)]  # 8 turns over 7 days
    card = sticky_card(week, idle_s=2 * 86_400.0)
    assert card.savings is not None
    assert card.savings.turns_per_day == pytest.approx(8 / 7)
    assert card.savings.calls_per_day == pytest.approx(8 / 7)  # every pair is sticky
    same_day = sticky_card(A)  # within one day: one day's traffic
    assert same_day.savings is not None and same_day.savings.turns_per_day == 4
    assert same_day.savings.tokens_per_day is None and same_day.savings.usd_per_day is None


def test_the_reverse_criterion_says_when_stateful_patterns_rarely_pay() -> None:
    low = [*_log("l", (0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e"), (5, "f"), (6, "g"),
                 (7, "h"), (8, "i"), (9, "j"), (10, "j"))]  # 1 sticky pair of 10
    assert sticky_card(low).rate == pytest.approx(0.1)
    assert REVERSE_CRITERION > 0.1
    assert "rarely pay" in sticky_card(low).verdict
    assert "rarely pay" not in sticky_card(ALL).verdict
    assert "no thread has two turns" in sticky_card(C).verdict


def test_the_card_as_text() -> None:
    text = format_sticky_card(sticky_card(ALL, turns_per_day=200))
    assert "4 threads, 12 turns, 8 adjacent pairs (idle threshold 30m)" in text
    assert "single-turn 25.0%, P50 2 turns, P90 5 turns" in text
    assert "sticky rate         50.0% (4 of 8 pairs" in text
    assert "mean 2 turns" in text
    assert "switch rate         25.0%" in text
    assert "5m 50.0%, 30m 50.0%, 2h 62.5%" in text
    assert "100 savable calls/day (200 turns/day x 50.0%)" in text


@pytest.mark.parametrize(("text", "seconds"), [
    ("30m", 1800.0), ("90s", 90.0), ("2h", 7200.0), ("1d", 86_400.0), ("5", 300.0),
    ("0.5h", 1800.0), (" 30 min ", 1800.0),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_duration_says_how_to_write_one() -> None:
    with pytest.raises(ValueError, match="90s, 30m, 2h or 1d"):
        parse_duration("soon")
    shown = [format_duration(s) for s in (300.0, 1800.0, 7200.0, 90.0)]
    assert shown == ["5m", "30m", "2h", "90s"]


# --------------------------------------------------------------------------- a thread's turns


def test_turns_start_when_their_human_message_was_first_checkpointed() -> None:
    h1, h2 = HumanMessage("one", id="h1"), HumanMessage("two", id="h2")
    a1 = AIMessage("", id="a1", tool_calls=[{"name": "task", "args": {"subagent_type": "x"},
                                             "id": "c1"}])
    t1 = ToolMessage("done", tool_call_id="c1", id="t1")
    a2 = AIMessage("ok", id="a2")
    a3 = AIMessage("again", id="a3")
    snapshots = [  # (seconds, values), out of order on purpose
        (300.0, {"messages": [h1, a1, t1, a2, h2, a3], "step": "end"}),
        (10.0, {"messages": [h1]}),
        (0.0, {"messages": []}),
        (20.0, {"messages": [h1, a1, t1, a2], "step": "first done"}),
        (200.0, {"messages": [h1, a1, t1, a2, h2]}),
    ]
    seen: list[TurnView] = []

    def label(view: TurnView) -> str:
        seen.append(view)
        return f"turn{view.index}"

    turns = thread_turns("t", snapshots, label)
    assert turns == [Turn("t", 10.0, "turn0"), Turn("t", 200.0, "turn1")]
    assert [m.id for m in seen[0].messages] == ["h1", "a1", "t1", "a2"]
    assert [m.id for m in seen[1].messages] == ["h2", "a3"]
    assert seen[0].state["step"] == "first done"  # the state before the next turn began
    assert seen[1].state["step"] == "end"


def test_a_thread_without_checkpoints_has_no_turns() -> None:
    assert thread_turns("t", [], lambda view: "x") == []
