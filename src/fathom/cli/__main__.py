"""`python -m fathom.cli` runs the `fathom` command."""

import sys

from fathom.cli.main import main

sys.exit(main())
