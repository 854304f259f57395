"""The trace checker's parts, one module per part of spec/checking.md: `records` and `state` (section 1: the
reconstructed state, plain data with its transitions), `membership`, `buckets`, `delivery` and `resolution` (2.1,
checked at each event: one `on_<kind>` function per event kind), `end_of_op` (2.2) and `quiescence` (2.3). Every
check is a function of the state (`st`); `ks_conformance.checker.Checker` is the state with the public interface
(`feed`, `end_op`, `finish`), and dispatches each event to its `on_<kind>` function.
"""
