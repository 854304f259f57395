"""How a conformance run's checks become requirement statuses (spec/report-format.md).

`check_needs` says which checks of spec/checking.md the capabilities an adapter declares can exercise at all (the
kit never draws what an adapter cannot do, so those requirements are *skipped*, with the reason);
`requirement_statuses` turns a run's findings and exercise counts into one status per requirement: failed or
warning, passed, vacuous (applicable but never exercised), skipped or untested.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ks_spec.config import CONFIG_DEFAULTS, OUT_OF_ORDER_KINDS
from ks_spec.requirements import load_index
from ks_spec.slots import SLOT_SELECTORS

from ks_conformance.anomalies import Anomaly
from ks_conformance.catalogue import INDIRECT, checks_of
from ks_conformance.harness import FILTER_SELECTORS_REFUSED
from ks_conformance.protocol import Capabilities
from ks_conformance.results import RunResult
from ks_conformance.search import usable_values


def check_needs(
    name: str,
    capabilities: Capabilities,
    skipped: Mapping[str, str],
    refused: Mapping[str, Sequence[Any]] | None = None,
) -> str | None:
    """Why an anomaly's check cannot be exercised against these capabilities, or None if it can."""
    ops = set(capabilities.ops) - set(skipped)
    selectors = set(capabilities.selectors)
    policies = set(capabilities.poison_policies)
    failures = "nack" in ops or capabilities.ack_timeout
    refusals = refused or {}

    def need(condition: bool, what: str) -> str | None:
        return None if condition else what

    def positive(field_name: str) -> bool:
        """True if the kit may draw a value above 0 for a timing field (declared, and not refused)."""
        return any(v > 0 for v in usable_values(capabilities, refusals, field_name))

    no_timers = "behaviour driven by ticks (the implementation declares timers: false)"

    def supported(field_name: str) -> str:
        if not capabilities.timers:
            return no_timers
        values = usable_values(capabilities, refusals, field_name)
        gone = sorted(set(refusals.get(field_name, ())))
        said = f"; refused {gone}" if gone else ""
        return f"{field_name} > 0 (the adapter supports {values or 'none of the values drawn'}{said})"

    fixed_target = bool(selectors - {"pulsar-sticky", "buckets"})
    # Filters are drawn only under a selector that takes them (the others refuse them, spec section 5).
    filtering = capabilities.filters and bool(selectors - set(FILTER_SELECTORS_REFUSED))
    no_filters = f"capability filters and a selector that takes them (not {', '.join(FILTER_SELECTORS_REFUSED)})"

    def forms(field_name: str) -> list[Any]:
        """The values of an option the kit may draw: the declared ones, else the default alone."""
        declared = capabilities.config_values.get(field_name, [CONFIG_DEFAULTS[field_name]])
        return [v for v in declared if v not in refusals.get(field_name, ())]

    # What can deliver a message again (KS-RES-2, KS-RTY-5): a failure, a leave, an eviction or a restart.
    redelivery = (
        "nack" in ops
        or (capabilities.ack_timeout and "tick" in ops and positive("ack_timeout"))
        or "remove_consumer" in ops
        or ("disconnect" in ops and "tick" in ops and positive("evict_after"))
        or "restart" in ops
    )
    no_redelivery = "a source of redelivery: nack, ack_timeout, remove_consumer, disconnect with eviction, or restart"
    # What gives one tick effects of two phases (KS-GEN-7): a timeout (phase 1, its poisoning 2, a redelivery 5),
    # an eviction (phase 4, then the returned messages' delivery 5), or a retry made ready by the tick (5) with
    # a cursor persisted at an interval (6).
    two_phases = (
        (capabilities.ack_timeout and positive("ack_timeout"))
        or ("disconnect" in ops and positive("evict_after"))
        or (failures and positive("backoff_base") and capabilities.cursor and positive("persist_interval"))
    )
    # A seek is drawn under a selector other than buckets (spec section 14).
    # Delays are specified for the reliable profiles without buckets (spec section 6): elsewhere the op is refused.
    delaying = "publish_delayed" in ops and "tick" in ops and bool(selectors - {"buckets"})
    delaying = delaying and bool(set(capabilities.profiles) - {"best-effort"})
    no_delay = "op publish_delayed, a reliable profile and a selector other than buckets"
    seeking = "seek" in ops and bool(selectors - {"buckets"})
    no_seek = "op seek and a selector other than buckets"
    # What ends a delivery without a result, so that a zombie op has something to answer (KS-ACK-3).
    zombie_ops = {"zombie_ack", "zombie_nack"} & set(ops)
    ended = (
        (capabilities.ack_timeout and "tick" in ops and positive("ack_timeout"))
        or "remove_consumer" in ops
        or ("disconnect" in ops and "tick" in ops and positive("evict_after"))
    )
    no_ending = "a delivery that ends without a result: ack_timeout, remove_consumer, or disconnect with eviction"
    # An extension moves a timeout: it needs timeouts (KS-RTY-8, KS-RTY-9).
    extension = need(capabilities.ack_timeout and "tick" in ops, "capability ack_timeout") or need(
        positive("ack_timeout"), supported("ack_timeout")
    )
    requirements: dict[str, str | None] = {
        "duplicate": need(redelivery, no_redelivery),
        "attempt-miscount": need(redelivery, no_redelivery),
        "system-fault": None,
        "stale-nack-accepted": need("nack" in ops, "op nack"),
        "zombie-accepted": need(bool(zombie_ops), "op zombie_ack or zombie_nack") or need(ended, no_ending),
        "zombie-ack-ignored": need("zombie_ack" in ops, "op zombie_ack")
        or need(ended, no_ending)
        or need(True in forms("ack_by_id"), "ack_by_id = true (declared in config_values)"),
        "holder-nack-ignored": need("nack" in ops, "op nack"),
        "delivered-before-due": need(delaying, no_delay),
        "blocked-behind-delayed": need(delaying, no_delay),
        "due-left-waiting": need(delaying, no_delay),
        "premature-timeout": need(capabilities.ack_timeout and "tick" in ops, "capability ack_timeout")
        or need(positive("ack_timeout"), supported("ack_timeout")),
        "missed-timeout": need(capabilities.ack_timeout and "tick" in ops, "capability ack_timeout")
        or need(positive("ack_timeout"), supported("ack_timeout")),
        "extended-timeout-early": need("extend" in ops, "op extend") or extension,
        "extended-timeout-missed": need("extend" in ops, "op extend") or extension,
        "extension-lost": need("extend" in ops, "op extend") or extension,
        "zombie-extension": need("extend" in ops, "op extend") or extension,
        "early-retry": need(failures and "tick" in ops, "op nack or capability ack_timeout")
        or need(positive("backoff_base"), supported("backoff_base")),
        "retry-overtaken": need(failures or "remove_consumer" in ops, "op nack, ack_timeout or remove_consumer"),
        "retry-overrun": need(failures and bool(policies), "failures and a poison policy"),
        "poison-ignored": need(failures and bool(policies) and "tick" in ops, "failures and a poison policy"),
        "blocked-key-leak": need(failures and "block" in policies, "poison policy block"),
        "unjustified-block": need(failures and "block" in policies, "poison policy block"),
        "stale-budget": need(
            failures and "block" in policies and "release" in ops, "poison policy block and op release"
        ),
        "return-counted": need(failures and bool(policies) and "tick" in ops, "failures and a poison policy")
        or need("remove_consumer" in ops or "disconnect" in ops, "op remove_consumer or disconnect"),
        "skip-ignored": need(failures and "block" in policies and "skip" in ops, "poison policy block and op skip"),
        "dead-letter-mismatch": need(failures and "dead-letter" in policies, "poison policy dead-letter"),
        "unjustified-resolution": need(
            (failures and bool(policies & {"drop", "dead-letter"})) or "skip" in ops, "a poison policy that resolves"
        ),
        "premature-eviction": need("disconnect" in ops and "tick" in ops, "op disconnect")
        or need(positive("evict_after"), supported("evict_after")),
        "missed-eviction": need("disconnect" in ops and "tick" in ops, "op disconnect")
        or need(positive("evict_after"), supported("evict_after")),
        "inactive-delivery": need("disconnect" in ops, "op disconnect"),
        "reconnect-ignored": need("reconnect" in ops and "disconnect" in ops, "op reconnect"),
        "filter-violation": need(filtering, no_filters),
        "unjustified-filter": need(filtering, no_filters),
        "unfiltered-wait": need(filtering and fixed_target, no_filters),
        "unjustified-outcome": None,
        "filtered-without-members": need(filtering and "remove_consumer" in ops, no_filters),
        "resurrected": need("restart" in ops, "op restart"),
        "persist-early": need("tick" in ops, "op tick")
        or need(capabilities.cursor, "a persisted cursor (capability cursor)")
        or need(positive("persist_interval"), supported("persist_interval")),
        "persist-late": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "restart-skip": need("restart" in ops, "op restart")
        or need(capabilities.cursor, "a persisted cursor (capability cursor): without one nothing is volatile"),
        "seek-skip": need(seeking, no_seek),
        "seek-resurrected": need(seeking, no_seek),
        "seek-unpersisted": need(seeking, no_seek)
        or need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "seek-stale-ack": need(seeking, no_seek) or need("ack" in ops, "op ack"),
        "cursor-skip": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "cursor-regress": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "cursor-stall": need(capabilities.cursor, "a persisted cursor (capability cursor)"),
        "overtaken-hold": need(
            capabilities.held_events,
            "held events (capability held_events); a held message overtaken shows as key-reorder (KS-ORD-1)",
        ),
        "drain-stuck": need(
            capabilities.held_events,
            "held events (capability held_events); a drain that never clears shows as stuck-key (KS-LIV-1)",
        )
        or need(bool(selectors - {"any"}), "a selector with key affinity (with any, a held key never moves: no drain)")
        or need(
            "owner" in capabilities.profiles and bool(selectors - {"any", "buckets", "partitions"}),
            "the owner profile with a selector other than any, buckets and partitions (in strict a key's next message "
            "waits for the previous one, under buckets a moving bucket is withheld instead, KS-BKT-4, and under "
            "partitions a key moves only away from a leaver, whose deliveries return with it: no key drains)",
        ),
        "unjustified-hold": need(
            capabilities.held_events, "held events (capability held_events); a needless hold shows as idle-while-ready"
        )
        or need(
            "hash" in forms("drain_granularity") and bool(selectors & set(SLOT_SELECTORS)),
            "drain_granularity hash declared in config_values, with a slot selector (KS-DRN-3)",
        ),
        "key-moved": need(bool(selectors - {"any"}), "a selector with key affinity (not any)"),
        "phase-order": need(capabilities.timers, no_timers)
        or need("tick" in ops, "op tick")
        or need(
            two_phases,
            "a source of tick effects of two phases: ack timeouts, disconnect with evict_after > 0, or retries "
            "with back-off and a cursor persisted at an interval",
        ),
        "lost": need("remove_consumer" in ops or "disconnect" in ops, "op remove_consumer or disconnect"),
        "split-owner": need(len(capabilities.profiles) > 0, ""),
        "unstable-assignment": need(bool(selectors - {"buckets", "any"}), "a selector other than buckets and any"),
        "idle-while-ready": need(bool(selectors - {"pulsar-sticky"}), "a selector other than pulsar-sticky"),
        "misrouted-bucket": need("buckets" in selectors, "selector buckets"),
        "bucket-misassigned": need("buckets" in selectors, "selector buckets"),
        "unstable-buckets": need("buckets" in selectors, "selector buckets")
        or need(
            bool(set(capabilities.config_values.get("bucket_assignment", ())) - {"sorted"}),
            "bucket_assignment sticky or controller declared in config_values (sorted is exempt from KS-BKT-8)",
        ),
        "bucket-split-owner": need("buckets" in selectors, "selector buckets"),
        "checkpoint-skip": need("buckets" in selectors, "selector buckets"),
        "successor-first": need(
            "buckets" in selectors and bool({"rollover", "split", "merge"} & ops), "op rollover, split or merge"
        ),
        "entry-split": need(
            ("buckets" in selectors or capabilities.key_batches)
            and "owner" in capabilities.profiles
            and "publish_entry" in ops,
            "the owner profile, op publish_entry and selector buckets or key-based batches (capability key_batches)",
        ),
        "invalid-layout": need(
            "buckets" in selectors and bool({"split", "merge"} & ops), "selector buckets and op split or merge"
        )
        or need(
            "reported" in capabilities.config_values.get("layout", ()), "layout reported declared in config_values"
        ),
        "checkpoint-resurrected": need("buckets" in selectors and "restart" in ops, "selector buckets and op restart")
        or need(
            True in capabilities.config_values.get("checkpoint_resume", ()),
            "checkpoint_resume true declared in config_values",
        ),
        "capacity-overrun": need(capabilities.capacity, "capability capacity (capacity never binds)")
        or need("capacity" in forms("flow_control"), "flow_control capacity (the adapter declares only permits)"),
        "permit-overrun": need("permits" in forms("flow_control"), "flow_control permits declared in config_values")
        or need("flow" in ops, "op flow (permits nobody can grant are not drawn)"),
        "window-overrun": need(capabilities.window, "capability window (no read-ahead window)")
        or need("window" in forms("read_bound"), "read_bound window (the adapter declares only lookahead)"),
        "stats-mismatch": need(capabilities.stats, "capability stats"),
        "blocked-key-hidden": need(capabilities.stats and "block" in policies, "capability stats and policy block"),
        "drop-uncounted": need(capabilities.stats, "capability stats"),
        "nondeterministic": need(capabilities.deterministic, "the adapter does not declare itself deterministic"),
        "config-accepted": need("ring" in selectors or bool(selectors - {"buckets"}), "a selector other than buckets"),
    }
    if name == "cursor-stall" and "tick" not in forms("persist_trigger") and not any(forms("persist_flush")):
        return (
            "a cursor written by a timer or a flush (the implementation declares only persist_trigger: advance without "
            "persist_flush, a departure of spec section 21.1: an idle cursor may stay unwritten)"
        )
    if name in OUT_OF_ORDER_KINDS and False not in forms("out_of_order"):
        return "key order kept (the implementation declares only out_of_order: true, a departure of spec section 21.1)"
    return requirements.get(name)


def skip_reason(missing: list[str]) -> str:
    """One reason for a requirement none of whose checks can run: each check's need (before its first "; ") once,
    joined by "or", then the notes that follow the needs ("needs X: note one; note two")."""
    needs: list[str] = []
    notes: list[str] = []
    for why in missing:
        need, note = _split_note(why)
        if need not in needs:
            needs.append(need)
        if note and note not in notes:
            notes.append(note)
    return "needs " + " or ".join(sorted(needs)) + (": " + "; ".join(notes) if notes else "")


def _split_note(why: str) -> tuple[str, str]:
    """A check's need and its note: split at the first "; " outside parentheses."""
    depth = 0
    for index, char in enumerate(why):
        depth += (char == "(") - (char == ")")
        if depth == 0 and why.startswith("; ", index):
            return why[:index], why[index + 2 :]
    return why, ""


def requirement_statuses(result: RunResult) -> list[dict[str, Any]]:
    """One `requirement` line per requirement of the spec, in spec order."""
    capabilities = result.capabilities
    violations: dict[str, list[Anomaly]] = {}
    for anomaly in result.anomalies:
        violations.setdefault(anomaly.requirement, []).append(anomaly)
    lines: list[dict[str, Any]] = []
    for entry in load_index():
        identifier, level, title = str(entry["id"]), str(entry["level"]), str(entry["title"])
        profiles = [str(p) for p in entry["profiles"]]  # type: ignore[attr-defined]
        checks = [k.name for k in checks_of(identifier)]
        line: dict[str, Any] = {
            "type": "requirement",
            "id": identifier,
            "title": title,
            "level": level,
            "checks": checks,
            "exercised": {name: result.exercised.get(name, 0) for name in checks},
        }
        tested_profiles = [p for p in capabilities.profiles if p in profiles]
        found = violations.get(identifier, [])
        line["violations"] = len(found)
        if not tested_profiles:
            line.update(
                status="skipped",
                reason=f"applies to {', '.join(profiles)}; the implementation declares "
                f"{', '.join(capabilities.profiles)}",
            )
        elif not checks:
            line.update(status="untested", reason=INDIRECT.get(identifier, "no check of its own"))
        elif found:
            line["status"] = "failed" if level == "MUST" else "warning"
        else:
            missing = [check_needs(name, capabilities, result.skipped_ops, result.refused_values) for name in checks]
            usable = [name for name, why in zip(checks, missing, strict=True) if not why]
            if not usable:
                line.update(status="skipped", reason=skip_reason([why for why in missing if why]))
            elif sum(result.exercised.get(name, 0) for name in usable) == 0:
                line.update(status="vacuous", reason="its checks were never exercised in this run")
            else:
                line["status"] = "passed"
        lines.append(line)
    return lines
