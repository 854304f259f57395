"""The keyshared reference dispatcher: the executable form of spec/key-shared.md.

Deterministic, single-threaded, in logical time. Start with `ks_reference.dispatcher.Dispatcher`;
`ks_reference.adapter.create()` gives the conformance kit's in-process adapter.
"""

__version__ = "0.1.0"
