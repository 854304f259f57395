"""spec/checking.md section 2.1, deliveries: order, exclusivity, routing, flow control, attempts, retries
and buckets, judged at each `deliver` (and `held`).
"""

from __future__ import annotations

import heapq
from itertools import takewhile

from ks_conformance.checks.buckets import BucketChecks
from ks_conformance.checks.records import Delivery, Incarnation, KeyState, Message
from ks_conformance.checks.state import RING_SELECTORS, Event
from ks_conformance.glob import accepts


class DeliveryChecks(BucketChecks):
    """The checks of a delivery (section 2.1)."""

    def _on_deliver(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        attempt = int(event["attempt"])
        incarnation = self.members.get(name)
        state = self.keys[message.key]
        first = message.deliveries == 0
        self._check_order(message, state, seq, first)
        self._check_exclusive(message, state, seq, incarnation or self._phantoms.get(name), name)
        self._check_reason(message, seq)
        self._check_consumer(message, seq, incarnation, name)
        self._check_flow(message, seq, first)
        self._check_attempt(message, seq, attempt)
        self._check_assignment(message, state, seq, incarnation, name)
        self._check_retry(message, seq)
        if self.buckets and message.segment is not None:
            self._check_bucket_delivery(message, seq, incarnation, name)
        if self.best_effort:
            self._check_best_effort_outcome(message, seq)
        if incarnation is None:
            incarnation = self._phantoms.get(name)
        if incarnation is None:
            self._incarnations += 1
            incarnation = Incarnation(self._incarnations, name, 0, (), (), seq, member=False, connected=False)
            self._phantoms[name] = incarnation
        self._record_delivery(message, state, incarnation, attempt, seq)

    def _check_order(self, message: Message, state: KeyState, seq: int, first: bool) -> None:
        offset = message.offset
        earliest_unresolved = state.unresolved.first()
        has_earlier_unresolved = earliest_unresolved is not None and earliest_unresolved < offset
        if first and has_earlier_unresolved:
            # req: KS-ORD-1
            self._exercise("key-reorder")
            held_earlier = next(
                (o for o in takewhile(lambda o: o < offset, state.unresolved) if self.messages[o].held), None
            )
            if held_earlier is not None:
                self._exercise("overtaken-hold")
            earlier = state.undelivered.first()
            if earlier is not None and earlier < offset:
                previous = self.messages[earlier]
                self._report(
                    "key-reorder",
                    seq,
                    [previous.publish_seq, message.publish_seq, seq],
                    [self._m(previous), self._m(message)],
                    f"m{earlier} precedes m{offset} in key {message.key!r} and was never delivered, yet m{offset} was "
                    f"delivered for the first time [seq {seq}] while m{earlier} is unresolved (KS-ORD-1)",
                    offset=offset,
                    key=message.key,
                    earlier=earlier,
                )
                # req: KS-FLW-3
                held = next(
                    (o for o in takewhile(lambda o: o < offset, state.undelivered) if self.messages[o].held), None
                )
                if held is not None:
                    overtaken = self.messages[held]
                    self._report(
                        "overtaken-hold",
                        seq,
                        [overtaken.held_seq, message.publish_seq, seq],
                        [self._m(overtaken) + f", held at seq {overtaken.held_seq}", self._m(message)],
                        f"m{offset} was delivered for the first time [seq {seq}] while the held m{held} of the same "
                        "key is unresolved and undelivered, but a held message keeps its place (KS-FLW-3)",
                        offset=offset,
                        key=message.key,
                        earlier=held,
                    )
        if self.profile == "strict":
            # req: KS-ORD-2
            others = len(state.unresolved) - (1 if offset in state.unresolved else 0)
            if others > 0:
                self._exercise("strict-overlap")
            if has_earlier_unresolved:
                assert earliest_unresolved is not None
                previous = self.messages[earliest_unresolved]
                self._report(
                    "strict-overlap",
                    seq,
                    [previous.publish_seq, seq],
                    [self._m(previous), self._m(message)],
                    f"m{earliest_unresolved} precedes m{offset} in key {message.key!r} and is unresolved, yet "
                    f"m{offset} was delivered [seq {seq}]; the strict profile delivers nothing of a key while an "
                    "earlier message of it is unresolved (KS-ORD-2)",
                    offset=offset,
                    key=message.key,
                    earlier=earliest_unresolved,
                )
        if not self.best_effort:
            # req: KS-ORD-3
            awaiting = [o for o in state.awaiting if o < offset]
            if awaiting:
                self._exercise("retry-overtaken")
                waiting = self.messages[min(awaiting)]
                self._report(
                    "retry-overtaken",
                    seq,
                    [waiting.awaiting_seq, seq],
                    [self._m(waiting) + f", awaiting redelivery since seq {waiting.awaiting_seq}", self._m(message)],
                    f"m{offset} was delivered [seq {seq}] before m{waiting.offset}, an earlier message of its key that "
                    "awaits redelivery (KS-ORD-3)",
                    offset=offset,
                    key=message.key,
                    earlier=waiting.offset,
                )

    def _check_exclusive(
        self, message: Message, state: KeyState, seq: int, incarnation: Incarnation | None, name: str
    ) -> None:
        if self.best_effort:
            return
        # req: KS-DRN-1
        if any(d.epoch < self.epoch for d in state.outstanding.values()):
            self._exercise("split-owner")
        other = next((d for d in state.outstanding.values() if d.holder is not incarnation), None)
        if other is not None:
            self._report(
                "split-owner",
                seq,
                [other.seq, seq],
                [
                    f"d = deliver(offset={other.offset}, key={message.key!r}) to {other.holder.name} "
                    f"[seq {other.seq}], still outstanding",
                    self._m(message),
                ],
                f"m{message.offset} of the same key was delivered to {name} [seq {seq}] while "
                f"{other.holder.name} holds d, but a key has one holder at a time (KS-DRN-1)",
                offset=message.offset,
                key=message.key,
                consumer=name,
                other=other.holder.name,
            )
        if state.blocked:
            # req: KS-POI-3
            blocked = self.messages[min(state.blocked)]
            self._report(
                "blocked-key-leak",
                seq,
                [blocked.blocked_seq, seq],
                [self._m(blocked) + f", which blocked its key at seq {blocked.blocked_seq}", self._m(message)],
                f"m{message.offset} was delivered [seq {seq}] while its key is blocked, but nothing of a blocked key "
                "may be delivered until an operator releases or skips it (KS-POI-3)",
                offset=message.offset,
                key=message.key,
            )

    def _check_reason(self, message: Message, seq: int) -> None:
        # req: KS-RES-2
        if message.delivered_ever:
            self._exercise("duplicate")
        if message.resolved:
            self._report(
                "duplicate",
                seq,
                [message.resolution_seq, seq],
                [self._m(message) + f", resolved as {message.resolution} at seq {message.resolution_seq}"],
                f"m{message.offset} was delivered again [seq {seq}] after it was resolved, with no restart that "
                "lost the resolution (KS-RES-2)",
                offset=message.offset,
            )
        elif message.outstanding is not None:
            d = message.outstanding
            self._report(
                "duplicate",
                seq,
                [d.seq, seq],
                [self._m(message) + f", delivered to {d.holder.name} at seq {d.seq} and still outstanding"],
                f"m{message.offset} was delivered again [seq {seq}] while that delivery is outstanding (KS-RES-2)",
                offset=message.offset,
            )
        if self.loaded is not None:
            # req: KS-CUR-4
            self._exercise("resurrected")
            cursor, holes, persist_seq, restart_seq = self.loaded
            if message.offset < cursor or message.offset in holes:
                where = f"below the persisted cursor {cursor}" if message.offset < cursor else "a persisted ack hole"
                self._report(
                    "resurrected",
                    seq,
                    [persist_seq, restart_seq, seq],
                    [self._m(message), f"the store recorded cursor {cursor} at seq {persist_seq}"],
                    f"after the restart [seq {restart_seq}] m{message.offset}, {where}, was delivered [seq {seq}], but "
                    "what the store recorded is not delivered again (KS-CUR-4)",
                    offset=message.offset,
                )

    def _check_consumer(self, message: Message, seq: int, incarnation: Incarnation | None, name: str) -> None:
        if incarnation is not None and incarnation.filters:
            # req: KS-FLT-2
            self._exercise("filter-violation")
            if not accepts(incarnation.filters, message.key):
                self._report(
                    "filter-violation",
                    seq,
                    [incarnation.added_seq, seq],
                    [
                        f"{name} joined with filters {list(incarnation.filters)} [seq {incarnation.added_seq}]",
                        self._m(message),
                    ],
                    f"no filter of {name} matches {message.key!r}, yet m{message.offset} was delivered to {name} "
                    f"[seq {seq}] (KS-FLT-2)",
                    offset=message.offset,
                    consumer=name,
                )
        # req: KS-MEM-3
        if incarnation is None or any(not member.connected for member in self.members.values()):
            self._exercise("inactive-delivery")
        if incarnation is None:
            ended = self.left.get(name)
            self._report(
                "inactive-delivery",
                seq,
                [ended, seq],
                [
                    f"{name} is not a member" + (f" (its last incarnation ended at seq {ended})" if ended else ""),
                    self._m(message),
                ],
                f"m{message.offset} was delivered to {name} [seq {seq}], but only connected members receive messages "
                "(KS-MEM-3)",
                offset=message.offset,
                consumer=name,
            )
        elif not incarnation.connected:
            self._report(
                "inactive-delivery",
                seq,
                [incarnation.disconnected_seq, seq],
                [f"{name} disconnected at seq {incarnation.disconnected_seq}", self._m(message)],
                f"m{message.offset} was delivered to {name} [seq {seq}] while it is disconnected, but only connected "
                "members receive messages (KS-MEM-3)",
                offset=message.offset,
                consumer=name,
            )
        if incarnation is not None:
            # req: KS-FLW-1
            held = len(incarnation.outstanding)
            if held >= incarnation.capacity - 1:
                self._exercise("capacity-overrun")
            if held + 1 > incarnation.capacity:
                seqs = sorted(d.seq for d in incarnation.outstanding.values())
                self._report(
                    "capacity-overrun",
                    seq,
                    [incarnation.added_seq, *seqs, seq],
                    [
                        f"{name} joined with capacity {incarnation.capacity} [seq {incarnation.added_seq}]",
                        f"{name} holds {held} outstanding deliveries (seqs {', '.join(map(str, seqs))})",
                    ],
                    f"m{message.offset} was delivered to {name} [seq {seq}], leaving it {held + 1} outstanding "
                    f"deliveries, more than its capacity (KS-FLW-1)",
                    offset=message.offset,
                    consumer=name,
                )

    def _check_flow(self, message: Message, seq: int, first: bool) -> None:
        if self.best_effort or not first:
            return
        # req: KS-FLW-2
        window = int(self.config["window"])
        below = self.unresolved.rank(message.offset - 1) if message.offset > 0 else 0
        if below >= window - 1:
            self._exercise("window-overrun")
        if below >= window:
            self._report(
                "window-overrun",
                seq,
                [seq],
                [self._m(message), f"window = {window}"],
                f"m{message.offset} was delivered for the first time [seq {seq}] while {below} earlier offsets are "
                "unresolved, but a first delivery needs fewer than window of them (KS-FLW-2)",
                offset=message.offset,
                unresolved_below=below,
            )

    def _check_attempt(self, message: Message, seq: int, attempt: int) -> None:
        if self.best_effort:
            return
        # req: KS-RTY-5
        if message.deliveries > 0:
            self._exercise("attempt-miscount")
        if attempt != message.deliveries + 1:
            self._report(
                "attempt-miscount",
                seq,
                [message.last_delivery_seq, seq],
                [self._m(message) + f", delivered {message.deliveries} times since the last restart"],
                f"its delivery at seq {seq} carries attempt {attempt}, but attempts count deliveries: it must be "
                f"{message.deliveries + 1} (KS-RTY-5)",
                offset=message.offset,
                attempt=attempt,
                expected=message.deliveries + 1,
            )

    def _check_assignment(
        self, message: Message, state: KeyState, seq: int, incarnation: Incarnation | None, name: str
    ) -> None:
        last = state.last_delivery
        if last is None:
            return
        epoch, previous, previous_seq, segment = last
        if segment != message.segment:
            return  # selector `buckets`: each segment has its own N, so its own bucket and target (KS-BKT-3)
        if epoch == self.epoch:
            # req: KS-ASN-1
            self._exercise("key-moved")
            if previous.name != name:
                self._report(
                    "key-moved",
                    seq,
                    [previous_seq, seq],
                    [f"key {message.key!r} was delivered to {previous.name} at seq {previous_seq}", self._m(message)],
                    f"m{message.offset} was delivered to {name} [seq {seq}] with no membership change since, but a key "
                    "has one target per membership epoch (KS-ASN-1)",
                    key=message.key,
                    consumer=name,
                    other=previous.name,
                )
        elif epoch == self.epoch - 1 and self.config["selector"] in RING_SELECTORS:
            change, changed, change_seq = self.epoch_change[self.epoch]
            if change == "restart":
                return
            # req: KS-ASN-2
            self._exercise("unstable-assignment")
            moved = previous is not incarnation and previous.name != name
            allowed = (change == "join" and changed is incarnation) or (change == "leave" and changed is previous)
            if moved and not allowed:
                assert changed is not None
                what = "joined" if change == "join" else "left"
                self._report(
                    "unstable-assignment",
                    seq,
                    [previous_seq, change_seq, seq],
                    [
                        f"key {message.key!r} was delivered to {previous.name} at seq {previous_seq}",
                        f"then only {changed.name} {what} [seq {change_seq}]",
                    ],
                    f"m{message.offset} went to {name} [seq {seq}], but with selector {self.config['selector']!r} a "
                    f"membership change moves a key only to a joining consumer or away from a leaving one (KS-ASN-2)",
                    key=message.key,
                    consumer=name,
                    other=previous.name,
                )

    def _check_retry(self, message: Message, seq: int) -> None:
        if self.best_effort:
            return
        if message.retrying:
            # req: KS-RTY-4
            self._exercise("early-retry")
            # With a back-off of 0 the retry may also go at once, in the op that failed it (KS-RTY-4).
            immediate = self._retry_due(message) == message.failure_tick
            if not message.ready and not immediate:
                self._report(
                    "early-retry",
                    seq,
                    [message.awaiting_seq, seq],
                    [
                        self._m(message) + f", failure {message.failures} at seq {message.awaiting_seq}",
                        f"its back-off ends at tick {self._retry_due(message)}",
                    ],
                    f"m{message.offset} was delivered again at tick {self.now} [seq {seq}] before a phase 3 at or "
                    "after the end of its back-off made it pending (KS-RTY-4)",
                    offset=message.offset,
                )
        maximum = int(self.config["max_redeliveries"])
        if message.failures > maximum:
            # req: KS-RTY-6
            self._report(
                "retry-overrun",
                seq,
                [*message.failure_seqs, seq],
                [
                    self._m(message)
                    + f", failed {message.failures} times (seqs {', '.join(map(str, message.failure_seqs))})"
                ],
                f"it was delivered again [seq {seq}], but after more than max_redeliveries = {maximum} failures a "
                "message is poisoned, not delivered (KS-RTY-6)",
                offset=message.offset,
                failures=message.failures,
            )

    def _check_best_effort_outcome(self, message: Message, seq: int) -> None:
        # req: KS-BEF-1
        assert self.op is not None
        if message.outcome_seq is not None:
            self._report(
                "best-effort-redelivery",
                seq,
                [message.outcome_seq, seq],
                [self._m(message) + f", whose outcome was seq {message.outcome_seq}"],
                f"it got a second outcome at seq {seq}, but in best-effort each message has exactly one (KS-BEF-1)",
                offset=message.offset,
            )
        elif self.op.index != message.publish_op:
            self._report(
                "best-effort-redelivery",
                seq,
                [message.publish_seq, seq],
                [self._m(message)],
                f"its outcome came at seq {seq}, in a later op than its publish, but in best-effort a message's "
                "outcome happens at the operation that published it (KS-BEF-1)",
                offset=message.offset,
            )
        message.outcome_seq = seq

    def _record_delivery(self, message: Message, state: KeyState, holder: Incarnation, attempt: int, seq: int) -> None:
        if message.outstanding is not None:
            self._end_delivery(message)
        self._serial += 1
        delivery = Delivery(self._serial, message.offset, holder, attempt, self.now, seq, self.epoch)
        message.deliveries += 1
        message.delivered_ever = True
        message.last_delivery_seq = seq
        message.restored_seq = None
        message.outstanding = delivery
        holder.outstanding[message.offset] = delivery
        state.outstanding[message.offset] = delivery
        self._holding_keys.add(message.key)
        state.undelivered.discard(message.offset)
        state.last_delivery = (self.epoch, holder, seq, message.segment)
        if message.segment is not None and message.bucket is not None:
            self.bucket_outstanding.setdefault((message.segment, message.bucket), {})[message.offset] = delivery
        self._clear_awaiting(message, state)
        timeout = int(self.config["ack_timeout"])
        if timeout > 0 and not self.best_effort:
            heapq.heappush(self._timeouts, (self.now + timeout, delivery.serial, delivery))
        if self.best_effort and not message.resolved:
            self._resolve_silently(message, "delivered", seq)
        self._refresh_head(message.key)

    def _on_held(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        message.held = True
        message.held_seq = seq
        message.last_hold_reason = str(event["reason"])
        message.last_hold_seq = seq
        if event["reason"] == "inactive" and event.get("consumer") is not None:
            target = self.members.get(str(event["consumer"]))
            if target is not None and target.connected and target.reconnected_seq is not None:
                self._report_reconnect_ignored(
                    target, seq, f"m{message.offset} was held [seq {seq}] because {target.name} is inactive"
                )
        if event["reason"] == "draining":
            self._exercise("drain-stuck")
