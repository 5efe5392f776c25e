"""The usage panel shows the thread's spend against its budget, and the cap once reached.

Real browser (headless Chromium) against a live `fathom serve`; the `frugal` graph has a
budget of two model calls per thread.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import expect
from tests.server.web.conftest import WebServer
from tests.server.web.support import new_thread, open_page, send, wait_idle


def test_the_usage_panel_shows_the_budget_and_the_cap_it_reached(page: Any,
                                                                 web_server: WebServer):
    open_page(page, web_server.url)
    new_thread(page, "frugal")
    send(page, "hello")
    wait_idle(page)
    line = page.locator("#usage #budget")
    expect(line).to_contain_text("model calls 1 of 2 (50 %)")
    expect(line).not_to_have_class("budget reached")
    send(page, "again")
    wait_idle(page)
    expect(line).to_contain_text("model calls 2 of 2 (100 %)")
    send(page, "once more")
    wait_idle(page)
    expect(page.locator("#messages")).to_contain_text("model-call cap is reached")
    expect(line).to_contain_text("reached: model-call cap")
    expect(line).to_have_class("budget reached")
