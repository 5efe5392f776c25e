"""The page's server side: safe HTML from `POST /ui/render`, and the routes of the page.

Fast, in-process tests (httpx over ASGI): what a message can smuggle into the page, and which
paths answer without the API key.
"""

from __future__ import annotations

import httpx
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from fathom.server import create_app
from fathom.server.web.render import render_code, render_diff, render_markdown


class _State(TypedDict, total=False):
    x: int


def _app(api_key: str | None = None) -> httpx.AsyncClient:
    graph = StateGraph(_State).add_node("n", lambda s: s).add_edge(START, "n").add_edge("n", END)
    app = create_app({"g": graph.compile()}, api_key=api_key)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def test_raw_html_in_markdown_comes_out_as_text():
    html = render_markdown('hi <script>alert(1)</script> <img src=x onerror="alert(2)">')
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in html


def test_script_links_are_not_made_links_but_web_links_are():
    html = render_markdown("[a](javascript:alert(1)) [b](data:text/html,x) [c](https://example.com)")
    assert 'href="javascript' not in html and 'href="data:' not in html
    assert '<a href="https://example.com">c</a>' in html


def test_a_code_fence_is_highlighted_and_cannot_close_its_block():
    html = render_markdown('```python\ndef f(): return "</code></pre><script>x</script>"\n```')
    assert '<span class="k">def</span>' in html
    assert "<script>" not in html and "</code></pre><script>" not in html
    attack = render_markdown('```"><script>x</script>\nplain\n```')
    assert "<script>" not in attack and "plain" in attack


def test_files_are_highlighted_by_their_name_and_diffs_show_lines():
    assert '<span class="kn">import</span>' in render_code("import os\n", "/src/a.py")
    plain = render_code("<b>x</b>", "/notes.unknownext")
    assert plain == '<pre class="hl"><code>&lt;b&gt;x&lt;/b&gt;</code></pre>'
    diff = render_diff("one\ntwo\n", "one\nthree\n", "/a.txt")
    assert "-two" in diff and "+three" in diff and "+++ b/a.txt" in diff
    assert "no change" in render_diff("same\n", "same\n")


async def test_the_page_is_served_at_the_root_next_to_the_api():
    async with _app() as client:
        page = await client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert '<script src="/ui/app.js">' in page.text
        script = await client.get("/ui/app.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert ".hl" in (await client.get("/ui/pygments.css")).text
        missing = await client.get("/ui/secret.py")
        assert missing.status_code == 404 and "no such file" in missing.json()["detail"]
        assert (await client.post("/threads/search", json={})).status_code == 200  # API intact


async def test_render_answers_html_for_each_item_and_refuses_bad_ones():
    async with _app() as client:
        answer = await client.post("/ui/render", json={"items": [
            {"kind": "markdown", "text": "**b**"},
            {"kind": "code", "text": "x = 1", "path": "a.py"},
            {"kind": "diff", "old": "a\n", "new": "b\n"}]})  # fmt: skip
        assert answer.status_code == 200
        html = answer.json()["html"]
        assert html[0] == "<p><strong>b</strong></p>\n" and "+b" in html[2] and len(html) == 3
        bad = await client.post("/ui/render", json={"items": [{"kind": "html", "text": "<b>"}]})
        assert bad.status_code == 422 and "kind must be" in bad.json()["detail"]
        assert (await client.post("/ui/render", json={"items": "x"})).status_code == 422
        too_many = {"items": [{"kind": "markdown", "text": "x"}] * 201}
        assert (await client.post("/ui/render", json=too_many)).status_code == 422


async def test_with_an_api_key_only_the_page_shell_is_open():
    async with _app(api_key="k") as client:
        for path in ("/", "/ui/app.js", "/ui/app.css", "/ui/pygments.css"):
            assert (await client.get(path)).status_code == 200, path
        assert (await client.post("/ui/render", json={"items": []})).status_code == 401
        assert (await client.post("/threads/search", json={})).status_code == 401
        keyed = await client.post("/ui/render", json={"items": []}, headers={"x-api-key": "k"})
        assert keyed.status_code == 200
