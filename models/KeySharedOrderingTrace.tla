------------------------ MODULE KeySharedOrderingTrace ------------------------
(***************************************************************************)
(* Trace validation: replays an implementation's trace (spec/trace.md),    *)
(* one KeySharedOrdering action per event, so that TLC proves the          *)
(* implementation's run is a behaviour of the model (the technique of      *)
(* tlaplus/Examples' EWD998ChanTrace, without TLC features newer than      *)
(* 2.15).  The implementation's choices are in the trace (which consumer   *)
(* got a key), so the search is linear.                                    *)
(*                                                                         *)
(* `keyshared model-check --trace` writes a module that extends this one   *)
(* and defines the trace as a sequence of records                          *)
(*   [seq, e, o, k, c, a, cap, acc, r, cur, holes, p]                      *)
(* (sequence number, event kind, offset, key, consumer, attempt, capacity, *)
(* accepted keys, reason, cursor, persisted holes, predecessor segment),   *)
(* with -1, NoKey, NoOne, "" for absent columns.  At the first event that does not fit, TLC       *)
(* prints <<"rejected", seq, reasons>>; after the last one it prints       *)
(* <<"accepted", n>>.                                                      *)
(***************************************************************************)
EXTENDS KeySharedOrdering

CONSTANT Trace

VARIABLE l   \* the index of the next trace event to replay

\* Events with no counterpart in the model, replayed as no-ops (listed in models/README.md).
SkippedEvents ==
    {"tick", "quiescent", "checkpoint", "bucket_withheld", "bucket_assigned", "segment_sealed"}

Ev == Trace[l]
OffsetOk == Ev.o \in Published /\ keyOf[Ev.o] = Ev.k

\* No change besides the trace position.
Same == UNCHANGED vars

\* A layout change of the buckets selector may move keys without a membership change: the
\* model treats it as the start of a new epoch for the targets (see models/README.md).
LayoutChange ==
    /\ target' = [k \in Keys |-> NoOne]
    /\ draining' = [k \in Keys |-> NoOne]
    /\ UNCHANGED <<published, keyOf, st, holder, attempts, fails, how, processed, members, connected,
                   accepts, cap, pcur, pholes, spent>>

IgnoredAckFits ==
    CASE Ev.r = "unknown-offset" -> Ev.o \notin Published
      [] Ev.r = "resolved" -> Ev.o \in Published /\ st[Ev.o] = "resolved"
      [] Ev.r = "not-holder" -> Ev.o \in Published /\ ~(st[Ev.o] = "outstanding" /\ holder[Ev.o] = Ev.c)
      [] OTHER -> FALSE

HeldFits ==
    /\ OffsetOk /\ st[Ev.o] = "pending"
    /\ Ev.c = NoOne \/ target[Ev.k] = Ev.c
    /\ CASE Ev.r = "draining" -> draining[Ev.k] # NoOne
         [] Ev.r = "capacity" -> Ev.c # NoOne /\ Cardinality(HeldBy(Ev.c)) >= cap[Ev.c]
         [] Ev.r = "inactive" -> Ev.c # NoOne /\ Ev.c \notin connected
         [] OTHER -> TRUE

\* A release names a key: every blocked message of it is pending again with a fresh budget (KS-POI-4).
ReleaseKey(k) ==
    LET blocked == {o \in OfKey(k) : st[o] = "blocked"}
    IN /\ blocked # {}
       /\ st' = [o \in DOMAIN st |-> IF o \in blocked THEN "pending" ELSE st[o]]
       /\ fails' = [o \in DOMAIN fails |-> IF o \in blocked THEN 0 ELSE fails[o]]
       /\ UNCHANGED <<published, keyOf, holder, attempts, how, processed, members, connected,
                      accepts, cap, target, draining, pcur, pholes>>

\* Reporting a disconnected member disconnected again changes nothing (its eviction clock keeps running).
DisconnectEvent(c) == IF c \in connected THEN Disconnect(c) ELSE c \in members /\ Same

\* The model step for the current event (the trace position advances separately).
EventStep ==
    CASE Ev.e = "publish" -> Ev.o = published /\ Publish(Ev.k)
      [] Ev.e = "consumer_added" -> Join(Ev.c, Ev.acc, Ev.cap)
      [] Ev.e = "consumer_removed" -> Leave(Ev.c)
      [] Ev.e = "consumer_evicted" -> Evict(Ev.c)
      [] Ev.e = "consumer_disconnected" -> DisconnectEvent(Ev.c)
      [] Ev.e = "consumer_reconnected" -> IF Ev.c \in connected THEN Ev.c \in members /\ Same ELSE Reconnect(Ev.c)
      [] Ev.e = "restart" -> Restart
      [] Ev.e = "deliver" -> OffsetOk /\ Deliver(Ev.o, Ev.c) /\ attempts'[Ev.o] = Ev.a
      [] Ev.e = "held" -> HeldFits /\ Same
      [] Ev.e = "ack" -> OffsetOk /\ Ack(Ev.o, Ev.c)
      [] Ev.e \in {"ack_ignored", "nack_ignored"} -> IgnoredAckFits /\ Same
      [] Ev.e \in {"nack", "timeout"} -> OffsetOk /\ attempts[Ev.o] = Ev.a /\ Fail(Ev.o, Ev.c)
      [] Ev.e = "drop" /\ Ev.r = "poison" -> OffsetOk /\ PoisonPolicy = "drop" /\ Poison(Ev.o)
      [] Ev.e = "drop" /\ Ev.r = "operator" -> OffsetOk /\ Skip(Ev.o)
      [] Ev.e = "dead_letter" -> OffsetOk /\ PoisonPolicy = "dead-letter" /\ attempts[Ev.o] = Ev.a /\ Poison(Ev.o)
      [] Ev.e = "key_blocked" -> OffsetOk /\ PoisonPolicy = "block" /\ attempts[Ev.o] = Ev.a /\ Poison(Ev.o)
      [] Ev.e = "key_released" -> ReleaseKey(Ev.k)
      [] Ev.e = "key_skipped" -> (\E o \in OfKey(Ev.k) : st[o] = "blocked") /\ Same
      [] Ev.e = "filter" -> OffsetOk /\ Filter(Ev.o)
      [] Ev.e = "cursor_persisted" ->
            /\ Ev.cur = Cursor /\ Ev.holes = PersistedHoles
            /\ IF <<pcur, pholes>> # <<Cursor, PersistedHoles>> THEN Persist ELSE Same
      [] Ev.e = "segment_created" -> IF Ev.p >= 0 THEN LayoutChange ELSE Same
      [] Ev.e \in SkippedEvents -> Same
      [] OTHER -> FALSE

\* Routing is implicit in the trace: the first delivery (or hold) of a key in an epoch names its target.
ImplicitRoute ==
    /\ Ev.e \in {"deliver", "held"}
    /\ Ev.c # NoOne /\ Ev.k \in Keys
    /\ target[Ev.k] = NoOne
    /\ Route(Ev.k, Ev.c)

Replay == \/ EventStep /\ HistoryWith(Ev.e = "restart", IF Ev.e = "consumer_reconnected" THEN {Ev.c} ELSE {})
             /\ UNCHANGED spent /\ l' = l + 1
          \/ ImplicitRoute /\ History(FALSE) /\ UNCHANGED <<spent, l>>

\* Why the current event does not fit: the requirements whose rules it breaks, when we can tell.
Why ==
    CASE Ev.e = "deliver" /\ ~OffsetOk -> {"the offset was not published with this key"}
      [] Ev.e = "deliver" ->
            DeliverBlockers(Ev.o, Ev.c)
            \cup (IF Ev.k \in Keys /\ target[Ev.k] = NoOne /\ Ev.c \notin Eligible(Ev.k)
                  THEN {"KS-FLT-5"} ELSE {})
            \cup (IF attempts[Ev.o] + 1 # Ev.a THEN {"KS-RTY-5"} ELSE {})
      [] Ev.e = "ack" -> {"KS-ACK-2"}
      [] Ev.e \in {"nack", "timeout"} ->
            IF OffsetOk /\ st[Ev.o] = "outstanding" /\ holder[Ev.o] = Ev.c THEN {"KS-RTY-5"} ELSE {"KS-RTY-1"}
      [] Ev.e \in {"ack_ignored", "nack_ignored"} -> {"KS-ACK-1"}
      [] Ev.e \in {"drop", "dead_letter", "key_blocked"} -> {"KS-RES-1", "KS-RTY-6"}
      [] Ev.e = "filter" -> {"KS-FLT-3", "KS-FLT-4"}
      [] Ev.e = "held" -> {"KS-ASN-1"}
      [] Ev.e = "cursor_persisted" ->
            (IF Ev.cur > Cursor \/ \E o \in Ev.holes : o \notin Published \/ st[o] # "resolved"
             THEN {"KS-CUR-1"} ELSE {})
            \cup (IF Ev.cur < Cursor THEN {"KS-CUR-5"} ELSE {})
            \cup (IF Ev.cur = Cursor /\ Ev.holes \subseteq PersistedHoles /\ Ev.holes # PersistedHoles
                  THEN {"KS-CUR-6"} ELSE {})
      [] Ev.e \in {"consumer_added", "consumer_removed", "consumer_evicted", "consumer_disconnected"} ->
            {"KS-GEN-4", "KS-MEM-2"}
      [] OTHER -> {}

TraceInit == Init /\ l = 1

TraceNext ==
    \/ l <= Len(Trace) /\ Replay
    \/ l <= Len(Trace) /\ ~ENABLED Replay /\ PrintT(<<"rejected", Ev.seq, Why>>) /\ FALSE
    \/ l > Len(Trace) /\ PrintT(<<"accepted", Len(Trace)>>) /\ FALSE

TraceSpec == TraceInit /\ [][TraceNext]_<<vars, l>>
==============================================================================
