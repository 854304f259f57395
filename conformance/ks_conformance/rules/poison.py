"""The rules of spec section 11 Poison policies and operator actions."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

BLOCKED_KEY_LEAK = define(
    "blocked-key-leak",
    "KS-POI-3",
    Stage.EVENT,
    Scope.KEY,
    "a delivery of a message whose key has a blocked message",
    witness="the `key_blocked` event, the delivery",
    exercised="a key is blocked while later messages of it are unresolved",
    needs=lambda a: need(a.failures and "block" in a.policies, "poison policy block"),
)

UNJUSTIFIED_BLOCK = define(
    "unjustified-block",
    "KS-POI-3",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `key_blocked` of a message never released by an operator whose failures since restart do not "
        "exceed `max_redeliveries` (and would not with its returns counted: that is `return-counted`)"
    ),
    witness="the failures, the `key_blocked`",
    exercised="a `key_blocked`",
    needs=lambda a: need(a.failures and "block" in a.policies, "poison policy block"),
)

STALE_BUDGET = define(
    "stale-budget",
    "KS-POI-4",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `key_blocked` of a message an operator released, whose failures since that release do not exceed "
        "`max_redeliveries` (the release did not give a fresh budget)"
    ),
    witness="the `key_released`, the failures since, the `key_blocked`",
    exercised="a `key_blocked` of a released message",
    needs=lambda a: need(
        a.failures and "block" in a.policies and ("release" in a.ops), "poison policy block and op release"
    ),
)

DEAD_LETTER_MISMATCH = define(
    "dead-letter-mismatch",
    "KS-POI-2",
    Stage.EVENT,
    Scope.KEY,
    (
        "a `dead_letter` whose attempt is not the message's deliveries since restart, or whose reason is not "
        "its last failure"
    ),
    witness="the last failure, the `dead_letter`",
    exercised="a dead letter",
    needs=lambda a: need(a.failures and "dead-letter" in a.policies, "poison policy dead-letter"),
)

SKIP_IGNORED = define(
    "skip-ignored",
    "KS-POI-5",
    Stage.OP,
    Scope.KEY,
    "a `key_skipped` op whose key had a blocked message that it did not resolve",
    witness="the `key_blocked`, the `key_skipped`",
    exercised="a skip",
    needs=lambda a: need(a.failures and "block" in a.policies and ("skip" in a.ops), "poison policy block and op skip"),
)
