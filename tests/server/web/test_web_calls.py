"""The Calls panel: the call card of a thread's runs, from the server's `fathom_calls` metadata.

Real browser (headless Chromium) against a live `fathom serve`; a run where the agent hands a
task to a sync `helper` subagent makes three calls: agent, helper, agent.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import expect
from tests.server.web.conftest import WebServer
from tests.server.web.support import new_thread, open_page, screenshot, send, wait_idle


def test_the_calls_panel_shows_each_call_of_the_last_run(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    thread_id = new_thread(page)
    expect(page.locator("#calls")).to_have_text("No calls recorded yet.")
    send(page, "ask helper")
    wait_idle(page)
    calls = page.locator("#calls details.call")
    expect(calls).to_have_count(3)
    expect(calls.locator(".call-caller")).to_have_text(["agent", "helper", "agent"])
    expect(calls.locator(".call-kind")).to_have_text(["agent", "subagent", "agent"])
    expect(calls.nth(1).locator(".call-msgs")).to_have_text("2 msgs")

    stored = httpx.get(f"{web_server.url}/threads/{thread_id}", timeout=30).json()[
        "metadata"]["fathom_calls"]
    tokens_in = sum(c["input_tokens"] for c in stored)
    tokens_out = sum(c["output_tokens"] for c in stored)
    expect(page.locator("#calls .call-totals")).to_have_text(
        f"3 calls · {tokens_in:,} in · {tokens_out:,} out · {tokens_in + tokens_out:,} tokens")

    helper = calls.nth(1)
    helper.locator("summary").click()
    items = helper.locator(".call-new li")
    expect(items.locator(".kind")).to_have_text(["system", "human"])
    expect(items.nth(1)).to_contain_text("Find the alpha fact")
    expect(helper.locator(".call-answer")).to_have_text("helper found: Find the alpha fact")
    last = calls.nth(2)
    last.locator("summary").click()
    expect(last.locator(".call-new li .kind")).to_have_text(["ai", "tool"])  # the subagent's answer
    expect(last.locator(".call-tools")).to_contain_text("task")
    screenshot(page, "calls")

    send(page, "plan")  # a second run: two calls of the agent
    wait_idle(page)
    expect(page.locator("#calls-run option")).to_have_count(2)
    expect(calls.locator(".call-caller")).to_have_text(["agent", "agent"])
    page.select_option("#calls-run", index=0)
    expect(calls.locator(".call-caller")).to_have_text(["agent", "helper", "agent"])
