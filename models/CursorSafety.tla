------------------------------ MODULE CursorSafety ------------------------------
(***************************************************************************)
(* The cursor of spec/key-shared.md section 14: the contiguous resolved    *)
(* prefix of the log, persisted (optionally with its ack holes) and        *)
(* debounced by persist_interval ticks, and a crash that loses all         *)
(* volatile state.  Keys and consumers do not matter here: messages are    *)
(* read into a window of bounded size, delivered, and resolved out of      *)
(* order by an ack, the poison policy (drop or dead letter: the same to   *)
(* the cursor) or a filter; deliveries fail (nack, timeout) or return (the *)
(* holder left or was evicted: never a resolution, KS-MEM-1).  History     *)
(* variables record which acks happened and which deliveries failed, so    *)
(* that the properties can tell an ack from any other way of resolving.    *)
(* A seek (section 14) moves the cursor to a target: everything at or      *)
(* after it is read again, acked or not, everything below it is given up   *)
(* (resolved as "seeked"), and the target is persisted at once; a crash    *)
(* followed by a seek below the persisted cursor is a checkpoint           *)
(* consumer's resume.                                                      *)
(*                                                                         *)
(* Deliberately broken variants are selected by the constant Bug.          *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS
    N,                \* offsets 0 .. N-1 are published
    Window,           \* the look-ahead bound (KS-FLW-2)
    PersistInterval,  \* ticks; 0 persists at the end of every operation that changed the cursor
    PersistHoles,     \* persist the resolved offsets above the cursor too
    MaxFailures,      \* nacks and timeouts in one behaviour
    MaxReturns,       \* deliveries returned by a leaving or evicted holder in one behaviour
    MaxCrashes,       \* restarts in one behaviour
    MaxSeeks,         \* seeks in one behaviour
    Bug               \* "none", or the name of a deliberately broken variant

Bugs == {"none", "CursorAtHighestAck", "RestartKeepsReadPosition", "HolesCapped"}

ASSUME /\ N \in Nat \ {0} /\ Window \in Nat \ {0} /\ PersistInterval \in Nat /\ MaxSeeks \in Nat
       /\ PersistHoles \in BOOLEAN /\ Bug \in Bugs

Offsets == 0 .. (N - 1)

VARIABLES
    st,          \* st[o]: "unread", "pending", "outstanding" or "resolved"
    failed,      \* failed[o]: its last delivery failed, so the poison policy may resolve it
    readPos,     \* the next offset to read
    pcur,        \* the persisted cursor
    pholes,      \* the persisted ack holes
    since,       \* ticks since the last persistence, capped at PersistInterval
    how,         \* how[o]: "acked", "poisoned" (dropped or dead-lettered), "filtered", or "" while unresolved
    acked,       \* history: acked[o] once o's holder acked it (kept across a crash only with the resolution)
    failEver,    \* history: failEver[o] once a delivery of o failed (kept across a crash only with the resolution)
    tickParity,  \* ghost: flips at every tick, so that properties can tell a tick step
    spent,       \* budgets used by the environment
    owed,        \* history: the offsets the last seek asked to replay, not delivered or resolved since
    floor        \* history: the last seek's target (0 before any seek)

vars == <<st, failed, readPos, pcur, pholes, since, how, acked, failEver, tickParity, spent, owed, floor>>

\* States that differ only in tickParity behave alike: TLC's VIEW ignores it.
View == <<st, failed, readPos, pcur, pholes, since, how, acked, failEver, spent, owed, floor>>

-----------------------------------------------------------------------------
Min(S) == CHOOSE x \in S : \A y \in S : x <= y
Max(S) == CHOOSE x \in S : \A y \in S : x >= y

\* The cursor of a message-state function s: the smallest unresolved offset, or N.
CursorOf(s) == IF \E o \in Offsets : s[o] # "resolved" THEN Min({o \in Offsets : s[o] # "resolved"}) ELSE N
HolesOf(s) == {o \in Offsets : o >= CursorOf(s) /\ s[o] = "resolved"}
Cursor == CursorOf(st)
InWindow == {o \in Offsets : st[o] \in {"pending", "outstanding"}}

\* What gets persisted for the message states s.
PersistedCursorOf(s) ==
    IF Bug = "CursorAtHighestAck" /\ \E o \in Offsets : s[o] = "resolved"
    THEN Max({o \in Offsets : s[o] = "resolved"}) + 1          \* the highest resolution, not the prefix
    ELSE CursorOf(s)                                            \* req: KS-CUR-1, KS-RES-3
PersistedHolesOf(s) ==
    IF ~PersistHoles THEN {}
    ELSE IF Bug = "HolesCapped" /\ HolesOf(s) # {}
         THEN {Min(HolesOf(s))}                                 \* a cap of one hole
         ELSE {o \in HolesOf(s) : o >= PersistedCursorOf(s)}    \* req: KS-CUR-6

\* An operation other than a tick ends: with persist_interval 0 a changed cursor is persisted.
PersistAfterOp ==
    IF PersistInterval = 0
    THEN /\ pcur' = PersistedCursorOf(st')                      \* req: KS-CUR-5
         /\ pholes' = PersistedHolesOf(st')
    ELSE UNCHANGED <<pcur, pholes>>

-----------------------------------------------------------------------------
Init ==
    /\ st = [o \in Offsets |-> "unread"]
    /\ failed = [o \in Offsets |-> FALSE]
    /\ readPos = 0
    /\ pcur = 0
    /\ pholes = {}
    /\ since = 0
    /\ how = [o \in Offsets |-> ""]
    /\ acked = [o \in Offsets |-> FALSE]
    /\ failEver = [o \in Offsets |-> FALSE]
    /\ tickParity = FALSE
    /\ spent = [fail |-> 0, return |-> 0, crash |-> 0, seek |-> 0]
    /\ owed = {}
    /\ floor = 0

\* The dispatch pass reads in offset order while the window has room; a persisted hole is not
\* read again (it is already resolved) and is stepped over.
Read ==
    /\ readPos < N
    /\ IF st[readPos] = "resolved"
       THEN UNCHANGED st
       ELSE /\ Cardinality(InWindow) < Window                   \* req: KS-FLW-2
            /\ st' = [st EXCEPT ![readPos] = "pending"]
    /\ readPos' = readPos + 1
    /\ UNCHANGED <<failed, pcur, pholes, since, how, acked, failEver, tickParity, spent, owed, floor>>

Deliver(o) ==
    /\ st[o] = "pending"
    /\ st' = [st EXCEPT ![o] = "outstanding"]
    /\ owed' = owed \ {o}
    /\ UNCHANGED <<failed, readPos, pcur, pholes, since, how, acked, failEver, tickParity, spent, floor>>

\* Resolve o by resolution r (section 13); the cursor counts every kind (KS-RES-3).
Resolve(o, r) ==
    /\ st' = [st EXCEPT ![o] = "resolved"]
    /\ how' = [how EXCEPT ![o] = r]
    /\ owed' = owed \ {o}
    /\ PersistAfterOp
    /\ UNCHANGED <<failed, readPos, since, failEver, tickParity, spent, floor>>

\* The holder acks its outstanding delivery.
Ack(o) ==
    /\ st[o] = "outstanding"
    /\ Resolve(o, "acked")
    /\ acked' = [acked EXCEPT ![o] = TRUE]
\* The poison policy drop or dead-letter resolves a message whose delivery failed.
Poison(o) == st[o] = "pending" /\ failed[o] /\ Resolve(o, "poisoned") /\ UNCHANGED acked
\* A key nobody accepts: resolved as filtered before any delivery.
Filter(o) == st[o] = "pending" /\ ~failed[o] /\ Resolve(o, "filtered") /\ UNCHANGED acked

\* A nack or a timeout: the message is retrying (pending again, eligible for the poison policy).
Fail(o) ==
    /\ spent.fail < MaxFailures
    /\ st[o] = "outstanding"
    /\ st' = [st EXCEPT ![o] = "pending"]
    /\ failed' = [failed EXCEPT ![o] = TRUE]
    /\ failEver' = [failEver EXCEPT ![o] = TRUE]
    /\ spent' = [spent EXCEPT !.fail = @ + 1]
    /\ UNCHANGED <<readPos, pcur, pholes, since, how, acked, tickParity, owed, floor>>

\* The holder left or was evicted: the message is pending again, without a failure (KS-RTY-7).
Return(o) ==
    /\ spent.return < MaxReturns
    /\ st[o] = "outstanding"
    /\ st' = [st EXCEPT ![o] = "pending"]                       \* req: KS-MEM-1
    /\ spent' = [spent EXCEPT !.return = @ + 1]
    /\ UNCHANGED <<failed, readPos, pcur, pholes, since, how, acked, failEver, tickParity, owed, floor>>

\* A tick: with persist_interval > 0 the changed cursor is persisted in phase 6 once at least
\* persist_interval ticks have passed since the last persistence (KS-CUR-5).
Tick ==
    /\ tickParity' = ~tickParity
    /\ LET due == PersistInterval > 0 /\ since + 1 >= PersistInterval
           changed == <<pcur, pholes>> # <<PersistedCursorOf(st), PersistedHolesOf(st)>>
       IN IF due /\ changed
          THEN /\ pcur' = PersistedCursorOf(st)                 \* req: KS-CUR-5
               /\ pholes' = PersistedHolesOf(st)
               /\ since' = 0
          ELSE /\ UNCHANGED <<pcur, pholes>>
               /\ since' = IF since < PersistInterval THEN since + 1 ELSE since
    /\ UNCHANGED <<st, failed, readPos, how, acked, failEver, spent, owed, floor>>

\* A crash and restart: the volatile state is lost; offsets below the persisted cursor and the
\* persisted holes stay resolved, every other offset will be read again from the persisted cursor.
Crash ==
    /\ spent.crash < MaxCrashes
    /\ LET kept(o) == o < pcur \/ o \in pholes IN
       /\ st' = [o \in Offsets |-> IF kept(o) THEN "resolved" ELSE "unread"]            \* req: KS-CUR-3
       /\ how' = [o \in Offsets |-> IF kept(o) THEN how[o] ELSE ""]
       /\ acked' = [o \in Offsets |-> kept(o) /\ acked[o]]
       /\ failEver' = [o \in Offsets |-> kept(o) /\ failEver[o]]
    /\ failed' = [o \in Offsets |-> FALSE]
    /\ readPos' = IF Bug = "RestartKeepsReadPosition" THEN readPos ELSE pcur                \* req: KS-CUR-3
    /\ spent' = [spent EXCEPT !.crash = @ + 1]
    /\ UNCHANGED <<pcur, pholes, since, tickParity, owed, floor>>

\* A seek to offset t (section 14): every delivery ends (the deliveries are volatile state here);
\* every offset at or after t is unresolved and read again, whatever it was, every unresolved
\* offset below t is resolved as "seeked", and the target is persisted at once, without holes.
\* After a Crash, a Seek below the persisted cursor is a checkpoint consumer's resume.
Seek(t) ==
    /\ spent.seek < MaxSeeks
    /\ st' = [o \in Offsets |-> IF o < t THEN "resolved" ELSE "unread"]                   \* req: KS-CUR-8, KS-CUR-9
    /\ how' = [o \in Offsets |-> IF o >= t THEN "" ELSE IF st[o] = "resolved" THEN how[o] ELSE "seeked"]
    /\ acked' = [o \in Offsets |-> o < t /\ acked[o]]
    /\ failEver' = [o \in Offsets |-> o < t /\ failEver[o]]
    /\ failed' = [o \in Offsets |-> FALSE]
    /\ readPos' = t                                                                     \* req: KS-CUR-8
    /\ pcur' = t                                                                        \* req: KS-CUR-10
    /\ pholes' = {}
    /\ since' = 0
    /\ owed' = {o \in Offsets : o >= t}
    /\ floor' = t
    /\ spent' = [spent EXCEPT !.seek = @ + 1]
    /\ UNCHANGED tickParity

ReadAny == Read
DeliverAny == \E o \in Offsets : Deliver(o)
AckAny == \E o \in Offsets : Ack(o)
PoisonAny == \E o \in Offsets : Poison(o)
FilterAny == \E o \in Offsets : Filter(o)
FailAny == \E o \in Offsets : Fail(o)
ReturnAny == \E o \in Offsets : Return(o)
SeekAny == \E t \in 0 .. N : Seek(t)

Next == ReadAny \/ DeliverAny \/ AckAny \/ PoisonAny \/ FilterAny \/ FailAny
        \/ ReturnAny \/ Tick \/ Crash \/ SeekAny

\* Quiescence: the dispatcher reads and delivers, consumers ack, the poison policy resolves what
\* failed, and time advances.  Progress steps cannot go on for ever (each reads, delivers or
\* resolves), so one weak-fairness condition covers them; ticks get their own.
Progress == ReadAny \/ DeliverAny \/ AckAny \/ PoisonAny
Fairness == WF_vars(Progress) /\ WF_vars(Tick)

Spec == Init /\ [][Next]_vars
LiveSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(* Properties, named after the requirement each checks. *)

TypeOK ==
    /\ st \in [Offsets -> {"unread", "pending", "outstanding", "resolved"}]
    /\ readPos \in 0 .. N /\ pcur \in 0 .. N /\ pholes \subseteq Offsets
    /\ since \in 0 .. PersistInterval
    /\ how \in [Offsets -> {"", "acked", "poisoned", "filtered", "seeked"}]
    /\ owed \subseteq Offsets /\ floor \in 0 .. N

Delivered(o) == st[o] # "outstanding" /\ st'[o] = "outstanding"
Persisted == <<pcur', pholes'>> # <<pcur, pholes>>
TickStep == tickParity' # tickParity
SeekStep == spent'.seek # spent.seek

\* Over history: o was resolved by a rule that allows it.  Acked: its holder acked it (a return or
\* eviction is not an ack); poisoned: a delivery of it failed; filtered: always allowed here (keys
\* and filters are KeySharedOrdering's, whose KS_FLT_3 and KS_FLT_4 check the filter rule); seeked:
\* given up by a seek whose target lies above it (over history: floor).
Allowed(o) ==
    \/ how[o] = "acked" /\ acked[o]
    \/ how[o] = "poisoned" /\ failEver[o]
    \/ how[o] = "filtered"
    \/ how[o] = "seeked" /\ o < floor

\* Every offset below the persisted cursor, and every persisted hole, is resolved, by an allowed rule.
KS_CUR_1_PersistedCursorSafe ==
    \A o \in Offsets : o < pcur \/ o \in pholes => st[o] = "resolved" /\ Allowed(o)

\* Nothing is lost: every resolved offset was resolved by an allowed rule, never by a return, an
\* eviction, or a restart that trusted a cursor beyond it.
KS_CUR_1_NothingLost == \A o \in Offsets : st[o] = "resolved" => Allowed(o)

\* The persisted cursor never decreases, except in a seek's own write (KS-CUR-10).
KS_CUR_2_PersistedCursorMonotone == [][pcur' >= pcur \/ SeekStep]_vars

\* No offset below the read position is unread (a restart sets the read position to the persisted
\* cursor, so every unresolved offset is read again).
KS_CUR_3_RestartRereadsUnresolved == \A o \in Offsets : o < readPos => st[o] # "unread"

\* No offset below the persisted cursor, and no persisted hole, is delivered.
KS_CUR_4_NoResurrection == [][\A o \in Offsets : Delivered(o) => o >= pcur /\ o \notin pholes]_vars

\* Debounced (KS-CUR-7, a SHOULD): the persisted values change only with interval 0 or at a tick with since + 1 >= interval.
KS_CUR_7_PersistDebounced ==
    [][Persisted => PersistInterval = 0 \/ (TickStep /\ since + 1 >= PersistInterval) \/ SeekStep]_vars

\* Timely: after a tick with interval > 0 and since + 1 >= interval, the persisted cursor and holes are
\* those of the current state.
KS_CUR_5_PersistOnTime ==
    [][TickStep /\ PersistInterval > 0 /\ since + 1 >= PersistInterval =>
         <<pcur', pholes'>> = <<PersistedCursorOf(st'), PersistedHolesOf(st')>>]_vars

\* With interval 0 the persisted cursor always equals the cursor.
KS_CUR_5_PersistEveryChange == PersistInterval = 0 => pcur = Cursor

\* Whenever holes are persisted, they are exactly the resolved offsets at or above the new persisted
\* cursor.
KS_CUR_6_AllHolesPersisted ==
    [][Persisted /\ PersistHoles => pholes' = {o \in Offsets : o >= pcur' /\ st'[o] = "resolved"}]_vars

\* At most Window offsets are read and unresolved (pending or outstanding).
KS_FLW_2_WindowBound == Cardinality({o \in Offsets : st[o] \in {"pending", "outstanding"}}) <= Window

\* A seek replays: an offset at or after the last seek's target that has not been delivered or
\* resolved since (history: owed) is unresolved.
KS_CUR_8_SeekReplays == \A o \in owed : st[o] # "resolved"

\* Nothing below the last seek's target (history: floor) is delivered after it.
KS_CUR_9_NothingBelowSeek == [][\A o \in Offsets : Delivered(o) => o >= floor]_vars

\* A seek is durable: no offset it still owes lies below the persisted cursor or in the persisted
\* holes, so a crash after it replays what it asked for.
KS_CUR_10_SeekDurable == \A o \in owed : o >= pcur /\ o \notin pholes

\* Liveness: eventually the persisted cursor stays at the end of the log and every offset stays
\* resolved by an allowed rule (Allowed).
KS_LIV_2_CursorReachesEnd == <>[](pcur = N /\ \A o \in Offsets : Allowed(o))
==============================================================================
