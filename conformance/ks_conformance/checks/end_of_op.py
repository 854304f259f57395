"""spec/checking.md section 2.2: the checks at the end of an op and at the phase boundaries of a tick
(timeouts due, evictions due, persistence, isolation), and the op boundaries themselves.

Long because the isolation check's one pass over idle keys holds every exemption the declared options allow (slots,
buckets, parking, heartbeat reads, unacked limits, counted returns); issue 29 makes each kind a rule of its own.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Iterable

from ks_spec.config import lookahead_limit
from ks_spec.slots import SLOT_SELECTORS, slot_of

from ks_conformance import rules
from ks_conformance.checks.layout import layout_problem
from ks_conformance.checks.records import Incarnation, Message, OpState
from ks_conformance.checks.state import CheckerState, Event
from ks_conformance.glob import accepts


class EndOfOpChecks(CheckerState):
    """Op boundaries, tick phases, and the checks at the end of an op (section 2.2)."""

    def _open_op(self, kind: str, seq: int) -> None:
        self.op_count += 1
        self.op = OpState(kind=kind, seq=seq, index=self.op_count, cursor_at_start=self.cursor())

    def _close_op(self) -> None:
        op = self.op
        if op is None:
            return
        self._expect_ack_class = False
        if self.batch_run is not None:
            run, self.batch_run = self.batch_run, None
            # req: KS-BKT-10
            unfinished = rules.buckets.entry_split_unfinished(
                run.entry, run.first_offset, run.consumer, run.first_seq, run.expected
            )
            self._batch_findings.append(([run.first_seq, self.last_seq], unfinished))
        for witness, explained in self._batch_findings:
            self._report("entry-split", self.last_seq, witness, explained)  # judged over the whole op (KS-BKT-10)
        self._batch_findings = []
        if op.kind == "tick":
            self._advance_phase(7)
        if op.kind == "key_skipped":
            self._check_skip(op)
        if op.kind == "extend" and op.extension is not None and op.extension[2] is not None:
            self._check_extension_answered(op)
        if op.published is not None and self.best_effort:
            self._check_outcome(op)
        if op.kind not in ("config", "quiescent"):
            self._check_persistence(op)
            self._check_idle(op)
            if self._delayed:
                self._note_delays_due()
            self._count_temptations()
            if op.kind == "tick" and self.heartbeat_reads:
                self._note_heartbeat_read()
        self.op = None
        self._settle()

    def _check_layout(self) -> None:
        """KS-BKT-11: the layout the dispatcher reported is a valid one, and it routed nothing by a segment it had
        not reported; judged once an op's segment events end (its first other event, or the op's end)."""
        created, self.created_in_op = self.created_in_op, []
        findings, self.layout_findings = self.layout_findings, []
        if created:
            self._exercise("invalid-layout")
            found = layout_problem(self.segments, created, int(self.config["bucket_max"]))
            if found is not None:
                findings.insert(0, found)
        for facts, problem, witness in findings[:1]:
            # req: KS-BKT-11
            self._report("invalid-layout", self.last_seq, witness, rules.buckets.invalid_layout(facts, problem))

    def _check_extension_answered(self, op: OpState) -> None:
        """The holder's `extend` must be answered by an `extended` event (KS-RTY-8): one answered by `extend_ignored`,
        or not at all, lost it."""
        assert op.extension is not None
        name, _, delivery = op.extension
        ignored = op.extension_ignored_seq
        if (op.extension_answered and ignored is None) or delivery is None:
            return
        message = self.messages.peek(delivery.offset)
        if message is None:
            return
        witness = [delivery.seq, op.seq] + ([ignored] if ignored is not None else [])
        # req: KS-RTY-8
        self._report(
            "extension-lost",
            self.last_seq,
            witness,
            rules.retries.extension_lost(*message.facts, name, delivery.seq, op.seq, ignored),
        )

    def _count_temptations(self) -> None:
        """Count the ordering checks as exercised when an op ends where a dispatcher could have broken them.

        For a correct implementation the situations in checking.md's "exercised when" column of
        key-reorder (strict profile) and retry-overtaken never occur: they are the violation itself. An op
        that ends with a later message of a key undelivered behind an undelivered, held or awaiting
        earlier one is where these checks could fail, so it counts too (see the module doc).
        """
        reorder = held = False
        for key in self._idle_heads:
            state = self._key(key)
            if len(state.undelivered) >= 2 and not state.blocked:
                reorder = True
                head = state.undelivered.first()
                held = held or (head is not None and self.messages[head].held)
            if reorder and held:
                break
        if reorder:
            self._exercise("key-reorder")
        if held:
            self._exercise("overtaken-hold")
        for key in list(self._awaiting_keys):
            state = self._key(key)
            if not state.awaiting:
                self._awaiting_keys.discard(key)
                continue
            earliest = min(state.awaiting)
            if any(o > earliest and self.messages[o].outstanding is None for o in state.unresolved):
                self._exercise("retry-overtaken")
                break
        if self.best_effort:
            return
        for key in list(self._blocked_keys):
            state = self._key(key)
            if not state.blocked:
                self._blocked_keys.discard(key)
            elif any(self.messages[o].outstanding is None and o not in state.blocked for o in state.unresolved):
                self._exercise("blocked-key-leak")
                break
        moved = False
        earlier = min(self._outstanding_epochs, default=self.epoch) < self.epoch
        for key in list(self._holding_keys) if earlier else ():
            state = self._key(key)
            if not state.outstanding:
                self._holding_keys.discard(key)
            elif len(state.unresolved) > len(state.outstanding):
                if any(d.epoch < self.epoch for d in state.outstanding.values()):
                    moved = True
                    break
        if moved:
            self._exercise("split-owner")
            if self.buckets:
                self._exercise("bucket-split-owner")

    def _tick_phase(self, event: Event, phase: int) -> None:
        op = self.op
        assert op is not None
        if op.phase_event_seq is not None and phase != op.phase and not op.phases_counted:
            self._exercise("phase-order")
            op.phases_counted = True
        if phase < op.phase:
            seq = int(event["seq"])
            self._report(
                "phase-order",
                seq,
                [op.phase_event_seq, seq],
                rules.operations.phase_order(op.seq, phase, str(event["event"]), seq, op.phase, op.phase_event_seq),
            )
            return
        self._advance_phase(phase)
        op.phase = phase
        op.phase_event_seq = int(event["seq"])

    def _advance_phase(self, phase: int) -> None:
        """Run the checks due at the phase boundaries crossed on the way to `phase` within a tick."""
        op = self.op
        assert op is not None
        current = op.phase
        if current < 2 <= phase:
            self._after_phase_1(op)
        if current < 3 <= phase:
            self._after_phase_2(op)
            self._phase_3_point()
        if current < 5 <= phase:
            self._after_phase_4(op)
        op.phase = max(op.phase, min(phase, 6))

    def _after_phase_1(self, op: OpState) -> None:
        timeout = int(self.config["ack_timeout"])
        for delivery in op.due_timeouts:
            message = self.messages.peek(delivery.offset)  # an archived message is not outstanding
            due = message is not None and message.outstanding is delivery and timeout > 0
            if due and delivery.deadline is not None:
                # req: KS-RTY-8
                self._report(
                    "extended-timeout-missed",
                    op.seq,
                    [delivery.seq, delivery.extended_seq or delivery.seq, op.seq],
                    rules.retries.extended_timeout_missed(
                        delivery.offset,
                        delivery.holder.name,
                        delivery.seq,
                        delivery.extended_seq,
                        delivery.deadline,
                        self.now,
                        op.seq,
                        self.timer_slack,
                    ),
                )
            elif due:
                # req: KS-RTY-3
                self._report(
                    "missed-timeout",
                    op.seq,
                    [delivery.seq, op.seq],
                    rules.retries.missed_timeout(
                        delivery.offset,
                        delivery.holder.name,
                        delivery.tick,
                        delivery.seq,
                        timeout,
                        self.now,
                        op.seq,
                        self.timer_slack,
                    ),
                )

    def _after_phase_2(self, op: OpState) -> None:
        maximum = int(self.config["max_redeliveries"])
        for offset in sorted(self._over_budget):
            message = self.messages[offset]
            if message.resolved or message.blocked or self.counted_failures(message) <= maximum:
                continue
            marker = (offset, self.counted_failures(message))
            if marker in self._poison_reported:
                continue
            self._poison_reported.add(marker)
            # req: KS-RTY-6
            returns = message.returns if self.returns_as_failures else 0
            self._report(
                "poison-ignored",
                op.seq,
                [*message.failure_seqs, *([message.return_seq] if returns else []), op.seq],
                rules.retries.poison_ignored(
                    *message.facts,
                    message.failures,
                    message.failure_seqs,
                    maximum,
                    self.config["poison_policy"],
                    self.now,
                    op.seq,
                    returns=returns,
                ),
            )

    def _phase_3_point(self) -> None:
        while self._readiness and self._readiness[0][0] <= self.now:
            _, offset, serial = heapq.heappop(self._readiness)
            message = self.messages.peek(offset)  # an archived message is resolved, so not retrying
            if message is not None and message.retrying and message.failure_serial == serial:
                # req: KS-RTY-4
                message.ready = True
                message.ready_tick = self.now

    def _after_phase_4(self, op: OpState) -> None:
        for incarnation in op.due_evictions:
            if self.members.get(incarnation.name) is incarnation:
                # req: KS-MEM-2
                self._report(
                    "missed-eviction",
                    op.seq,
                    [incarnation.disconnected_seq, op.seq],
                    rules.leaving.missed_eviction(
                        incarnation.name,
                        incarnation.disconnected_at,
                        incarnation.disconnected_seq,
                        self.config["evict_after"],
                        self.now,
                        op.seq,
                        self.timer_slack,
                    ),
                )

    def _check_skip(self, op: OpState) -> None:
        for offset in op.skip_targets:
            message = self.messages[offset]
            if message.resolved:
                continue
            # req: KS-POI-5
            self._report(
                "skip-ignored",
                op.seq,
                [message.blocked_seq, op.seq],
                rules.poison.skip_ignored(*message.facts, message.blocked_seq, op.seq),
            )
            return

    def _check_outcome(self, op: OpState) -> None:
        assert op.published is not None
        message = self.messages[op.published]
        if message.outcome_seq is None:
            # req: KS-BEF-1
            self._report(
                "missing-outcome", op.seq, [message.publish_seq], rules.best_effort.missing_outcome(*message.facts)
            )

    def _check_persistence(self, op: OpState) -> None:
        if self.best_effort:
            return
        cursor = self.cursor()
        if op.kind == "seek" and self.has_cursor and self.seek is not None:
            # req: KS-CUR-10
            self._exercise("seek-unpersisted")
            target, seek_seq = self.seek
            if self.persist_seq is None or self.persist_seq < seek_seq or self.persisted_cursor < target:
                self.late_version = self.state_version
                self._report(
                    "seek-unpersisted",
                    op.seq,
                    [op.seq],
                    rules.cursor.seek_unpersisted(target, self.persisted_cursor, self.persist_seq, op.seq),
                )
                return
        if cursor > op.cursor_at_start or (op.resolved and self.persist_holes):
            self._exercise("persist-late")
        if self.state_version == self.synced_version:
            return
        holes = self.resolved_above_cursor() if self.persist_holes else None
        if cursor == self.persisted_cursor and (holes is None or holes == self.persisted_holes):
            self.synced_version = self.state_version
            self.persist_due_since = None
            return
        if self.persisted_cursor > cursor or self.persisted_holes.intersect(self.unresolved):
            return  # ahead (a cursor or a hole past an unresolved offset), not late: cursor-skip reported it
        interval = self.persist_interval
        if self.persist_on_advance:
            due = self._advance_persistence_due(op, cursor)
        elif interval == 0:
            due = True
        else:
            due = op.kind == "tick" and (self.persist_tick is None or self.now - self.persist_tick >= interval)
        if due and self.timer_slack and not self.persist_on_advance:
            # req: KS-GEN-9 (with timer_slack = s, a persistence due at tick t may wait until phase 6 of tick t + s)
            if self.persist_due_since is None:
                self.persist_due_since = self.now
            due = op.kind == "tick" and self.now >= self.persist_due_since + self.timer_slack
        if not due or self.late_version == self.state_version:
            return
        self.late_version = self.state_version
        # req: KS-CUR-5, KS-RES-3
        self._report(
            "persist-late",
            op.seq,
            [self.last_resolution_seq, op.seq],
            rules.cursor.persist_late(
                cursor,
                holes,
                self.persisted_cursor,
                self.persisted_holes,
                interval,
                self.last_resolution_seq,
                op.seq,
                self.timer_slack,
                self.persist_flush if self.persist_on_advance else None,
            ),
        )

    def _advance_persistence_due(self, op: OpState, cursor: int) -> bool:
        """KS-CUR-12 (persist_trigger = advance): due in an op that moved the cursor once persist_interval ticks have
        passed since the last persistence, or, with persist_flush, from a flush tick on (a timer: KS-GEN-9's slack)."""
        flush = self.persist_flush
        if flush and op.kind == "tick" and self.now % flush == 0:
            self.flush_owed = True  # req: KS-CUR-12 (the periodic flush writes what the debounce held back)
        if self.flush_owed:
            if self.persist_due_since is None:
                self.persist_due_since = self.now
            if op.kind == "tick" and self.now >= self.persist_due_since + self.timer_slack:
                return True
        moved = cursor > op.cursor_at_start
        return moved and (self.persist_tick is None or self.now - self.persist_tick >= self.persist_interval)

    def _check_idle(self, op: OpState) -> None:
        if self.idle_unjudged or not self._idle_heads:
            return
        window = self.window
        within = self._read_bound()
        in_window = (key for key in self._idle_heads if within(self._key(key).unresolved.first() or 0) is not None)
        if next(in_window, None) is None:
            return
        # req: KS-ISO-2 (the window's messages are the `window` smallest unresolved offsets), KS-ISO-3
        self._exercise("idle-while-ready")
        if any(m.filters for m in self.members.values()):
            self._exercise("unfiltered-wait")
        ready = [m for m in self.members.values() if self._has_room(m)]
        # A fixed-target selector's target is not known here: judge only when every member could take the key.
        # With selector `any` (no key affinity) one eligible member with room is enough.
        fixed_target = not self.any_selector
        if fixed_target and len(ready) < len(self.members) and not any(m.filters for m in self.members.values()):
            return
        for key in sorted(self._idle_heads, key=lambda k: self._key(k).unresolved.first() or 0):
            state = self._key(key)
            head = state.unresolved.first()
            delayed_before = None
            if self.delays_seen and head is not None:
                # req: KS-ORD-6 (the key's head is its first message that is due), KS-ORD-7
                head, delayed_before = self._due_head(state.unresolved)
            waiting = None if head is None else within(head)
            if head is None or waiting is None:
                continue
            message = self.messages[head]
            if message.deliver_at is not None:
                self._exercise("due-left-waiting")
            elif delayed_before is not None:
                self._exercise("blocked-behind-delayed")
            if message.outstanding is not None or state.outstanding or state.blocked:
                continue
            if any(self._may_still_retry(self.messages[o]) for o in state.awaiting):
                continue
            if head in self._over_budget:
                continue  # req: KS-RTY-6 (over its budget it awaits its poison policy, judged as poison-ignored)
            if self.ended_by_return(message) and self.counted_failures(message) > int(self.config["max_redeliveries"]):
                continue  # req: KS-RTY-6 (returns_as_failures: its returns used up its budget, it may await poisoning)
            if self._slot_mate_explains(key):
                continue
            if self.buckets and self._bucket_explains(message):
                continue
            if not self.buckets and message.entry is not None and self._batch_explains(message):
                continue  # req: KS-BKT-10 (a key-based batch goes whole)
            eligible = [m for m in self.members.values() if accepts(m.filters, key)]
            marker = (head, self.state_version)
            if not eligible and self.members:
                if self.lookahead and not ready:
                    continue  # req: KS-ISO-3 (under the look-ahead, reading waits for a member that can take one)
                if marker not in self._idle_reported:
                    self._idle_reported.add(marker)
                    self._report_unfiltered(message, op)
                continue
            able = [m for m in eligible if self._has_room(m)]
            if fixed_target and (not eligible or len(able) < len(eligible)):
                continue
            if not fixed_target and not able:
                continue
            if marker in self._idle_reported:
                continue
            self._idle_reported.add(marker)
            if message.restored_seq is not None:
                self._report_restart_skip(message, op.seq)
                continue
            if delayed_before is not None or message.deliver_at is not None:
                self._report_delay_wait(message, delayed_before, op.seq)
                continue
            # req: KS-ISO-1, KS-GEN-6, KS-ISO-2
            shown = [
                (m.name, len(m.outstanding), m.capacity if m.permits is None else m.permits) for m in able or eligible
            ]
            lookahead = (waiting, self._lookahead_limit()) if self.lookahead else None
            parked = self._parked_below(head) if self.park_after else None
            heartbeat = ("tick" if op.kind == "tick" else "read") if self.heartbeat_reads else None
            self._report(
                "idle-while-ready",
                op.seq,
                [message.publish_seq, op.seq],
                rules.isolation.idle_while_ready(
                    *message.facts,
                    window,
                    shown,
                    not fixed_target,
                    op.seq,
                    lookahead,
                    permits=self.permits,
                    parked=parked,
                    heartbeat=heartbeat,
                ),
            )

    def _due_head(self, unresolved: Iterable[int]) -> tuple[int | None, int | None]:
        """(the key's first unresolved message that holds its place in its order, the first delayed one not yet due
        before it) (KS-ORD-6). No head when a delayed message is past its due tick but within the slack: the
        dispatcher may see it due or not yet, and either way it could be right to wait (KS-GEN-9)."""
        skipped = None
        for offset in unresolved:
            message = self.messages[offset]
            if message.outstanding is not None or not self.not_due(message):
                return offset, skipped
            if message.deliver_at is not None and self.now >= message.deliver_at:
                return None, skipped  # due, perhaps not seen as due yet (timer_slack)
            if skipped is None:
                skipped = offset
        return None, skipped

    def _report_delay_wait(self, message: Message, delayed_before: int | None, seq: int) -> None:
        """An idle message a delayed one explains: it is a delayed message past its due tick, and the slack, that
        nobody got (KS-ORD-7), or an ordinary one waiting behind a delayed message not yet due (KS-ORD-6). A due
        delayed message behind another not yet due is the first: its own falling due is the missing step."""
        if delayed_before is not None and message.deliver_at is None:
            # req: KS-ORD-6
            delayed = self.messages[delayed_before]
            assert delayed.deliver_at is not None
            self._report(
                "blocked-behind-delayed",
                seq,
                [delayed.publish_seq, message.publish_seq, seq],
                rules.ordering.blocked_behind_delayed(
                    *message.facts, delayed.offset, delayed.publish_seq, delayed.deliver_at, seq
                ),
            )
            return
        # req: KS-ORD-7
        assert message.deliver_at is not None
        self._report(
            "due-left-waiting",
            seq,
            [message.publish_seq, seq],
            rules.ordering.due_left_waiting(*message.facts, message.deliver_at, self.timer_slack, self.now, seq),
        )

    def _may_still_retry(self, message: Message) -> bool:
        """True while a retrying message may still be waiting for its back-off: not ready yet, or (with
        `timer_slack = s`) ready for fewer than s ticks (KS-RTY-4, KS-GEN-9)."""
        if not message.retrying:
            return False
        if not message.ready:
            return True
        return self.now < message.ready_tick + self.timer_slack

    def _note_heartbeat_read(self) -> None:
        """After a tick under `read_trigger = "heartbeat"`: its dispatch pass read every offset the read bound
        admits (KS-GEN-8), so from now on a message below the first offset it does not admit counts as read."""
        if self.lookahead and not any(self._has_room(m) for m in self.members.values()):
            return  # req: KS-ISO-3 (under the look-ahead, reading waits for a member that can take a delivery)
        within = self._read_bound(heartbeat=True)
        low, high = self.read_below, len(self.messages)
        while low < high:  # the bound admits a prefix of the offsets: find where it ends
            middle = (low + high) // 2
            if within(middle) is None:
                high = middle
            else:
                low = middle + 1
        self.read_below = max(self.read_below, low)

    def _has_room(self, member: Incarnation) -> bool:
        """Connected, and below capacity or (`flow_control = "permits"`) holding a permit (KS-FLW-1, KS-FLW-4)."""
        if not member.connected or member.unacked_blocked_seq is not None:
            return False  # req: KS-FLW-1 (with max_unacked, blocked until half of the limit is acked)
        return len(member.outstanding) < member.capacity if member.permits is None else member.permits > 0

    def _lookahead_limit(self) -> int:
        return lookahead_limit(self.config, len(self.members))

    def _read_bound(self, heartbeat: bool = False) -> Callable[[int], int | None]:
        """A test of whether an offset must have been read by now: None if not, else what bounds it (the unresolved
        or, under the look-ahead, the waiting messages before it).

        Window: the `window` smallest unresolved offsets (KS-ISO-2). Look-ahead: an offset that fewer than L earlier
        messages wait before (unresolved, not outstanding): a dispatcher that stopped reading before it stopped
        with fewer than L waiting, against KS-ISO-3. With `read_trigger = "heartbeat"`, outside a tick (and unless
        `heartbeat`) only offsets below `read_below` must have been read (KS-GEN-8).
        """
        bound = self._read_bound_alone()
        op = self.op
        if not self.heartbeat_reads or heartbeat or (op is not None and op.kind == "tick"):
            return bound
        read_below = self.read_below

        def read_by_a_heartbeat(offset: int) -> int | None:
            return bound(offset) if offset < read_below else None  # req: KS-GEN-8

        return read_by_a_heartbeat

    def _read_bound_alone(self) -> Callable[[int], int | None]:
        """`_read_bound` as if every op ended with a read (`read_trigger = "every-op"`)."""
        if not self.lookahead:
            window = int(self.config["window"])

            def in_window(offset: int) -> int | None:
                below = self.unresolved.rank(offset) - self._parked_below(offset)  # req: KS-ISO-4
                return below if below <= window else None

            return in_window
        limit = self._lookahead_limit()
        outstanding = sorted(
            {d.offset for m in (*self.members.values(), *self._phantoms.values()) for d in m.outstanding.values()}
        )

        def in_lookahead(offset: int) -> int | None:
            unresolved_before = self.unresolved.rank(offset) - (1 if offset in self.unresolved else 0)
            waiting = unresolved_before - bisect_left(outstanding, offset) - self._parked_below(offset)  # KS-ISO-4
            return waiting if waiting < limit else None

        return in_lookahead

    def _slot_mate_explains(self, key: str) -> bool:
        """With hash-granularity draining (KS-DRN-3): another key of the same slot may hold this one back.

        A slot-mate explains a hold when it awaits redelivery, is blocked, or holds an outstanding delivery that may
        sit at another consumer than the slot's target: one from an earlier epoch (the target may have moved since), or
        any one while members have filters (keys of one slot may then have different targets). A slot-mate delivered
        in this epoch without filters is at the slot's target (KS-ASN-1), so it explains nothing.
        """
        if self.config["drain_granularity"] != "hash" or self.config["selector"] not in SLOT_SELECTORS:
            return False
        selector = str(self.config["selector"])
        slot = slot_of(selector, key)
        filtered = any(m.filters for m in self.members.values())
        for other in self._keys_of_slot.get(slot, ()):
            if other == key:
                continue
            mate = self.keys.get(other)
            if mate is None:
                continue  # at rest: nothing blocked, awaiting or outstanding
            if mate.blocked or mate.awaiting:
                return True  # req: KS-DRN-3
            if any(filtered or delivery.epoch < self.epoch for delivery in mate.outstanding.values()):
                return True  # req: KS-DRN-3
        return False

    def _bucket_explains(self, message: Message) -> bool:
        """Selector `buckets`: what may hold a message that nothing else holds (KS-ISO-1): its bucket withheld, or
        still held by an owner of an earlier epoch (KS-BKT-4); an ancestor segment with an unresolved message of its
        segment's range (KS-BKT-5); or its batch, which goes whole from its first undelivered message (KS-BKT-10): a
        later message of it waits for that one, and the batch waits while a message of it cannot go."""
        if message.segment is None or message.bucket is None:
            return True
        bucket = (message.segment, message.bucket)
        if bucket in self.withheld_buckets:
            return True
        if any(d.epoch < self.epoch for d in self.bucket_outstanding.get(bucket, {}).values()):
            return True
        segment = self.segments.get(message.segment)
        if segment is None:
            return True
        for _, earlier in self.ancestors_unresolved(segment):
            if earlier.hash is None or segment.lo <= earlier.hash >> 16 <= segment.hi:
                return True
        return self._batch_explains(message)

    def _batch_explains(self, message: Message) -> bool:
        """KS-BKT-10: a message of a batch goes with its batch's first undelivered message, and the batch waits while
        a message of it cannot go (an earlier message of its key unresolved, outstanding, awaiting or blocked)."""
        if message.entry is None:
            return False
        op = self.op
        if op is not None and op.published is not None and self.messages[op.published].entry == message.entry:
            return True  # a trace file gives each message of a batch its own publish op: the batch may go on
        if not self.buckets:
            return False  # a key-based batch: its other messages are of its key, whose state the caller judged
        mates = self.batches.get(message.entry, [])
        undelivered = [o for o in mates if o in self.unresolved and not self.messages[o].delivered_since_restart]
        if not undelivered or undelivered[0] != message.offset:
            return True  # a later message of the batch goes with its first (exempt from capacity and window)
        for offset in undelivered[1:]:
            state = self._key(self.messages[offset].key)
            if state.unresolved.first() != offset or state.outstanding or state.awaiting or state.blocked:
                return True
        return False

    def _report_restart_skip(self, message: Message, seq: int) -> None:
        if self.seek is not None and message.restored_seq == self.seek[1]:
            # req: KS-CUR-8
            self._report(
                "seek-skip",
                seq,
                [message.publish_seq, self.seek[1], seq],
                rules.cursor.seek_skip(*message.facts, self.seek[0], self.seek[1], seq),
            )
            return
        # req: KS-CUR-3
        restart = message.restored_seq
        persisted_before = self.loaded[2] if self.loaded is not None else None
        self._report(
            "restart-skip",
            seq,
            [message.publish_seq, persisted_before, restart, seq],
            rules.cursor.restart_skip(*message.facts, restart, self.loaded[0] if self.loaded else 0, seq),
        )

    def _report_unfiltered(self, message: Message, op: OpState) -> None:
        # req: KS-FLT-3
        filters = [(m.name, m.filters) for m in self.members.values()]
        self._report(
            "unfiltered-wait",
            op.seq,
            [message.publish_seq, op.seq],
            rules.filters.unfiltered_wait(*message.facts, filters, op.seq),
        )
