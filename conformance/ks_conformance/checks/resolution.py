"""spec/checking.md section 2.1, answers and resolutions: acks, nacks, timeouts, poison, drops, dead
letters, filters, outcomes, evictions, the persisted cursor and checkpoints.
"""

from __future__ import annotations

from pyroaring import BitMap

from ks_conformance.checks.delivery import DeliveryChecks
from ks_conformance.checks.records import Message
from ks_conformance.checks.state import BEST_EFFORT_DROPS, OUTCOME_EVENTS, Event
from ks_conformance.glob import accepts


class ResolutionChecks(DeliveryChecks):
    """The checks of acks, failures and resolutions (section 2.1)."""

    def _on_ack(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        incarnation = self.members.get(name)
        delivery = message.outstanding
        holds = delivery is not None and incarnation is not None and delivery.holder is incarnation
        if self.best_effort:
            if holds:
                self._end_delivery(message)
            return
        if holds:
            self._exercise("holder-ack-ignored")
        else:
            # req: KS-ACK-2, KS-GEN-3
            self._exercise("stale-ack-accepted")
            held_by = f"{delivery.holder.name} [seq {delivery.seq}]" if delivery is not None else "nobody"
            self._report(
                "stale-ack-accepted",
                seq,
                [message.last_delivery_seq, seq],
                [
                    self._m(message)
                    + (f", last delivered at seq {message.last_delivery_seq}" if message.last_delivery_seq else ""),
                    f"its outstanding delivery is held by {held_by}",
                ],
                f"an ack from {name} [seq {seq}], which does not hold it, resolved m{message.offset}, but such an ack "
                "must be ignored and recorded (KS-ACK-2)",
                offset=message.offset,
                consumer=name,
            )
        self._resolve(message, "acked", seq)

    def _on_ack_ignored(self, event: Event) -> None:
        self._ignored(event, "ack")

    def _on_nack_ignored(self, event: Event) -> None:
        self._ignored(event, "nack")

    def _ignored(self, event: Event, what: str) -> None:
        offset = int(event["offset"])
        seq = int(event["seq"])
        if not 0 <= offset < len(self.messages):
            self._exercise(f"stale-{what}-accepted")
            return
        message = self._message_of(event)
        if message is None:
            return
        incarnation = self.members.get(str(event["consumer"]))
        delivery = message.outstanding
        if delivery is not None and incarnation is not None and delivery.holder is incarnation:
            self._exercise(f"holder-{what}-ignored")
            requirement = "KS-ACK-1" if what == "ack" else "KS-RTY-1"
            self._report(
                f"holder-{what}-ignored",
                seq,
                [delivery.seq, seq],
                [self._m(message) + f", delivered to {incarnation.name} at seq {delivery.seq} and outstanding there"],
                f"the {what} from its holder {incarnation.name} was ignored [seq {seq}], but a {what} from the holder "
                f"must end the delivery ({requirement})",
                offset=offset,
                consumer=incarnation.name,
            )
        else:
            self._exercise(f"stale-{what}-accepted")

    def _on_nack(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        incarnation = self.members.get(name)
        delivery = message.outstanding
        if delivery is not None and incarnation is not None and delivery.holder is incarnation:
            self._exercise("holder-nack-ignored")
        else:
            # req: KS-RTY-1
            self._exercise("stale-nack-accepted")
            self._report(
                "stale-nack-accepted",
                seq,
                [message.last_delivery_seq, seq],
                [
                    self._m(message)
                    + (f", last delivered at seq {message.last_delivery_seq}" if message.last_delivery_seq else "")
                ],
                f"a nack from {name} [seq {seq}], which does not hold it, failed its delivery, but such a nack must "
                "change nothing (KS-RTY-1)",
                offset=message.offset,
                consumer=name,
            )
        if not message.resolved:
            self._fail(message, "nack", seq)

    def _on_timeout(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["consumer"])
        timeout = int(self.config["ack_timeout"])
        delivery = message.outstanding
        # req: KS-RTY-2
        self._exercise("premature-timeout")
        at_consumer = delivery is not None and delivery.holder.name == name
        why = ""
        if timeout == 0:
            why = "ack_timeout is 0, which disables timeouts"
        elif not at_consumer:
            why = f"m{message.offset} has no outstanding delivery at {name}"
        elif delivery is not None and self.now < delivery.tick + timeout:
            why = (
                f"it was delivered at tick {delivery.tick} and the ack timeout is {timeout}: no timeout before "
                f"tick {delivery.tick + timeout}"
            )
        if why:
            self._report(
                "premature-timeout",
                seq,
                [delivery.seq if delivery is not None else None, seq],
                [
                    self._m(message)
                    + (f", delivered to {delivery.holder.name} at seq {delivery.seq}" if delivery else "")
                ],
                f"it timed out at {name} at tick {self.now} [seq {seq}], but {why} (KS-RTY-2)",
                offset=message.offset,
                consumer=name,
            )
        if at_consumer and not message.resolved:
            self._fail(message, "timeout", seq)

    def _on_drop(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        reason = str(event["reason"])
        # req: KS-RES-1
        self._exercise("unjustified-resolution")
        why = ""
        maximum = int(self.config["max_redeliveries"])
        if reason == "poison":
            if self.config["poison_policy"] != "drop":
                why = f"the poison policy is {self.config['poison_policy']!r}, not 'drop'"
            elif message.failures <= maximum:
                why = f"it failed {message.failures} times, not more than max_redeliveries = {maximum}"
        elif reason == "operator":
            op = self.op
            if op is None or op.kind != "key_skipped" or op.key != message.key:
                why = "no operator skip of its key happened in this op"
        elif reason in BEST_EFFORT_DROPS and not self.best_effort:
            why = f"reason {reason!r} exists only in the best-effort profile"
        if not why and message.outstanding is not None and not self.best_effort:
            why = f"its delivery to {message.outstanding.holder.name} [seq {message.outstanding.seq}] is outstanding"
        if reason == "poison":
            self._exercise("return-counted")
        if why and reason == "poison" and self._returns_counted(message, seq, "dropped as poison"):
            why = ""
        if why:
            self._report(
                "unjustified-resolution",
                seq,
                [seq],
                [self._m(message)],
                f"it was dropped with reason {reason!r} [seq {seq}], but {why}; no rule allows that resolution "
                "(KS-RES-1)",
                offset=message.offset,
                reason=reason,
            )
        if self.best_effort:
            self._check_best_effort_outcome(message, seq)
        self._resolve(message, "dropped", seq)

    def _on_dead_letter(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        maximum = int(self.config["max_redeliveries"])
        self._exercise("unjustified-resolution")
        self._exercise("dead-letter-mismatch")
        why = ""
        if self.config["poison_policy"] != "dead-letter":
            why = f"the poison policy is {self.config['poison_policy']!r}, not 'dead-letter'"
        elif message.failures <= maximum:
            why = f"it failed {message.failures} times, not more than max_redeliveries = {maximum}"
        elif message.outstanding is not None:
            why = f"its delivery to {message.outstanding.holder.name} [seq {message.outstanding.seq}] is outstanding"
        self._exercise("return-counted")
        if why and message.failures <= maximum and self._returns_counted(message, seq, "dead-lettered"):
            why = ""
        if why:
            self._report(
                "unjustified-resolution",
                seq,
                [seq],
                [self._m(message)],
                f"it was dead-lettered [seq {seq}], but {why}; no rule allows that resolution (KS-RES-1)",
                offset=message.offset,
            )
        attempt, reason = int(event["attempt"]), str(event["reason"])
        if attempt != message.deliveries or reason != message.last_failure:
            # req: KS-POI-2
            last_failure = message.failure_seqs[-1] if message.failure_seqs else None
            self._report(
                "dead-letter-mismatch",
                seq,
                [last_failure, seq],
                [
                    self._m(message) + f", delivered {message.deliveries} times since the last restart, last failure "
                    f"{message.last_failure!r}" + (f" at seq {last_failure}" if last_failure is not None else "")
                ],
                f"its dead letter [seq {seq}] says attempt {attempt} and reason {reason!r}, but it must carry the "
                "attempt count and the reason of the last failure (KS-POI-2)",
                offset=message.offset,
            )
        self._resolve(message, "dead_lettered", seq)

    def _on_filter(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        self._exercise("unjustified-filter")
        self._exercise("filtered-without-members")
        if not self.members:
            # req: KS-FLT-4
            self._report(
                "filtered-without-members",
                seq,
                [seq],
                [self._m(message), "the subscription has no member"],
                f"m{message.offset} was resolved as filtered [seq {seq}], but with no member at all messages wait "
                "(KS-FLT-4)",
                offset=message.offset,
            )
        else:
            # req: KS-FLT-3
            taker = next((m for m in self.members.values() if accepts(m.filters, message.key)), None)
            if taker is not None:
                self._report(
                    "unjustified-filter",
                    seq,
                    [taker.added_seq, seq],
                    [
                        self._m(message),
                        f"{taker.name} joined with filters {list(taker.filters)} [seq {taker.added_seq}], accepting it",
                    ],
                    f"m{message.offset} was resolved as filtered [seq {seq}], but only keys nobody accepts are "
                    "filtered (KS-FLT-3)",
                    offset=message.offset,
                    consumer=taker.name,
                )
        if self.best_effort:
            self._check_best_effort_outcome(message, seq)
        self._resolve(message, "filtered", seq)

    def _on_outcome(self, event: Event) -> None:
        """An implementation-defined terminal outcome: judged as the resolution declared for it, else a loss."""
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        name = str(event["reason"])
        outcomes = self.declared.get("terminal_outcomes", {})
        resolution = outcomes.get(name)
        # req: KS-RES-1
        self._exercise("unjustified-outcome")
        if resolution in OUTCOME_EVENTS:
            judged: Event = {**event, "event": OUTCOME_EVENTS[resolution]}
            if resolution == "dropped":
                judged["reason"] = "poison"
            elif resolution == "dead_lettered":
                judged.update(attempt=message.deliveries, reason=message.last_failure)
            elif resolution == "acked" and event.get("consumer") is None:
                holder = message.outstanding.holder.name if message.outstanding is not None else "(nobody)"
                judged["consumer"] = holder
            getattr(self, f"_on_{OUTCOME_EVENTS[resolution]}")(judged)
            return
        declared = "declared as standing for no resolution" if name in outcomes else "not declared"
        self._report(
            "unjustified-outcome",
            seq,
            [message.publish_seq, seq],
            [self._m(message)],
            f"it ended with the implementation's outcome {name!r} [seq {seq}], {declared} in terminal_outcomes; "
            "a message resolved by no rule of the spec is lost (KS-RES-1)",
            offset=message.offset,
            outcome=name,
        )
        self._resolve(message, f"outcome:{name}", seq)

    def _report_early_block(self, message: Message, seq: int, maximum: int) -> None:
        """A key_blocked of a message that has not failed more than max_redeliveries times (since its release)."""
        if message.released_seq is not None:
            # req: KS-POI-4
            self._report(
                "stale-budget",
                seq,
                [message.released_seq, *message.failure_seqs, seq],
                [
                    self._m(message) + f", released by the operator at seq {message.released_seq}",
                    f"it failed {message.failures} times since, max_redeliveries = {maximum}",
                ],
                f"it was blocked again [seq {seq}], but a release gives a fresh budget: it is poisoned only after "
                f"more than {maximum} failures counted from the release (KS-POI-4)",
                offset=message.offset,
                failures=message.failures,
            )
            return
        # req: KS-POI-3
        self._report(
            "unjustified-block",
            seq,
            [*message.failure_seqs, seq],
            [self._m(message) + f", failed {message.failures} times, max_redeliveries = {maximum}"],
            f"it blocked its key [seq {seq}], but only a poisoned message (more than max_redeliveries failures) "
            "blocks its key (KS-POI-3)",
            offset=message.offset,
            failures=message.failures,
        )

    def _returns_counted(self, message: Message, seq: int, what: str) -> bool:
        """True (and `return-counted` reported) if a message was poisoned only because its returns counted."""
        maximum = int(self.config["max_redeliveries"])
        # req: KS-RTY-7
        if message.returns == 0 or message.failures > maximum or message.failures + message.returns <= maximum:
            return False
        self._report(
            "return-counted",
            seq,
            [message.returned_delivery_seq, message.return_seq, seq],
            [
                self._m(message) + f", failed {message.failures} times and returned {message.returns} times by a "
                f"leaving or evicted holder (last at seq {message.return_seq})",
                f"max_redeliveries = {maximum}",
            ],
            f"it was {what} [seq {seq}], which only counting its returns as failures explains, but a returned "
            "message is pending at once without adding to its failure count (KS-RTY-7)",
            offset=message.offset,
            returns=message.returns,
            failures=message.failures,
        )
        return True

    def _on_key_blocked(self, event: Event) -> None:
        message = self._message_of(event)
        if message is None:
            return
        seq = int(event["seq"])
        state = self.keys[message.key]
        message.blocked = True
        message.blocked_seq = seq
        self._clear_awaiting(message, state)
        self._over_budget.discard(message.offset)
        state.blocked.add(message.offset)
        self._blocked_keys.add(message.key)
        self._exercise("return-counted")
        self._exercise("unjustified-block")
        if message.released_seq is not None:
            self._exercise("stale-budget")
        maximum = int(self.config["max_redeliveries"])
        if message.failures <= maximum and not self._returns_counted(message, seq, "blocked as poison"):
            self._report_early_block(message, seq, maximum)
        last = max(state.unresolved) if len(state.unresolved) else message.offset
        if last > message.offset:
            self._exercise("blocked-key-leak")
        self._refresh_head(message.key)

    def _on_consumer_evicted(self, event: Event) -> None:
        seq = int(event["seq"])
        name = str(event["consumer"])
        incarnation = self.members.get(name)
        evict_after = int(self.config["evict_after"])
        # req: KS-MEM-2
        self._exercise("premature-eviction")
        why = ""
        if incarnation is not None and incarnation.reconnected_seq is not None:
            self._report_reconnect_ignored(incarnation, seq, f"{name} was evicted at tick {self.now} [seq {seq}]")
        elif incarnation is None:
            why = f"{name} is not a member"
        elif incarnation.connected:
            why = f"{name} is connected"
        elif evict_after == 0:
            why = "evict_after is 0, which disables eviction"
        elif self.now < incarnation.disconnected_at + evict_after:
            why = (
                f"it disconnected at tick {incarnation.disconnected_at}, so its eviction is due at tick "
                f"{incarnation.disconnected_at + evict_after}, not {self.now}"
            )
        if why:
            self._report(
                "premature-eviction",
                seq,
                [incarnation.disconnected_seq if incarnation else None, seq],
                [f"{name} was evicted at tick {self.now} [seq {seq}]"],
                f"{why} (KS-MEM-2)",
                consumer=name,
            )
        if incarnation is None:
            return
        self._disconnected.pop(incarnation.number, None)
        self._end_incarnation(incarnation, seq, returned=True)
        self._new_epoch("leave", incarnation, seq)

    def _on_cursor_persisted(self, event: Event) -> None:
        seq = int(event["seq"])
        cursor = int(event["cursor"])
        holes = BitMap()
        for lo, hi in event.get("ranges") or ():
            holes.add_range(int(lo), int(hi) + 1)
        if self.unresolved:
            # req: KS-CUR-1
            self._exercise("cursor-skip")
            smallest = self.unresolved.min()
            bad = holes & self.unresolved
            if cursor > smallest or bad:
                offset = smallest if cursor > smallest else bad.min()
                skipped = self.messages[offset]
                where = f"cursor {cursor} passes it" if cursor > smallest else "the persisted holes include it"
                self._report(
                    "cursor-skip",
                    seq,
                    [skipped.publish_seq, seq],
                    [self._m(skipped) + ", unresolved"],
                    f"the persisted cursor [seq {seq}]: {where}, but a persisted cursor never passes an unresolved "
                    "offset (KS-CUR-1)",
                    offset=offset,
                    cursor=cursor,
                )
        if self.persist_seq is not None:
            # req: KS-CUR-2
            self._exercise("cursor-regress")
            if cursor < self.persisted_cursor:
                self._report(
                    "cursor-regress",
                    seq,
                    [self.persist_seq, seq],
                    [f"the cursor was persisted as {self.persisted_cursor} at seq {self.persist_seq}"],
                    f"it was persisted as {cursor} [seq {seq}], lower, but a persisted cursor never moves backwards "
                    "(KS-CUR-2)",
                    cursor=cursor,
                    previous=self.persisted_cursor,
                )
        interval = int(self.config["persist_interval"])
        if interval > 0:
            # req: KS-CUR-7
            self._exercise("persist-early")
            op = self.op
            why = ""
            if op is None or op.kind != "tick":
                why = f"with persist_interval = {interval} persistence happens only in phase 6 of a tick"
            elif self.persist_tick is not None and self.now - self.persist_tick < interval:
                why = (
                    f"the previous persistence was at tick {self.persist_tick} and persist_interval = {interval}: "
                    f"not again before tick {self.persist_tick + interval}"
                )
            if why:
                self._report(
                    "persist-early",
                    seq,
                    [self.persist_seq, seq],
                    [f"the cursor was persisted at tick {self.now} [seq {seq}]"],
                    f"{why} (KS-CUR-7)",
                    cursor=cursor,
                )
        self.persisted_cursor = cursor
        self.persisted_holes = holes
        self.persist_seq = seq
        self.persist_tick = self.now
        if cursor == self.cursor() and (not self.config["persist_ack_holes"] or holes == self.resolved_above_cursor()):
            self.synced_version = self.state_version
        else:
            self.synced_version = -1

    def _on_checkpoint(self, event: Event) -> None:
        seq = int(event["seq"])
        bucket = (int(event["segment"]), int(event["bucket"]))
        cursor = int(event["cursor"])
        # req: KS-BKT-6
        self._exercise("checkpoint-skip")
        pending = self.bucket_unresolved.get(bucket)
        first = pending.first() if pending is not None else None
        if first is not None and first < cursor:
            skipped = self.messages[first]
            self._report(
                "checkpoint-skip",
                seq,
                [skipped.publish_seq, seq],
                [self._m(skipped) + f" in bucket {list(bucket)}, unresolved"],
                f"the checkpoint {cursor} of that bucket [seq {seq}] passes it, but a checkpoint never passes an "
                "unresolved message of its bucket (KS-BKT-6)",
                offset=first,
                cursor=cursor,
            )
        previous = self.checkpoints.get(bucket)
        if previous is not None and cursor < previous[0]:
            self._report(
                "checkpoint-skip",
                seq,
                [previous[1], seq],
                [f"bucket {list(bucket)} was checkpointed at {previous[0]} [seq {previous[1]}]"],
                f"it was checkpointed at {cursor} [seq {seq}], lower, but a checkpoint never lies below an earlier "
                "one of the same bucket (KS-BKT-6)",
                cursor=cursor,
            )
        self.checkpoints[bucket] = (cursor, seq)

    def _on_bucket_withheld(self, event: Event) -> None:
        return

    def _on_bucket_assigned(self, event: Event) -> None:
        return
