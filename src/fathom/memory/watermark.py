"""The consolidation watermark: which of a user's threads a consolidation run still has to read.

A cron that runs "every hour, over the last hour" double-processes a conversation when it
fires early and misses one when it fires late (or not at all, while the server was down).
Consolidation keeps a watermark instead: the newest `updated_at` it has processed, and the ids
of the threads updated at exactly that time. A thread is due when it was updated after the
watermark, or at the watermark's time without being one of its ids (two threads may share a
timestamp, and the second may be committed after a run read the first). A thread updated again
after it was processed is due again; nothing else is ever due twice, however often or rarely
the cron fires.

The functions here are pure (no store, no clock), so the rules can be tested over any
timeline; `fathom.memory.consolidation` reads and writes the watermark in the store.

Layer: capabilities (`fathom.memory`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["ThreadStamp", "Watermark", "advance", "is_due", "parse_time", "select_due"]


def parse_time(value: object) -> datetime:
    """An ISO 8601 time (a server's `updated_at`) as an aware UTC datetime.

    Raises:
        ValueError: `value` is not an ISO 8601 time.
    """
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        raise ValueError(f"not an ISO 8601 time: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class ThreadStamp:
    """A thread as the watermark sees it: its id and when it was last updated."""

    thread_id: str
    updated_at: datetime


@dataclass(frozen=True)
class Watermark:
    """The newest `updated_at` processed, and the threads processed at exactly that time."""

    time: datetime
    thread_ids: frozenset[str]

    def to_value(self) -> dict[str, Any]:
        """The watermark as a JSON store value."""
        return {"updated_at": self.time.isoformat(), "thread_ids": sorted(self.thread_ids)}

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> Watermark:
        """The watermark a store value holds (`to_value`'s shape).

        Raises:
            ValueError: the value is not a watermark.
        """
        ids = value.get("thread_ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"not a consolidation watermark: {dict(value)!r}")
        return cls(parse_time(value.get("updated_at")), frozenset(ids))


def is_due(thread: ThreadStamp, watermark: Watermark | None, floor: datetime | None) -> bool:
    """Whether `thread` still has to be processed.

    Without a watermark (the first run) every thread updated at or after `floor` is due
    (`floor` None: every thread).
    """
    if watermark is None:
        return floor is None or thread.updated_at >= floor
    if thread.updated_at != watermark.time:
        return thread.updated_at > watermark.time
    return thread.thread_id not in watermark.thread_ids


def select_due(
    newest_first: Iterable[ThreadStamp],
    watermark: Watermark | None,
    *,
    floor: datetime | None = None,
    limit: int | None = None,
) -> list[ThreadStamp]:
    """The due threads among `newest_first` (sorted by `updated_at`, newest first), oldest
    first, at most `limit` of them (the oldest: the watermark can then advance over them and
    the next run takes the rest).

    The iteration stops at the first thread older than the watermark (or the floor), so a
    caller paging through a server's thread search reads no further than it must. A thread
    listed twice (a search page that shifted) counts once.
    """
    oldest = watermark.time if watermark is not None else floor
    due: dict[str, ThreadStamp] = {}
    for thread in newest_first:
        if oldest is not None and thread.updated_at < oldest:
            break
        if thread.thread_id not in due and is_due(thread, watermark, floor):
            due[thread.thread_id] = thread
    ordered = sorted(due.values(), key=lambda t: (t.updated_at, t.thread_id))
    return ordered[:limit] if limit is not None else ordered


def advance(watermark: Watermark | None, processed: Sequence[ThreadStamp]) -> Watermark | None:
    """The watermark after `processed` (threads `select_due` chose) were consolidated.

    It moves to the newest processed time, keeping the ids processed at that time (with the
    ones already kept, when the time did not change), and never moves back.
    """
    if not processed:
        return watermark
    newest = max(t.updated_at for t in processed)
    at_newest = {t.thread_id for t in processed if t.updated_at == newest}
    if watermark is not None and watermark.time > newest:
        return watermark
    if watermark is not None and watermark.time == newest:
        at_newest |= watermark.thread_ids
    return Watermark(newest, frozenset(at_newest))
