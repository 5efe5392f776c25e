"""When a cron is due and when it fires next: LangGraph's schedule syntax, as pure functions.

A schedule is croniter's syntax (the one LangGraph's server uses): five fields, ``minute hour
day-of-month month day-of-week``, read in UTC unless the cron names an IANA ``timezone``. The
clock is always passed in, so the scheduler's decisions can be tested without waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from fathom.server.errors import Unprocessable

__all__ = ["check_schedule", "check_timezone", "is_due", "next_run", "parse_time"]


def check_schedule(schedule: object) -> str:
    """``schedule`` if croniter reads it, else 422 naming the field and the expected format."""
    if not isinstance(schedule, str) or not schedule.strip():
        raise Unprocessable("'schedule' is required: a cron expression such as '*/5 * * * *'")
    if not croniter.is_valid(schedule):
        raise Unprocessable(
            f"Invalid cron schedule {schedule!r} in 'schedule': expected the standard five "
            "fields 'minute hour day-of-month month day-of-week', such as '*/5 * * * *'"
        )
    return schedule


def check_timezone(timezone: object) -> str | None:
    """``timezone`` if it is an IANA zone name (or None), else 422."""
    if timezone is None:
        return None
    if isinstance(timezone, str) and timezone:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, KeyError):
            pass
        else:
            return timezone
    raise Unprocessable(
        f"Invalid timezone {timezone!r} in 'timezone': use an IANA name such as 'Europe/Paris'"
    )


def parse_time(value: object, field: str) -> datetime | None:
    """An ISO 8601 time (UTC when it names no offset), None for null; 422 otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    raise Unprocessable(f"'{field}' must be an ISO 8601 date-time; got {value!r}")


def next_run(schedule: str, after: datetime, timezone: str | None = None) -> datetime:
    """The first time strictly after ``after`` that ``schedule`` names, in UTC.

    The schedule is read in ``timezone`` (UTC when None), so ``0 9 * * *`` in
    ``Europe/Paris`` is nine in Paris, summer and winter.
    """
    base = after.astimezone(ZoneInfo(timezone)) if timezone else after.astimezone(UTC)
    return croniter(schedule, base).get_next(datetime).astimezone(UTC)


def is_due(cron: Mapping[str, Any], now: datetime) -> bool:
    """Whether ``cron`` should fire at ``now``: enabled, its next run reached, not ended."""
    if not cron.get("enabled", True):
        return False
    end_time = parse_time(cron.get("end_time"), "end_time")
    if end_time is not None and end_time < now:
        return False
    next_run_date = parse_time(cron.get("next_run_date"), "next_run_date")
    return next_run_date is not None and next_run_date <= now
