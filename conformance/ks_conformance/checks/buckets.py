"""spec/checking.md section 2.1, buckets (section 17 of the spec): routing a delivery of a bucket to its owner,
handoffs, successors after a layout change, and the stability of the bucket policy.
"""

from __future__ import annotations

from ks_conformance.checks.membership import OpEventChecks
from ks_conformance.checks.records import Incarnation, Message
from ks_conformance.checks.state import bucket_owner


class BucketChecks(OpEventChecks):
    """The checks of a delivery under the `buckets` selector (section 2.1)."""

    def _check_bucket_delivery(self, message: Message, seq: int, incarnation: Incarnation | None, name: str) -> None:
        assert message.segment is not None and message.bucket is not None
        segment = self.segments.get(message.segment)
        if segment is None:
            return
        bucket = (message.segment, message.bucket)
        names = sorted(self.members)
        if names and self.config["bucket_assignment"] != "sorted":
            self._check_bucket_owner(message, seq, incarnation, name)
        elif names:
            # req: KS-BKT-3
            self._exercise("bucket-misassigned")
            owner = bucket_owner(message.bucket, segment.buckets, names)
            if owner != name:
                self._report(
                    "bucket-misassigned",
                    seq,
                    [seq],
                    [
                        self._m(message)
                        + f" in segment {segment.number} (N = {segment.buckets}), bucket {message.bucket}",
                        f"the members sorted by name are {names}",
                    ],
                    f"bucket {message.bucket} belongs to {owner}, yet m{message.offset} was delivered to {name} "
                    f"[seq {seq}] (KS-BKT-3)",
                    offset=message.offset,
                    consumer=name,
                    owner=owner,
                )
        outstanding = self.bucket_outstanding.get(bucket, {})
        if any(d.epoch < self.epoch for d in outstanding.values()):
            self._exercise("bucket-split-owner")
        # req: KS-BKT-4
        other = next((d for d in outstanding.values() if d.holder is not incarnation), None)
        if other is not None:
            self._report(
                "bucket-split-owner",
                seq,
                [other.seq, seq],
                [f"{other.holder.name} holds m{other.offset} of bucket {bucket} [seq {other.seq}]", self._m(message)],
                f"m{message.offset} of the same bucket was delivered to {name} [seq {seq}], but a moving bucket is "
                "withheld until its prior owner drains (KS-BKT-4)",
                offset=message.offset,
                bucket=list(bucket),
            )
        if segment.predecessor is not None:
            # req: KS-BKT-5
            self._exercise("successor-first")
            predecessor = self.segments.get(segment.predecessor)
            if predecessor is not None:
                for offset in predecessor.unresolved:
                    earlier = self.messages[offset]
                    if earlier.hash is not None and segment.lo <= earlier.hash >> 16 <= segment.hi:
                        self._report(
                            "successor-first",
                            seq,
                            [earlier.publish_seq, seq],
                            [
                                self._m(earlier) + f" in segment {predecessor.number}, unresolved",
                                f"segment {segment.number} succeeds it over [{segment.lo}, {segment.hi}]",
                            ],
                            f"m{message.offset} of segment {segment.number} was delivered [seq {seq}] before the "
                            "predecessor drained that range (KS-BKT-5)",
                            offset=message.offset,
                        )
                        break

    def _check_bucket_owner(self, message: Message, seq: int, incarnation: Incarnation | None, name: str) -> None:
        """Policies other than `sorted`: one owner per bucket within an epoch (KS-BKT-3), and a join or leave
        moves only what it must (KS-BKT-8), judged on buckets delivered on both sides of one membership change."""
        assert message.segment is not None and message.bucket is not None and incarnation is not None
        bucket = (message.segment, message.bucket)
        last = self.bucket_last.get(bucket)
        self.bucket_last[bucket] = (self.epoch, incarnation, seq)
        if last is None:
            return
        epoch, previous, previous_seq = last
        where = f"bucket {message.bucket} of segment {message.segment}"
        if epoch == self.epoch:
            # req: KS-BKT-3
            self._exercise("bucket-misassigned")
            if previous is incarnation:
                return
            self._report(
                "bucket-misassigned",
                seq,
                [previous_seq, seq],
                [f"{where} was delivered to {previous.name} at seq {previous_seq}", "no membership change since"],
                f"m{message.offset} of it went to {name} [seq {seq}], but a bucket has one target at a time (KS-BKT-3)",
                offset=message.offset,
                consumer=name,
                owner=previous.name,
            )
            return
        if epoch != self.epoch - 1:
            return
        change, changed, change_seq = self.epoch_change[self.epoch]
        if change not in ("join", "leave") or changed is None:
            return
        # req: KS-BKT-8
        self._exercise("unstable-buckets")
        if previous is incarnation:
            return
        moved_to = self._buckets_moved.setdefault((self.epoch, message.segment), set())
        if change == "join" and changed is incarnation:
            moved_to.add(message.bucket)
            segment = self.segments[message.segment]
            share = -(-segment.buckets // max(1, len(self.members)))
            if len(moved_to) <= share:
                return
            why = (
                f"{len(moved_to)} buckets of segment {message.segment} moved to {name}, more than ceil(N/k) = "
                f"ceil({segment.buckets}/{len(self.members)}) = {share}"
            )
        elif change == "leave" and changed is previous:
            return
        else:
            what = "joined" if change == "join" else "left"
            why = f"only {changed.name} {what} [seq {change_seq}], yet {where} moved from {previous.name} to {name}"
        self._report(
            "unstable-buckets",
            seq,
            [previous_seq, change_seq, seq],
            [f"{where} was delivered to {previous.name} at seq {previous_seq}", f"m{message.offset} went to {name}"],
            f"{why}, but a join moves buckets only to the joiner, at most ceil(N/k), and a leave only the leaver's "
            f"(KS-BKT-8, bucket_assignment {self.config['bucket_assignment']!r})",
            offset=message.offset,
            consumer=name,
            other=previous.name,
        )
