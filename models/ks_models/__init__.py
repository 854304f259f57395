"""The TLA+ models of Key-Shared dispatch and the tooling that checks them with TLC.

The models (KeySharedOrdering, CursorSafety, BucketHandoff) live next to this package in
models/; `manifest.json` says how each configuration must end, and `keyshared model-check` runs
them, compares, and validates implementation traces against KeySharedOrdering.
"""

from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent.parent
MANIFEST = MODELS_DIR / "manifest.json"
MANIFEST_SCHEMA = MODELS_DIR / "manifest.schema.json"
COVERAGE = MODELS_DIR / "coverage.json"
README = MODELS_DIR / "README.md"
