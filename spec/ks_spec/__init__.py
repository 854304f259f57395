"""The keyshared specification as data: requirement index, trace format, configuration, the user errors, and the Java
check TLC and Spark share (ks_spec.java)."""

SPEC_VERSION = "1.7"
TRACE_VERSION = 1
