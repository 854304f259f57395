"""spec/checking.md section 2.1, op events: the configuration, publishes, membership, ticks, restarts,
operator actions and layout changes, each judged as it arrives.
"""

from __future__ import annotations

import heapq
import json
from bisect import insort

from ks_spec.config import CONFIG_DEFAULTS
from ks_spec.slots import slot_of
from pyroaring import BitMap

from ks_conformance import rules
from ks_conformance.checks.quiescence import QuiescenceChecks
from ks_conformance.checks.records import Incarnation, KeyState, Message, OrderedOffsets, Segment
from ks_conformance.checks.state import SLOTS, Event
from ks_conformance.explain import message_clause


class OpEventChecks(QuiescenceChecks):
    """The op events and their checks (section 2.1)."""

    def _on_config(self, event: Event) -> None:
        try:
            detail = json.loads(event["detail"])
            config = detail["config"]
        except (ValueError, KeyError, TypeError):
            self._problem(int(event["seq"]), "the config event's detail is not {'config': {...}}")
            return
        if not isinstance(config, dict):
            self._problem(int(event["seq"]), "the config event's 'config' is not an object")
            return
        self.config = {**CONFIG_DEFAULTS, **config}
        declared = detail.get("declared", {})
        if not isinstance(declared, dict) or not isinstance(declared.get("terminal_outcomes", {}), dict):
            self._problem(
                int(event["seq"]), "the config event's 'declared' is not {'cursor': ..., 'terminal_outcomes': {...}}"
            )
            declared = {}
        self.declared = declared
        if self.config["profile"] not in ("strict", "owner", "best-effort"):
            self._problem(int(event["seq"]), f"unknown profile {self.config['profile']!r}")
        self._configure()

    def _on_publish(self, event: Event) -> None:
        seq = int(event["seq"])
        offset = int(event["offset"])
        if offset != len(self.messages):
            self._problem(seq, f"publish of offset {offset}, expected {len(self.messages)}")
            return
        assert self.op is not None
        message = Message(offset, str(event["key"]), seq, self.op.index, last_event_seq=seq)
        self.messages.append(message)
        self.unresolved.add(offset)
        self.state_version += 1
        state = self.keys.get(message.key)
        if state is None and message.key in self._resting:
            state = self._key(message.key)
        elif state is None:
            state = self.keys[message.key] = KeyState()
            if self.slots_by_hash:
                slot = slot_of(str(self.config["selector"]), message.key)
                self._keys_of_slot.setdefault(slot, []).append(message.key)
        state.unresolved.add(offset)
        state.undelivered.add(offset)
        if self.park_after:
            self._park_published(message)
        self._refresh_head(message.key)
        self.op.published = offset
        if self.best_effort:
            self._exercise("best-effort-redelivery")
            self._exercise("missing-outcome")
        if state.blocked:
            self._exercise("blocked-key-leak")
        if self.buckets:
            self._publish_placement(message, event)
        if event.get("entry") is not None:
            message.entry = int(event["entry"])
            self.batches.setdefault(message.entry, []).append(offset)
        if self.delays_seen and any(
            self.messages[o].key == message.key and self.not_due(self.messages[o]) for o in self._delayed
        ):
            self._exercise("blocked-behind-delayed")  # a dispatcher could hold it behind that one (KS-ORD-6)
        if event.get("deliver_at") is not None:
            # req: KS-ORD-5, KS-ORD-6, KS-ORD-7 (a delayed message: judged from here on by its due tick)
            message.deliver_at = int(event["deliver_at"])
            self.delays_seen = True
            self._delayed.add(offset)
            if message.deliver_at > self.now:
                self._exercise("delivered-before-due")

    def _publish_placement(self, message: Message, event: Event) -> None:
        seq = message.publish_seq
        if event.get("hash") is None or event.get("segment") is None or event.get("bucket") is None:
            self._problem(seq, "a publish with selector 'buckets' must carry hash, segment and bucket")
            return
        message.hash, message.segment, message.bucket = int(event["hash"]), int(event["segment"]), int(event["bucket"])
        high, low = message.hash >> 16, message.hash & 0xFFFF
        self._exercise("misrouted-bucket")
        right = next((s for s in self.segments.values() if not s.sealed and s.lo <= high <= s.hi), None)
        segment = self.segments.get(message.segment)
        if segment is None and self.layout_reported:
            # req: KS-BKT-11 (a segment is reported before anything is routed by it)
            self._exercise("invalid-layout")
            facts = [message_clause(message.offset, message.key, seq) + f" placed in segment {message.segment}"]
            problem = f"no segment_created reported segment {message.segment} before m{message.offset} was routed to it"
            self.layout_findings.append((facts, problem, [seq]))
        elif right is None:
            self._problem(seq, f"no active segment contains hash >> 16 = {high}")
        elif segment is not right:
            self._report(
                "misrouted-bucket",
                seq,
                [right.created_seq, seq],
                rules.buckets.misrouted_bucket_wrong_segment(
                    *message.facts, message.hash, right.number, right.created_seq, message.segment
                ),
            )
        elif message.bucket != low * segment.buckets // SLOTS:
            self._report(
                "misrouted-bucket",
                seq,
                [segment.created_seq, seq],
                rules.buckets.misrouted_bucket_wrong_bucket(
                    *message.facts, message.hash, segment.buckets, segment.created_seq, message.bucket
                ),
            )
        if segment is not None:
            segment.unresolved.add(message.offset)
            self.bucket_unresolved.setdefault((message.segment, message.bucket), OrderedOffsets()).add(message.offset)

    def _on_consumer_added(self, event: Event) -> None:
        seq = int(event["seq"])
        name = str(event["consumer"])
        if name in self.members:
            self._problem(seq, f"consumer {name!r} joined while already a member")
            return
        self._incarnations += 1
        ranges = tuple((int(r[0]), int(r[1])) for r in event.get("ranges") or ())
        incarnation = Incarnation(
            self._incarnations, name, int(event["capacity"]), tuple(event.get("filters") or ()), ranges, seq
        )
        if self.permits:
            incarnation.permits = incarnation.capacity  # req: KS-FLW-4 (the capacity is the first grant)
        if event.get("hash_name") is not None:
            incarnation.hash_name = str(event["hash_name"])
        self.members[name] = incarnation
        self._phantoms.pop(name, None)
        self._new_epoch("join", incarnation, seq)

    def _on_consumer_removed(self, event: Event) -> None:
        seq = int(event["seq"])
        incarnation = self.members.get(str(event["consumer"]))
        if incarnation is None:
            self._problem(seq, f"consumer {event['consumer']!r} left but is not a member")
            return
        self._end_incarnation(incarnation, seq, returned=True)
        self._new_epoch("leave", incarnation, seq)

    def _on_consumer_disconnected(self, event: Event) -> None:
        seq = int(event["seq"])
        incarnation = self.members.get(str(event["consumer"]))
        if incarnation is None:
            self._problem(seq, f"consumer {event['consumer']!r} disconnected but is not a member")
            return
        if not incarnation.connected:
            return
        incarnation.connected = False
        self._offline.add(incarnation.number)
        incarnation.disconnected_at = self.now
        incarnation.disconnected_seq = seq
        incarnation.reconnected_seq = None
        if int(self.config["evict_after"]) > 0:
            self._disconnected[incarnation.number] = incarnation

    def _on_consumer_reconnected(self, event: Event) -> None:
        seq = int(event["seq"])
        incarnation = self.members.get(str(event["consumer"]))
        if incarnation is None:
            self._problem(seq, f"consumer {event['consumer']!r} reconnected but is not a member")
            return
        if incarnation.connected:
            return
        # req: KS-MEM-4 (connected again with all it holds; its eviction clock is off)
        self._exercise("reconnect-ignored")
        incarnation.connected = True
        self._offline.discard(incarnation.number)
        incarnation.reconnected_seq = seq
        self._disconnected.pop(incarnation.number, None)
        self.state_version += 1

    def _on_permits_granted(self, event: Event) -> None:
        seq = int(event["seq"])
        incarnation = self.members.get(str(event["consumer"]))
        if incarnation is None:
            self._problem(seq, f"consumer {event['consumer']!r} granted permits but is not a member")
            return
        if incarnation.permits is None:
            self._problem(seq, "permits_granted in a trace whose flow_control is capacity (the flow op is refused)")
            return
        incarnation.permits += int(event["capacity"])
        incarnation.grants.append(seq)
        self.state_version += 1

    def _on_tick(self, event: Event) -> None:
        op = self.op
        assert op is not None
        timeout = int(self.config["ack_timeout"])
        while self._timeouts and self._timeouts[0][0] <= self.now:
            due, _, _, delivery = heapq.heappop(self._timeouts)
            message = self.messages.peek(delivery.offset)  # an archived message is not outstanding
            if message is not None and message.outstanding is delivery:
                if due == self.timeout_due(delivery) + self.timer_slack and delivery not in op.due_timeouts:
                    op.due_timeouts.append(delivery)  # an entry an extension replaced is stale (KS-RTY-8)
        if timeout > 0:
            extended = sum(1 for delivery in op.due_timeouts if delivery.deadline is not None)
            self._exercise("missed-timeout", len(op.due_timeouts) - extended)
            self._exercise("extended-timeout-missed", extended)
        evict_after = int(self.config["evict_after"])
        for incarnation in list(self._disconnected.values()):
            if incarnation.disconnected_at + evict_after + self.timer_slack <= self.now:  # req: KS-GEN-9
                op.due_evictions.append(incarnation)
                del self._disconnected[incarnation.number]
        self._exercise("missed-eviction", len(op.due_evictions))

    def _on_restart(self, event: Event) -> None:
        seq = int(event["seq"])
        for incarnation in list(self.members.values()):
            if self.returns_as_failures and self.durable_attempts:
                # req: KS-RTY-7 (counts kept across the restart: a delivery it ended is a return that counts)
                for delivery in incarnation.outstanding.values():
                    message = self.messages[delivery.offset]
                    message.returns += 1
                    message.return_seq = seq
                    message.returned_delivery_seq = delivery.seq
            self._end_incarnation(incarnation, seq, returned=False)
        self.restarts += 1
        if not self.has_cursor:
            # Without a cursor the implementation keeps each message's resolution (KS-CUR-4 judged against them).
            self.persisted_cursor = self.cursor()
            self.persisted_holes = self.resolved_above_cursor()
            self.persist_seq = self.last_resolution_seq
        self.loaded = (self.persisted_cursor, BitMap(self.persisted_holes), self.persist_seq, seq)
        self.seek = None  # the restart loads a cursor at or past the last seek's target (KS-CUR-10)
        self.seek_holders = {}
        self.read_below = 0  # req: KS-GEN-8 (a restart reads again from the persisted cursor, at the next tick)
        self.flush_owed = False  # a flush owed before the crash was volatile; the reloaded cursor is the stored one
        if self.config.get("checkpoint_resume"):
            self.loaded_checkpoints = dict(self.checkpoints)
        holes = self.persisted_holes
        self.messages.restarted(len(self.messages) if self.best_effort else self.persisted_cursor)
        for message in self.messages.live_messages():
            self._reset_volatile(message)
            if message.entry is not None:  # a mate the restart may restore waits for its batch again (KS-BKT-10)
                mates = self.batches.setdefault(message.entry, [])
                if message.offset not in mates:
                    insort(mates, message.offset)
            if self.best_effort:
                continue  # best-effort outcomes are final (KS-BEF-1): there is no cursor to resume from
            if message.resolved and message.offset >= self.persisted_cursor and message.offset not in holes:
                if self._checkpointed(message) is not None:
                    continue  # req: KS-BKT-9 (below its bucket's checkpoint: durable, like a hole)
                # req: KS-CUR-3 (resolved after the last persistence: volatile, so it must be dispatched again)
                self._exercise("restart-skip")
                message.resolved = False
                message.resolution = None
                message.resolution_seq = None
                message.restored_seq = seq
                self.unresolved.add(message.offset)
        self.state_version += 1
        self._rebuild_indexes()
        self._new_epoch("restart", None, seq)

    def _on_seek(self, event: Event) -> None:
        """A seek: every delivery ends, the members stay, the cursor becomes the target (section 14, KS-CUR-8..11)."""
        seq = int(event["seq"])
        target = int(event["offset"])
        if not 0 <= target <= len(self.messages):
            self._problem(seq, f"seek names offset {target}, past the end of the log ({len(self.messages)})")
            return
        holders: dict[int, set[str]] = {}
        for incarnation in self.members.values():
            for offset in list(incarnation.outstanding):
                holders.setdefault(offset, set()).add(incarnation.name)
                message = self.messages[offset]
                self._end_delivery(message)
                self._refresh_head(message.key)
            incarnation.outstanding.clear()
            incarnation.unacked_blocked_seq = None
        self.seek_holders = holders
        self.restarts += 1  # a zombie op names a delivery made since the last restart or seek (KS-ACK-3)
        self.seek = (target, seq)
        self.loaded = None  # what a restart loaded is superseded: the seek's target is the store's cursor now
        self.loaded_checkpoints = {}
        self.read_below = 0  # req: KS-GEN-8 (reading starts again at the target, at the next read)
        self.messages.restarted(target)
        for message in self.messages.live_messages():
            self._reset_volatile(message)
            if message.offset >= target and message.resolved:
                # req: KS-CUR-8 (resolved before the seek, at or after its target: it must be dispatched again)
                self._exercise("seek-skip")
                message.resolved = False
                message.resolution = None
                message.resolution_seq = None
                message.restored_seq = seq
                self.unresolved.add(message.offset)
            elif message.offset < target and not message.resolved:
                # req: KS-CUR-9, KS-RES-1 (given up by the seek: resolved as `seeked`, recorded by the seek event)
                message.resolved = True
                message.resolution = "seeked"
                message.resolution_seq = seq
                message.restored_seq = None
                self.unresolved.discard(message.offset)
                self.last_resolution_seq = seq
        self.state_version += 1
        disconnected = dict(self._disconnected)
        self._rebuild_indexes()
        self._disconnected = disconnected  # the members stay, and so do their eviction clocks (KS-MEM-2)
        self._new_epoch("seek", None, seq)

    def _checkpointed(self, message: Message) -> tuple[int, int] | None:
        """With `checkpoint_resume`, the loaded checkpoint (position, seq) of the message's bucket when the message
        lies below it, else None."""
        if message.segment is None or message.bucket is None:
            return None
        loaded = self.loaded_checkpoints.get((message.segment, message.bucket))
        return loaded if loaded is not None and message.offset < loaded[0] else None

    def _on_key_released(self, event: Event) -> None:
        seq = int(event["seq"])
        state = self.keys.get(str(event["key"]))
        if state is None or not state.blocked:
            self._problem(seq, f"key {event['key']!r} was released but is not blocked")
            return
        # req: KS-POI-4 (every blocked message of the key: see the module doc)
        for offset in sorted(state.blocked):
            message = self.messages[offset]
            message.blocked = False
            message.failures = 0
            message.failure_seqs = []
            message.released_seq = seq
            message.awaiting_seq = seq
            message.last_event_seq = seq
            state.awaiting.add(offset)
        state.blocked = set()
        self._awaiting_keys.add(str(event["key"]))
        self._refresh_head(str(event["key"]))

    def _on_key_skipped(self, event: Event) -> None:
        seq = int(event["seq"])
        op = self.op
        assert op is not None
        state = self.keys.get(str(event["key"]))
        op.key = str(event["key"])
        self._exercise("skip-ignored")
        if state is None or not state.blocked:
            self._problem(seq, f"key {event['key']!r} was skipped but is not blocked")
            return
        op.skip_targets = sorted(state.blocked)

    def _on_segment_created(self, event: Event) -> None:
        number = int(event["segment"])
        predecessors = tuple(
            int(event[column]) for column in ("predecessor", "second_predecessor") if event.get(column) is not None
        )
        if predecessors:
            # A layout change re-routes keys (new N, new buckets) although membership is unchanged: for
            # KS-ASN-1 it starts a new routing epoch, as a membership change does (see the module doc).
            self._new_epoch("layout", None, int(event["seq"]))
        if self.layout_reported:
            self.created_in_op.append(number)
        self.segments[number] = Segment(
            number,
            int(event["buckets"]),
            int(event["range_lo"]),
            int(event["range_hi"]),
            predecessors,
            int(event["seq"]),
        )

    def _on_segment_sealed(self, event: Event) -> None:
        segment = self.segments.get(int(event["segment"]))
        if segment is None:
            self._problem(int(event["seq"]), f"segment {event['segment']} was sealed but never created")
            return
        segment.sealed = True

    def _report_reconnect_ignored(self, incarnation: Incarnation, seq: int, what: str) -> None:
        """`what` (an eviction or a hold at `seq`) treats a reconnected member as still away."""
        # req: KS-MEM-4
        self._report(
            "reconnect-ignored",
            seq,
            [incarnation.disconnected_seq, incarnation.reconnected_seq, seq],
            rules.leaving.reconnect_ignored(
                incarnation.name, incarnation.disconnected_seq, incarnation.reconnected_seq, what
            ),
        )
