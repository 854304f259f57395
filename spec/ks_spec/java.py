"""Finding Java 17 or newer, which TLC (the models) and Spark need: one place both use, neither imports the other."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ks_spec.errors import Unavailable

MINIMUM_JAVA = 17
INSTALL_HINT = (
    "install a Java 17+ runtime (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`; "
    "macOS: `brew install openjdk@17`) or set JAVA_HOME"
)


def find_java() -> Path:
    """Return the `java` executable (JAVA_HOME first, then PATH) or raise Unavailable."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file():
            return candidate
    found = shutil.which("java")
    if found is None:
        raise Unavailable(f"Java {MINIMUM_JAVA}+ is required but `java` was not found: {INSTALL_HINT}")
    return Path(found)


def java_major_version(java: Path) -> int:
    """Ask `java -version` for the major version (8 for 1.8, 17 for 17.0.15)."""
    completed = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', completed.stderr + completed.stdout)
    if match is None:
        raise Unavailable(f"could not read the version of {java}: {INSTALL_HINT}")
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


def require_java() -> Path:
    """Return a Java 17+ executable, or raise Unavailable with one line saying how to get it."""
    java = find_java()
    major = java_major_version(java)
    if major < MINIMUM_JAVA:
        raise Unavailable(f"Java {MINIMUM_JAVA}+ is required but {java} is Java {major}: {INSTALL_HINT}")
    return java
