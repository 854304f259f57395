"""Where the specification's files live, relative to this package."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import zipfile
from pathlib import Path

SHIPPED_SPEC_FOLDER = "keyshared-spec"
"""The folder, inside the archive `ks_spark.session.ship_packages` sends to Spark's executors, holding the spec's
data files (the requirements index, the schemas) that task-side code reads."""


def _spec_dir() -> Path:
    """The spec folder beside this package; when the package was imported from the archive shipped to Spark's
    executors, the archive's spec data, extracted once per process (files inside a zip cannot be opened by path)."""
    here = Path(__file__).resolve().parent.parent
    if here.is_dir() or not zipfile.is_zipfile(here):
        return here
    target = Path(tempfile.mkdtemp(prefix="keyshared-spec-"))
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    with zipfile.ZipFile(here) as archive:
        archive.extractall(target, [n for n in archive.namelist() if n.startswith(f"{SHIPPED_SPEC_FOLDER}/")])
    return target / SHIPPED_SPEC_FOLDER


SPEC_DIR = _spec_dir()
REPO_ROOT = SPEC_DIR.parent
SPEC_FILE = SPEC_DIR / "key-shared.md"
REQUIREMENTS_INDEX = SPEC_DIR / "requirements.json"
RETIRED_FILE = SPEC_DIR / "retired.txt"
SCHEMA_DIR = SPEC_DIR / "schemas"
TRACE_EVENT_SCHEMA = SCHEMA_DIR / "trace-event-v1.schema.json"
