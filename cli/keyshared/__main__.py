"""`python -m keyshared` runs the CLI."""

import sys

from keyshared.cli import main

sys.exit(main())
