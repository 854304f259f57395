"""Where the specification's files live, relative to this package."""

from __future__ import annotations

from pathlib import Path

SPEC_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = SPEC_DIR.parent
SPEC_FILE = SPEC_DIR / "key-shared.md"
REQUIREMENTS_INDEX = SPEC_DIR / "requirements.json"
RETIRED_FILE = SPEC_DIR / "retired.txt"
SCHEMA_DIR = SPEC_DIR / "schemas"
TRACE_EVENT_SCHEMA = SCHEMA_DIR / "trace-event-v1.schema.json"
