"""Personal assistant with subagents: a supervisor over a calendar agent and an email agent.

LangChain's personal-assistant-with-subagents tutorial (multi-agent docs). Three layers:
stub API tools (bottom) that record what they do in an in-memory calendar and outbox; two
domain subagents that turn natural language into those calls (middle); a supervisor that
sees only two tools, `schedule_event` and `manage_email`, and merges their answers (top).

The run shows:

1. a single-domain request ("standup tomorrow at 9am"): only the calendar agent runs;
2. a cross-domain request: the supervisor calls both tools in one message, they run at the
   same time, and one merged answer comes back;
3. the same request with human approval on `create_calendar_event` and `send_email`
   (`HumanInTheLoopMiddleware` on the subagents, a checkpointer on the supervisor only):
   two interrupts; the calendar event is approved and the email's subject is edited.

"Today" is fixed at 2024-06-12 (a Wednesday), so "next Tuesday at 2pm" is
2024-06-18T14:00:00. Offline, one `ScriptedModel` plays all three agents: its policy
tells them apart by their system prompts and reads only what each is sent.

Run: `.venv/bin/python examples/patterns/personal_assistant.py`
or with a real model: `... personal_assistant.py --model openai:gpt-4.1-mini`
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Checkpointer, Command

from fathom.patterns.supervisor import Subagent, create_supervisor
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

TODAY = date(2024, 6, 12)
SLOTS = ["09:00", "14:00", "16:00"]
NEW_SUBJECT = "Mockups reminder"

SINGLE_DOMAIN = "Schedule a team standup tomorrow at 9am"
CROSS_DOMAIN = (
    "Schedule a meeting with the design team next Tuesday at 2pm for 1 hour, and send them "
    "an email reminder about reviewing the new mockups"
)

# --------------------------------------------------------------------------- bottom layer


@dataclass
class Office:
    """What the stub APIs did: events created and emails sent."""

    calendar: list[dict[str, Any]] = field(default_factory=list)
    outbox: list[dict[str, Any]] = field(default_factory=list)


def office_tools(office: Office) -> tuple[list[BaseTool], list[BaseTool]]:
    """The calendar tools and the email tools, writing into `office`."""

    @tool
    def create_calendar_event(
        title: str, start_time: str, end_time: str, attendees: list[str], location: str = ""
    ) -> str:
        """Create a calendar event. Times are ISO datetimes, e.g. 2024-01-15T14:00:00."""
        office.calendar.append(
            {"title": title, "start_time": start_time, "end_time": end_time,
             "attendees": list(attendees), "location": location}
        )
        return (
            f"Event created: {title} from {start_time} to {end_time} "
            f"with {len(attendees)} attendees"
        )

    @tool
    def get_available_time_slots(attendees: list[str], date: str, duration_minutes: int) -> str:
        """List the free start times (HH:MM) on an ISO date (e.g. 2024-01-15) for everyone."""
        return f"Available slots on {date}: {', '.join(SLOTS)}"

    @tool
    def send_email(to: list[str], subject: str, body: str, cc: list[str] | None = None) -> str:
        """Send an email."""
        office.outbox.append({"to": list(to), "subject": subject, "body": body,
                              "cc": list(cc or [])})
        return f"Email sent to {', '.join(to)} - Subject: {subject}"

    return [create_calendar_event, get_available_time_slots], [send_email]


# --------------------------------------------------------------------------- the agents

CALENDAR_AGENT_PROMPT = f"""You are a calendar scheduling assistant. Today is {TODAY.isoformat()} ({TODAY:%A}).
Turn natural-language requests into ISO datetimes (e.g. 2024-01-15T14:00:00); "next <weekday>" is the first such day after today.
Use get_available_time_slots to check availability when the request gives a duration, and create_calendar_event to create the event.
If no slot fits, stop and say so. Your final message is all the supervisor sees: always confirm what was scheduled (title, date, times, attendees)."""  # noqa: E501

EMAIL_AGENT_PROMPT = """You are an email assistant. Compose short professional emails: work out the recipients (teams are addressed as <team>@example.com), write the subject and body, and send them with send_email.
Your final message is all the supervisor sees: always confirm what was sent (recipients and subject)."""  # noqa: E501

SUPERVISOR_PROMPT = """You are a helpful personal assistant. You can schedule calendar events and send emails.
Break the user's request into the right tool calls and coordinate the results. When a request involves several actions, call the tools for all of them in one message.
Each tool sees only the request you write, so make it self-contained."""  # noqa: E501


def build_assistant(
    model: BaseChatModel,
    office: Office,
    *,
    approvals: bool = False,
    checkpointer: Checkpointer = None,
) -> Any:
    """The supervisor over the calendar and email agents (with approvals if asked)."""
    calendar_tools, email_tools = office_tools(office)
    calendar_hitl = [HumanInTheLoopMiddleware(
        interrupt_on={"create_calendar_event": True},
        description_prefix="Calendar event pending approval",
    )]
    email_hitl = [HumanInTheLoopMiddleware(
        interrupt_on={"send_email": True},
        description_prefix="Outbound email pending approval",
    )]
    calendar_agent = create_agent(
        model, tools=calendar_tools, system_prompt=CALENDAR_AGENT_PROMPT,
        middleware=calendar_hitl if approvals else [], name="calendar_agent",
    )
    email_agent = create_agent(
        model, tools=email_tools, system_prompt=EMAIL_AGENT_PROMPT,
        middleware=email_hitl if approvals else [], name="email_agent",
    )
    return create_supervisor(
        model,
        [
            Subagent(
                "schedule_event",
                "Schedule calendar events from a natural-language request. Use it when the "
                "user wants to create, move or check an appointment. Input: the request, "
                "e.g. 'meeting with the design team next Tuesday at 2pm for 1 hour'.",
                calendar_agent,
            ),
            Subagent(
                "manage_email",
                "Send emails from a natural-language request. Use it for notifications, "
                "reminders and messages. Input: who to write to and what about, e.g. "
                "'remind the design team to review the new mockups'.",
                email_agent,
            ),
        ],
        system_prompt=SUPERVISOR_PROMPT,
        checkpointer=checkpointer,
        name="supervisor",
    )


# --------------------------------------------------------------------------- offline model

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _team(text: str) -> str | None:
    match = re.search(r"\b(design|marketing|sales) team\b", text, re.IGNORECASE)
    return match.group(1).lower() if match else None


def _when(text: str, today: date) -> tuple[datetime, int] | None:
    """Start and length (minutes) of "tomorrow at 9am" / "next Tuesday at 2pm for 1 hour"."""
    lowered = text.lower()
    day: date | None = None
    if "tomorrow" in lowered:
        day = today + timedelta(days=1)
    match = re.search(r"next (" + "|".join(_WEEKDAYS) + ")", lowered)
    if match:
        ahead = (_WEEKDAYS.index(match.group(1)) - today.weekday() - 1) % 7 + 1
        day = today + timedelta(days=ahead)
    clock = re.search(r"\b(\d{1,2})(?::(\d{2}))?\s*(am|pm)\b", lowered)
    if day is None or clock is None:
        return None
    hour = int(clock.group(1)) % 12 + (12 if clock.group(3) == "pm" else 0)
    start = datetime(day.year, day.month, day.day, hour, int(clock.group(2) or 0))
    hours = re.search(r"(\d+)[- ]hour", lowered)
    return start, int(hours.group(1)) * 60 if hours else 30


def calendar_policy(request: ScriptRequest) -> AIMessage | str:
    """Calendar agent: (check slots →) create the event → confirm."""
    today_match = re.search(r"Today is (\d{4}-\d{2}-\d{2})", request.system_prompt or "")
    today = date.fromisoformat(today_match.group(1)) if today_match else TODAY
    text = request.last_human_text
    when = _when(text, today)
    if when is None:
        return "I could not work out the date and time; please give both."
    start, minutes = when
    end = start + timedelta(minutes=minutes)
    team = _team(text)
    attendees = [f"{team}-team@example.com"] if team else ["team@example.com"]
    title = "Team standup" if "standup" in text.lower() else (
        f"Meeting with the {team} team" if team else "Meeting")
    results = request.turn_results
    create = tool_call("create_calendar_event", {
        "title": title, "start_time": start.isoformat(), "end_time": end.isoformat(),
        "attendees": attendees,
    })
    if not results:
        if "hour" in text.lower():
            return ai("", tool_call("get_available_time_slots", {
                "attendees": attendees, "date": start.date().isoformat(),
                "duration_minutes": minutes,
            }))
        return ai("", create)
    last = results[-1]
    if last.name == "get_available_time_slots":
        if f"{start:%H:%M}" not in last.text:
            return f"No free slot at {start:%H:%M} on {start.date()}; nothing was scheduled."
        return ai("", create)
    if last.status == "error":
        return f"The event was not created: {last.text}"
    return (f"Scheduled '{title}' on {start:%A %B %d}, {start:%H:%M}-{end:%H:%M} "
            f"with {', '.join(attendees)}. ({last.text.splitlines()[-1]})")


def email_policy(request: ScriptRequest) -> AIMessage | str:
    """Email agent: send → confirm."""
    text = request.last_human_text
    results = request.turn_results
    if not results:
        team = _team(text)
        to = [f"{team}-team@example.com"] if team else ["team@example.com"]
        about = re.search(r"about (.+)$", text)
        topic = about.group(1).rstrip(".") if about else "the request"
        subject = ("Reminder: Please Review the New Mockups" if "mockups" in text.lower()
                   else f"Reminder: {topic}")
        body = f"Hi {team or 'all'} team,\n\nA quick reminder about {topic}.\n\nThanks!"
        return ai("", tool_call("send_email", {"to": to, "subject": subject, "body": body}))
    sent = re.search(r"Email sent to .+", results[-1].text)
    if sent is None:
        return f"The email was not sent: {results[-1].text}"
    return f"Done. {sent.group(0)}"


def supervisor_policy(request: ScriptRequest) -> AIMessage | str:
    """Supervisor: dispatch to one or both tools, then merge what came back."""
    results = request.turn_results
    if results:
        return "Here is what I did:\n" + "\n".join(f"- {r.text}" for r in results)
    text = request.last_human_text
    lowered = text.lower()
    wants_calendar = bool(re.search(r"schedule|meeting|standup|calendar", lowered))
    wants_email = bool(re.search(r"email|remind", lowered))
    calls = []
    if wants_calendar and wants_email and ", and " in text:
        calendar_part, email_part = text.split(", and ", 1)
        team = _team(text)
        if team:
            email_part = re.sub(r"\bthem\b", f"the {team} team", email_part)
        calls.append(tool_call("schedule_event", {"request": calendar_part}))
        calls.append(tool_call("manage_email", {"request": email_part[0].upper() + email_part[1:]}))
    elif wants_calendar:
        calls.append(tool_call("schedule_event", {"request": text}))
    elif wants_email:
        calls.append(tool_call("manage_email", {"request": text}))
    else:
        return "I can schedule calendar events and send emails. What should I do?"
    return ai("", *calls)


def assistant_policy(request: ScriptRequest) -> AIMessage | str:
    """One model for all three agents: which one is asking is in its system prompt."""
    system = request.system_prompt or ""
    if system.startswith("You are a calendar"):
        return calendar_policy(request)
    if system.startswith("You are an email"):
        return email_policy(request)
    return supervisor_policy(request)


# --------------------------------------------------------------------------- the run


def _turn(supervisor: Any, text: str, thread: str, usage: AgentUsage) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}, "callbacks": [usage]}
    result = supervisor.invoke({"messages": [HumanMessage(text)]}, config)
    dispatch = [m for m in result["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    return {
        "answer": result["messages"][-1].text,
        "dispatch_messages": [[tc["name"] for tc in m.tool_calls] for m in dispatch],
        "calls": {name: t.calls for name, t in usage.totals().items()},
    }


def _decide(interrupt_value: dict[str, Any]) -> dict[str, Any]:
    """Approve calendar events; send emails with the subject changed to NEW_SUBJECT."""
    decisions = []
    for action in interrupt_value["action_requests"]:
        if action["name"] == "send_email":
            args = {**action["args"], "subject": NEW_SUBJECT}
            decisions.append({"type": "edit", "edited_action": {"name": "send_email",
                                                                "args": args}})
        else:
            decisions.append({"type": "approve"})
    return {"decisions": decisions}


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Run the three flows of the tutorial and return what happened."""
    model = model or ScriptedModel(policy=assistant_policy)
    report: dict[str, Any] = {}

    print("== 1. Single domain ==")
    office = Office()
    usage = AgentUsage()
    single = _turn(build_assistant(model, office), SINGLE_DOMAIN, "1", usage)
    print(f"user: {SINGLE_DOMAIN}")
    print(f"supervisor tool calls: {single['dispatch_messages']}")
    print(f"model calls: {single['calls']}")
    print(f"assistant: {single['answer']}")
    report["single"] = {**single, "calendar": office.calendar, "outbox": office.outbox}

    print("\n== 2. Cross domain ==")
    office = Office()
    usage = AgentUsage()
    cross = _turn(build_assistant(model, office), CROSS_DOMAIN, "2", usage)
    print(f"user: {CROSS_DOMAIN}")
    print(f"supervisor tool calls: {cross['dispatch_messages']}")
    print(f"model calls: {cross['calls']}")
    print(f"assistant: {cross['answer']}")
    report["cross"] = {**cross, "calendar": office.calendar, "outbox": office.outbox}

    print("\n== 3. With approvals ==")
    office = Office()
    supervisor = build_assistant(model, office, approvals=True, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "6"}}
    result = supervisor.invoke({"messages": [HumanMessage(CROSS_DOMAIN)]}, config)
    interrupts = list(result.get("__interrupt__", []))
    pending = sorted(
        ((a["name"], a["args"]) for i in interrupts for a in i.value["action_requests"]),
        key=lambda item: item[0],
    )
    print(f"interrupted: {bool(interrupts)} ({len(interrupts)} interrupts)")
    for name, args in pending:
        print(f"  pending: {name}({args})")
    print(f"before any decision: calendar={office.calendar} outbox={office.outbox}")
    rounds = 0
    while interrupts and rounds < 5:
        rounds += 1
        resume = {i.id: _decide(i.value) for i in interrupts}
        result = supervisor.invoke(Command(resume=resume), config)
        interrupts = list(result.get("__interrupt__", []))
    print(f"calendar: {office.calendar}")
    print(f"outbox subjects: {[m['subject'] for m in office.outbox]}")
    print(f"assistant: {result['messages'][-1].text}")
    report["approvals"] = {
        "interrupts": len(pending),
        "pending": pending,
        "calendar": office.calendar,
        "outbox": office.outbox,
        "answer": result["messages"][-1].text,
    }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="a real model as provider:model (default: the offline scripted model)"
    )
    args = parser.parse_args()
    main(init_chat_model(args.model) if args.model else None)
