"""The rules of spec section 20 Configuration."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

CONFIG_ACCEPTED = define(
    "config-accepted",
    "KS-CFG-1",
    Stage.HARNESS,
    Scope.SUBSCRIPTION,
    "a configuration the spec refuses was accepted",
    needs=lambda a: need("ring" in a.selectors or bool(a.selectors - {"buckets"}), "a selector other than buckets"),
)
