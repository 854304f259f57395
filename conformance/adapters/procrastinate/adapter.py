"""The procrastinate conformance adapter over stdio: `python adapter.py [--dsn DSN]` (see README.md)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ks_procrastinate_adapter import main

if __name__ == "__main__":
    sys.exit(main())
