"""An MCP "server" that reads its input and never answers, not even `initialize`."""

import sys

for _line in sys.stdin:
    pass
