"""The keyshared specification as data: requirement index, trace format, configuration, the user errors."""

SPEC_VERSION = "1.5"
TRACE_VERSION = 1
