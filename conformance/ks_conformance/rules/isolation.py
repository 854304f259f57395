"""The rules of spec section 15 Isolation and the look-ahead bound."""

from __future__ import annotations

from ks_conformance.rules.registry import Scope, Stage, define, need

IDLE_WHILE_READY = define(
    "idle-while-ready",
    "KS-ISO-1",
    Stage.OP,
    Scope.SUBSCRIPTION,
    (
        "strict and owner, selectors other than `pulsar-sticky`: at the end of an op, a message m among the "
        '`window` smallest unresolved offsets (with `read_bound = "lookahead"`: a message that fewer than *L*'
        " earlier waiting messages precede, KS-ISO-3; with `park_after` set, parked messages are left out of "
        'either count, KS-ISO-4; with `read_trigger = "heartbeat"`, at the end of an op other than a `tick`, '
        "only a message below the *read mark*: the first offset the read bound did not admit when the last "
        "tick ended, raised past every offset a `deliver`, `held` or `filter` names and reset to 0 by a "
        "`restart`, KS-GEN-8) is undelivered although it is the earliest unresolved message of its key, no "
        "message of its key is outstanding, retrying-and-not-ready (with `timer_slack = s`: or made ready by "
        "a phase 3 fewer than s ticks ago, KS-GEN-9) or blocked, no slot-mate explains it (with "
        '`drain_granularity = "hash"`: another key of its slot awaits redelivery, is blocked, or holds an '
        "outstanding delivery from an earlier epoch, or any outstanding delivery while members have filters, "
        "KS-DRN-3; with selector `buckets`: its bucket is withheld or has an outstanding delivery from an "
        "earlier epoch, KS-BKT-4, an ancestor of its segment has an unresolved message of the segment's "
        "range, KS-BKT-5, or it belongs to a batch and is not the batch's first message undelivered since "
        "publication or restart, or a later undelivered message of the batch is not the earliest unresolved "
        "of its key or its key is outstanding, awaiting or blocked, KS-BKT-10: a batch's later messages go "
        "with its first, exempt from capacity and window), and every member that accepts its key (at least "
        'one) is connected and below capacity (with `flow_control = "permits"`: holds a permit; selector '
        "`any`: at least one member that accepts its key is connected and below capacity)"
    ),
    witness="the publish of m, the op",
    exercised="an op ends with an undelivered message in the window",
    needs=lambda a: need(bool(a.selectors - {"pulsar-sticky"}), "a selector other than pulsar-sticky"),
)
