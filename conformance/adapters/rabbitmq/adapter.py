"""The RabbitMQ key-ordered-consumers conformance adapter over stdio (see README.md):
`python adapter.py [--url URL] [--queue-type classic|quorum] [--queues N]`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ks_rabbitmq_adapter import main

if __name__ == "__main__":
    sys.exit(main())
