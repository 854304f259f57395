"""The trace checker's parts, one module per part of spec/checking.md: `records` and `state` (section 1: the
reconstructed state), `membership`, `buckets`, `delivery` and `resolution` (2.1, checked at each event),
`end_of_op` (2.2) and `quiescence` (2.3). Each part is a class that extends the one before it, in the order
a reader meets them; `ks_conformance.checker.Checker` is the last, with the public interface.
"""
