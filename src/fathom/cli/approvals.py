"""Answering approval requests at the prompt: approve, edit the arguments, or reject.

Arguments are edited in `$EDITOR` when it is set (as a JSON file), otherwise inline as
JSON. A reject may carry a reason, which the model receives in place of the tool's result.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any, TextIO

from fathom.cli.session import PendingApproval

__all__ = ["ask_decisions"]

Ask = Callable[[str], str]

CHOICES = {"approve": "y", "edit": "e", "reject": "n"}


def _show(request: dict[str, Any], out: TextIO) -> None:
    args = json.dumps(request.get("args", {}), indent=2, ensure_ascii=False)
    if len(args) > 2000:
        args = args[:2000] + "\n… (cut; edit to see all)"
    out.write(f"\napproval needed: {request.get('name', '?')}\n")
    for line in args.splitlines():
        out.write(f"  {line}\n")
    out.flush()


def _edit_in_editor(editor: str, args: dict[str, Any]) -> str:
    with tempfile.NamedTemporaryFile(
        "w", suffix=".json", prefix="fathom-args-", delete=False, encoding="utf-8"
    ) as handle:
        json.dump(args, handle, indent=2, ensure_ascii=False)
        path = handle.name
    try:
        subprocess.run([*shlex.split(editor), path], check=False)
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    finally:
        os.unlink(path)


def _edited_args(
    args: dict[str, Any], ask: Ask, out: TextIO, editor: str | None
) -> dict[str, Any] | None:
    """New arguments from the editor or the prompt; `None` when the person gives up."""
    while True:
        if editor:
            text = _edit_in_editor(editor, args)
        else:
            text = ask("new arguments as JSON (empty keeps them): ")
            if not text.strip():
                return args
        try:
            edited = json.loads(text)
        except json.JSONDecodeError as error:
            out.write(f"not valid JSON ({error}); try again or leave it empty\n")
        else:
            if isinstance(edited, dict):
                return edited
            out.write("the arguments must be a JSON object such as {\"file_path\": \"/a.md\"}\n")
        if editor and ask("edit again? [Y/n] ").strip().lower() in ("n", "no"):
            return None


def _decide(request: dict[str, Any], allowed: list[str], ask: Ask, out: TextIO,
            editor: str | None) -> dict[str, Any]:
    options = [f"{word} [{CHOICES[word]}]" for word in ("approve", "edit", "reject")
               if word in allowed]
    while True:
        answer = ask(" / ".join(options) + "? ").strip().lower()
        if answer in ("y", "yes", "a", "approve") and "approve" in allowed:
            return {"type": "approve"}
        if answer in ("e", "edit") and "edit" in allowed:
            edited = _edited_args(dict(request.get("args", {})), ask, out, editor)
            if edited is None:
                continue
            return {"type": "edit",
                    "edited_action": {"name": request.get("name"), "args": edited}}
        if answer in ("n", "no", "r", "reject") and "reject" in allowed:
            reason = ask("reason for the agent (optional): ").strip()
            decision: dict[str, Any] = {"type": "reject"}
            if reason:
                decision["message"] = reason
            return decision
        out.write(f"please answer {', '.join(CHOICES[w] for w in allowed if w in CHOICES)}\n")


def ask_decisions(
    approvals: list[PendingApproval],
    *,
    ask: Ask = input,
    out: TextIO | None = None,
    editor: str | None = None,
) -> dict[str, Any]:
    """Ask about every pending tool call; the value to resume the thread with.

    Returns `{interrupt_id: {"decisions": [...]}}` with one decision per tool call, in order.
    KeyboardInterrupt and EOFError propagate: the approvals then stay pending.
    """
    import sys

    out = out or sys.stdout
    resume: dict[str, Any] = {}
    for approval in approvals:
        decisions = []
        for request in approval.action_requests:
            allowed = next(
                (list(config.get("allowed_decisions", CHOICES))
                 for config in approval.review_configs
                 if config.get("action_name") == request.get("name")),
                list(CHOICES),
            )
            _show(request, out)
            decisions.append(_decide(request, allowed, ask, out, editor))
        resume[approval.interrupt_id] = {"decisions": decisions}
    return resume
