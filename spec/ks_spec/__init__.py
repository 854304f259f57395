"""The keyshared specification as data: requirement index, trace format, shared errors."""

SPEC_VERSION = "1.1"
TRACE_VERSION = 1
