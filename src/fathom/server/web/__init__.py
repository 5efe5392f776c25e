"""The web page that `fathom serve` shows at `/`: threads, live runs, todos, files, approvals.

Static files (`static/index.html`, `app.js`, `app.css`, written for fathom, no third-party
JavaScript) talk only to the server's own Agent Protocol endpoints. Markdown and code
highlighting are rendered by the server (`POST /ui/render`, markdown-it-py and Pygments) so the
page needs no Node.js and no bundled libraries. See `docs/web.md`.

Layer: server; it must not import protocols or cli.
"""

from fathom.server.web.routes import OPEN_WEB_PATHS, routes

__all__ = ["OPEN_WEB_PATHS", "routes"]
