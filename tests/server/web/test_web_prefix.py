"""The usage panel shows each agent's prompt-cache prefix figure from the thread's metadata.

Real browser (headless Chromium) against a live `fathom serve`; the figure is the mean
prefix reuse rate the server recorded in the thread's `fathom_prefix` metadata.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import expect
from tests.server.web.conftest import WebServer
from tests.server.web.support import new_thread, open_page, send, wait_idle


def test_the_usage_panel_shows_the_prefix_the_agent_kept(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    thread_id = new_thread(page)
    send(page, "plan")
    wait_idle(page)
    thread = httpx.get(f"{web_server.url}/threads/{thread_id}", timeout=30).json()
    figures = thread["metadata"]["fathom_prefix"]
    [(agent, entry)] = figures.items()
    assert entry["requests"] == 2 and entry["pairs"] == 1
    shown = f"{entry['mean'] * 100:.1f} %"
    row = page.locator("#usage tr[data-agent='agent']")
    expect(row.locator("td.reuse")).to_have_text(shown)
    expect(page.locator("#usage thead th").last).to_have_text("Prefix kept")
    assert re.fullmatch(r"\d+\.\d %", shown), agent
