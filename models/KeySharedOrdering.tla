--------------------------- MODULE KeySharedOrdering ---------------------------
(***************************************************************************)
(* Key-Shared dispatch as spec/key-shared.md defines it: publishing,       *)
(* consumers joining, leaving, disconnecting and being evicted, routing    *)
(* of a key to one target per membership epoch, delivery, ack, nack or     *)
(* timeout, poison (drop, dead-letter, block) with operator release and    *)
(* skip, filters, draining on reassignment (section 7), the cursor's       *)
(* persistence and restart (section 14), for the strict and owner          *)
(* profiles.  With drain_granularity = "hash" (KS-DRN-3) keys are grouped  *)
(* in slots (SlotOf), the keys of a slot share one target, and a key       *)
(* drains while any key of its slot is outstanding at an old owner, and    *)
(* waits for an earlier slot-mate's message awaiting redelivery.           *)
(*                                                                         *)
(* The model is untimed: ticks, ack timeouts, back-off and eviction delays *)
(* are replaced by nondeterminism, so every timing the spec allows is one  *)
(* of the model's behaviours.  A retrying message is a pending message     *)
(* whose last delivery failed (it may become ready at any time).  The      *)
(* selector is abstract: a key's target is chosen lazily, once per         *)
(* membership epoch, among its eligible members (a superset of every       *)
(* selector of section 4).                                                 *)
(*                                                                         *)
(* Each action that depends on a rule of the spec cites the requirement;   *)
(* each property is named after the requirement it checks.  Deliberately   *)
(* broken variants are selected by the constant Bug.                       *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets, Sequences, TLC

CONSTANTS
    Consumers,        \* consumer names
    Keys,             \* routing keys
    MaxMsgs,          \* how many messages may be published
    Profile,          \* "strict" or "owner"
    Window,           \* the look-ahead bound (KS-FLW-2)
    MaxRedeliveries,  \* failures tolerated before a message is poisoned (KS-RTY-6)
    PoisonPolicy,     \* "drop", "dead-letter" or "block" (section 11)
    PersistHoles,     \* whether ack holes are persisted with the cursor (section 14)
    DrainGranularity, \* "key" (the default) or "hash": draining per slot (KS-DRN-3)
    SlotOf,           \* SlotOf[k]: the slot (sticky-key hash) of key k; read only under "hash"
    NoOne,            \* a model value: no consumer
    NoKey,            \* a model value: no key (an unpublished offset)
    \* Bounds and choices of the model-checking environment (unused by trace validation):
    Capacity,         \* capacity of a joining consumer
    FilterChoices,    \* the key sets a joining consumer may accept (subsets of Keys)
    MaxFailures,      \* nacks and timeouts in one behaviour
    MaxMemberChanges, \* joins, leaves and disconnections in one behaviour
    MaxRestarts,      \* restarts in one behaviour
    KeepConnected,    \* liveness configs: the last connected member never leaves
    Bug               \* "none", or the name of a deliberately broken variant

Bugs == {"none", "NoDraining", "ReplayOutOfOrder", "LeaveCountsAsAcked", "DrainNeverClears",
         "SlotDrainOneKey", "SlotMatesWaitForEachOther"}

ASSUME /\ Profile \in {"strict", "owner"}
       /\ PoisonPolicy \in {"drop", "dead-letter", "block"}
       /\ MaxMsgs \in Nat /\ Window \in Nat \ {0} /\ MaxRedeliveries \in Nat
       /\ PersistHoles \in BOOLEAN /\ KeepConnected \in BOOLEAN
       /\ DrainGranularity \in {"key", "hash"} /\ DOMAIN SlotOf = Keys
       /\ Bug \in Bugs

Offsets == 0 .. (MaxMsgs - 1)
MsgStates == {"unpublished", "pending", "outstanding", "blocked", "resolved"}
Resolutions == {"acked", "dropped", "dead_lettered", "filtered"}

VARIABLES
    published,   \* number of published messages: offsets 0 .. published-1 exist
    keyOf,       \* keyOf[o]: the routing key of offset o (NoKey if unpublished)
    st,          \* st[o]: the message's state (section 1; retrying is pending with attempts > 0)
    holder,      \* holder[o]: the consumer its outstanding delivery is at, else NoOne
    attempts,    \* attempts[o]: deliveries since the last restart (KS-RTY-5)
    fails,       \* fails[o]: failures since the last restart or release (section 10)
    how,         \* how[o]: the resolution, "" while unresolved (section 13)
    processed,   \* ghost: processed[o] is TRUE once a holder acked o
    members,     \* current members
    connected,   \* members that are connected (section 12)
    accepts,     \* accepts[c]: the keys member c accepts (its filters, section 5)
    cap,         \* cap[c]: member c's capacity
    target,      \* target[k]: k's target in this membership epoch, NoOne until chosen
    draining,    \* draining[k]: the old owner k is draining from, NoOne if not draining (section 7)
    pcur,        \* the persisted cursor
    pholes,      \* the persisted ack holes
    spent,       \* budgets used by the model-checking environment
    \* History variables: computed by History from what each step changed, read by no action.
    ever,        \* ever[o]: o was delivered since the last restart
    nfail,       \* nfail[o]: failures (nacks, timeouts) of o since the last restart or release
    gotKey,      \* gotKey[k]: the consumers that received k since the last membership change or restart
    offline,     \* members that disconnected since they joined or last reconnected (KS-MEM-4)
    incarnation  \* restarts so far

core == <<published, keyOf, st, holder, attempts, fails, how, processed,
          members, connected, accepts, cap, target, draining, pcur, pholes>>
hist == <<ever, nfail, gotKey, offline, incarnation>>
vars == <<core, spent, hist>>

-----------------------------------------------------------------------------
(* Derived state. *)

Published == 0 .. (published - 1)
SameKeyBefore(o) == {p \in 0 .. (o - 1) : keyOf[p] = keyOf[o]}
Unresolved(o) == st[o] \in {"pending", "outstanding", "blocked"}
OfKey(k) == {o \in Offsets : keyOf[o] = k}
OutstandingOf(k) == {o \in OfKey(k) : st[o] = "outstanding"}
HoldersOf(k) == {holder[o] : o \in OutstandingOf(k)}
HeldBy(c) == {o \in Offsets : st[o] = "outstanding" /\ holder[o] = c}
AwaitingRedelivery(o) == st[o] = "pending" /\ attempts[o] > 0
Eligible(k) == {c \in members : k \in accepts[c]}
Poisoned(o) == fails[o] > MaxRedeliveries
Min(S) == CHOOSE x \in S : \A y \in S : x <= y

\* The cursor: the smallest unresolved offset, or the number of published messages (section 14).
Cursor == IF \E o \in Published : st[o] # "resolved"
          THEN Min({o \in Published : st[o] # "resolved"})
          ELSE published
HolesAbove(c) == {o \in Published : o >= c /\ st[o] = "resolved"}
PersistedHoles == IF PersistHoles THEN HolesAbove(Cursor) ELSE {}

\* The keys sharing k's slot, k included (KS-DRN-3).
SlotMates(k) == {j \in Keys : SlotOf[j] = SlotOf[k]}

\* The messages whose holders keep k draining: k's own, or with drain_granularity = "hash" those of
\* every key of its slot (KS-DRN-3).  The broken variant SlotDrainOneKey keeps the slot's drain on
\* the messages of one key of the slot only.
Watched(k) ==
    IF DrainGranularity = "key" THEN OfKey(k)
    ELSE IF Bug = "SlotDrainOneKey" THEN OfKey(CHOOSE j \in SlotMates(k) : TRUE)
    ELSE {o \in Offsets : keyOf[o] \in SlotMates(k)}

\* The draining state the dispatcher should track for k when its target is t.
DrainingFrom(k, t) == LET holders == {holder[o] : o \in {p \in Watched(k) : st[p] = "outstanding"}} IN
                      IF t # NoOne /\ holders \ {t} # {}
                      THEN CHOOSE d \in holders \ {t} : TRUE
                      ELSE NoOne

\* After consumer c gave up (acked, failed) a delivery, the drain of k from c clears when c holds none
\* of the messages it watches (Watched).
ClearedDrains(c) ==
    [k \in Keys |-> IF draining[k] = c /\ \A o \in Watched(k) : ~(st'[o] = "outstanding" /\ holder'[o] = c)
                    THEN NoOne ELSE draining[k]]

NewEpoch == /\ target' = [k \in Keys |-> NoOne]
            /\ draining' = [k \in Keys |-> NoOne]

-----------------------------------------------------------------------------
(* The rules that may forbid delivering offset o to consumer c, each named by its requirement:
   Deliver is enabled exactly when this set is empty.  Trace validation prints it to say why an
   implementation's delivery does not fit. *)
DeliverBlockers(o, c) ==
    LET k == keyOf[o] IN
    { r \in {"KS-RES-2", "KS-ASN-1", "KS-MEM-3", "KS-FLT-2", "KS-DRN-1", "KS-FLW-1", "KS-FLW-2",
             "KS-ORD-1", "KS-ORD-2", "KS-ORD-3", "KS-POI-3", "KS-RTY-6", "KS-DRN-3"} :
        \/ r = "KS-RES-2" /\ st[o] # "pending"                          \* req: KS-RES-2
        \/ r = "KS-ASN-1" /\ target[k] # c                              \* req: KS-ASN-1, KS-ASN-9
        \/ r = "KS-MEM-3" /\ c \notin connected                         \* req: KS-MEM-3
        \/ r = "KS-FLT-2" /\ (c \notin members \/ k \notin accepts[c])  \* req: KS-FLT-2
        \/ r = "KS-DRN-1" /\ Bug # "NoDraining" /\ draining[k] # NoOne  \* req: KS-DRN-1
        \/ r = "KS-FLW-1" /\ Cardinality(HeldBy(c)) >= cap[c]           \* req: KS-FLW-1
        \/ r = "KS-FLW-2" /\ attempts[o] = 0                            \* req: KS-FLW-2
                          /\ Cardinality({p \in 0 .. (o - 1) : Unresolved(p)}) >= Window
        \/ r = "KS-ORD-1" /\ attempts[o] = 0                            \* req: KS-ORD-1, KS-FLW-3
                          /\ \E p \in SameKeyBefore(o) : st[p] = "pending" /\ attempts[p] = 0
        \/ r = "KS-ORD-2" /\ Profile = "strict"                         \* req: KS-ORD-2
                          /\ \E p \in SameKeyBefore(o) : Unresolved(p)
        \/ r = "KS-ORD-3" /\ Bug # "ReplayOutOfOrder"                   \* req: KS-ORD-3
                          /\ \E p \in SameKeyBefore(o) : AwaitingRedelivery(p)
        \/ r = "KS-POI-3" /\ \E p \in OfKey(k) : st[p] = "blocked"     \* req: KS-POI-3
        \/ r = "KS-RTY-6" /\ Poisoned(o)                                \* req: KS-RTY-6
        \* Under hash granularity an earlier message of a slot-mate awaiting redelivery holds o (only an
        \* earlier one: two keys of a slot must not wait for each other, which SlotMatesWaitForEachOther does).
        \/ r = "KS-DRN-3" /\ DrainGranularity = "hash"                  \* req: KS-DRN-3
                          /\ \E p \in Offsets : /\ keyOf[p] \in SlotMates(k) \ {k}
                                               /\ AwaitingRedelivery(p)
                                               /\ (p < o \/ Bug = "SlotMatesWaitForEachOther")
    }

-----------------------------------------------------------------------------
(* Actions.  Each changes core variables only; the environment wrappers below handle spent. *)

Init ==
    /\ published = 0
    /\ keyOf = [o \in Offsets |-> NoKey]
    /\ st = [o \in Offsets |-> "unpublished"]
    /\ holder = [o \in Offsets |-> NoOne]
    /\ attempts = [o \in Offsets |-> 0]
    /\ fails = [o \in Offsets |-> 0]
    /\ how = [o \in Offsets |-> ""]
    /\ processed = [o \in Offsets |-> FALSE]
    /\ members = {}
    /\ connected = {}
    /\ accepts = [c \in Consumers |-> {}]
    /\ cap = [c \in Consumers |-> 0]
    /\ target = [k \in Keys |-> NoOne]
    /\ draining = [k \in Keys |-> NoOne]
    /\ pcur = 0
    /\ pholes = {}
    /\ spent = [fail |-> 0, member |-> 0, restart |-> 0]
    /\ ever = [o \in Offsets |-> FALSE]
    /\ nfail = [o \in Offsets |-> 0]
    /\ gotKey = [k \in Keys |-> {}]
    /\ offline = {}
    /\ incarnation = 0

\* A message with key k is appended to the log.
Publish(k) ==
    /\ published < MaxMsgs
    /\ keyOf' = [keyOf EXCEPT ![published] = k]
    /\ st' = [st EXCEPT ![published] = "pending"]
    /\ published' = published + 1
    /\ UNCHANGED <<holder, attempts, fails, how, processed, members, connected, accepts, cap,
                   target, draining, pcur, pholes>>

\* The selector picks k's target for this epoch among its eligible members (KS-FLT-5); the key
\* drains from its old owner if another consumer still holds its messages (section 7), or those of
\* a key of its slot under hash granularity.  A slot selector gives the keys of a slot one target.
Route(k, c) ==
    /\ target[k] = NoOne
    /\ c \in Eligible(k)
    /\ DrainGranularity = "hash" => \A j \in SlotMates(k) : target[j] \in {NoOne, c}  \* req: KS-DRN-3, KS-ASN-5
    /\ \E o \in OfKey(k) : st[o] = "pending"
    /\ target' = [target EXCEPT ![k] = c]
    /\ draining' = [draining EXCEPT ![k] = DrainingFrom(k, c)]
    /\ UNCHANGED <<published, keyOf, st, holder, attempts, fails, how, processed, members, connected,
                   accepts, cap, pcur, pholes>>

Deliver(o, c) ==
    /\ o \in Published
    /\ DeliverBlockers(o, c) = {}
    /\ st' = [st EXCEPT ![o] = "outstanding"]
    /\ holder' = [holder EXCEPT ![o] = c]
    /\ attempts' = [attempts EXCEPT ![o] = @ + 1]                      \* req: KS-RTY-5
    /\ UNCHANGED <<published, keyOf, fails, how, processed, members, connected, accepts, cap,
                   target, draining, pcur, pholes>>

\* An ack from the holder resolves the message (KS-ACK-1); acks from anyone else change nothing.
Ack(o, c) ==
    /\ st[o] = "outstanding" /\ holder[o] = c                          \* req: KS-ACK-1, KS-ACK-2
    /\ st' = [st EXCEPT ![o] = "resolved"]
    /\ how' = [how EXCEPT ![o] = "acked"]
    /\ processed' = [processed EXCEPT ![o] = TRUE]
    /\ holder' = [holder EXCEPT ![o] = NoOne]
    /\ draining' = ClearedDrains(c)
    /\ UNCHANGED <<published, keyOf, attempts, fails, members, connected, accepts, cap, target,
                   pcur, pholes>>

\* A nack from the holder, or an ack timeout: the delivery failed and the message waits for its
\* back-off (retrying is pending with attempts > 0 in this untimed model).
Fail(o, c) ==
    /\ st[o] = "outstanding" /\ holder[o] = c                          \* req: KS-RTY-1
    /\ st' = [st EXCEPT ![o] = "pending"]
    /\ holder' = [holder EXCEPT ![o] = NoOne]
    /\ fails' = [fails EXCEPT ![o] = @ + 1]
    /\ draining' = IF Bug = "DrainNeverClears" THEN draining ELSE ClearedDrains(c)
    /\ UNCHANGED <<published, keyOf, attempts, how, processed, members, connected, accepts, cap,
                   target, pcur, pholes>>

\* A result (ack or nack) reported late by a consumer whose delivery of o already ended (it timed
\* out, or the consumer left or was evicted, or it answered already): c is not o's holder now.  The
\* model keeps no ended deliveries, so the result names only the message, and it changes nothing:
\* the message keeps its state and its current delivery (KS-ACK-3, a stuttering step).
ZombieResult(o, c) ==
    /\ attempts[o] > 0 /\ holder[o] # c                                \* req: KS-ACK-3
    /\ UNCHANGED core

\* A message that failed too often gets the poison policy, without another delivery (KS-RTY-6).
Poison(o) ==
    /\ st[o] = "pending" /\ Poisoned(o)
    /\ IF PoisonPolicy = "block"
       THEN /\ st' = [st EXCEPT ![o] = "blocked"]                      \* req: KS-POI-3
            /\ UNCHANGED how
       ELSE /\ st' = [st EXCEPT ![o] = "resolved"]                     \* req: KS-POI-1, KS-POI-2
            /\ how' = [how EXCEPT ![o] = IF PoisonPolicy = "drop" THEN "dropped" ELSE "dead_lettered"]
    /\ UNCHANGED <<published, keyOf, holder, attempts, fails, processed, members, connected,
                   accepts, cap, target, draining, pcur, pholes>>

\* Operator release: the blocked message is pending again with a fresh budget (KS-POI-4).
Release(o) ==
    /\ st[o] = "blocked"
    /\ st' = [st EXCEPT ![o] = "pending"]
    /\ fails' = [fails EXCEPT ![o] = 0]                                \* req: KS-POI-4
    /\ UNCHANGED <<published, keyOf, holder, attempts, how, processed, members, connected,
                   accepts, cap, target, draining, pcur, pholes>>

\* Operator skip: the blocked message is resolved as dropped (KS-POI-5).
Skip(o) ==
    /\ st[o] = "blocked"
    /\ st' = [st EXCEPT ![o] = "resolved"]
    /\ how' = [how EXCEPT ![o] = "dropped"]                            \* req: KS-POI-5
    /\ UNCHANGED <<published, keyOf, holder, attempts, fails, processed, members, connected,
                   accepts, cap, target, draining, pcur, pholes>>

\* A message whose key no member accepts is resolved as filtered, but only while members exist.
Filter(o) ==
    /\ st[o] = "pending"
    /\ members # {}                                                    \* req: KS-FLT-4
    /\ Eligible(keyOf[o]) = {}                                         \* req: KS-FLT-3
    /\ st' = [st EXCEPT ![o] = "resolved"]
    /\ how' = [how EXCEPT ![o] = "filtered"]
    /\ UNCHANGED <<published, keyOf, holder, attempts, fails, processed, members, connected,
                   accepts, cap, target, draining, pcur, pholes>>

\* A consumer joins: a new member (a reused name is a new consumer, KS-GEN-3) and a new epoch.
Join(c, acc, capacity) ==
    /\ c \notin members
    /\ members' = members \cup {c}
    /\ connected' = connected \cup {c}
    /\ accepts' = [accepts EXCEPT ![c] = acc]
    /\ cap' = [cap EXCEPT ![c] = capacity]
    /\ NewEpoch
    /\ UNCHANGED <<published, keyOf, st, holder, attempts, fails, how, processed, pcur, pholes>>

\* A member leaves (remove_consumer) or is evicted: its deliveries end and their messages are
\* pending at once, without a failure (KS-MEM-1, KS-RTY-7).  A new epoch starts.
Leave(c) ==
    /\ c \in members
    /\ members' = members \ {c}
    /\ connected' = connected \ {c}
    /\ accepts' = [accepts EXCEPT ![c] = {}]
    /\ cap' = [cap EXCEPT ![c] = 0]
    /\ IF Bug = "LeaveCountsAsAcked"
       THEN \* Danube's eviction: the leaver's in-flight messages are counted as acked.
            /\ st' = [o \in Offsets |-> IF o \in HeldBy(c) THEN "resolved" ELSE st[o]]
            /\ how' = [o \in Offsets |-> IF o \in HeldBy(c) THEN "acked" ELSE how[o]]
       ELSE /\ st' = [o \in Offsets |-> IF o \in HeldBy(c) THEN "pending" ELSE st[o]]  \* req: KS-MEM-1
            /\ UNCHANGED how
    /\ holder' = [o \in Offsets |-> IF o \in HeldBy(c) THEN NoOne ELSE holder[o]]
    /\ NewEpoch
    /\ UNCHANGED <<published, keyOf, attempts, fails, processed, pcur, pholes>>  \* req: KS-RTY-7

\* A member loses its connection: it stays a member (same epoch) and receives nothing (KS-MEM-3).
Disconnect(c) ==
    /\ c \in connected
    /\ connected' = connected \ {c}
    /\ UNCHANGED <<published, keyOf, st, holder, attempts, fails, how, processed, members, accepts,
                   cap, target, draining, pcur, pholes>>

\* A disconnected member comes back: connected again with all it holds, and no longer evicted (KS-MEM-4).
Reconnect(c) ==
    /\ c \in members \ connected
    /\ connected' = {c} \cup connected
    /\ UNCHANGED <<published, keyOf, st, holder, attempts, fails, how, processed, members, accepts,
                   cap, target, draining, pcur, pholes>>

\* Eviction of a disconnected member has the effects of leaving (KS-MEM-2).
Evict(c) ==
    /\ c \in members \ connected
    /\ Leave(c)

\* The cursor (and, when enabled, the holes) is persisted (section 14).
Persist ==
    /\ <<pcur, pholes>> # <<Cursor, PersistedHoles>>
    /\ pcur' = Cursor                                                  \* req: KS-CUR-1, KS-RES-3
    /\ pholes' = PersistedHoles                                        \* req: KS-CUR-6
    /\ UNCHANGED <<published, keyOf, st, holder, attempts, fails, how, processed, members, connected,
                   accepts, cap, target, draining>>

\* A crash and restart: volatile state is lost, the persisted cursor and holes are loaded, and
\* every offset at or above the cursor that is not a persisted hole is dispatched again.
Restart ==
    /\ LET kept(o) == o < pcur \/ o \in pholes IN                      \* req: KS-CUR-3, KS-CUR-4
       /\ st' = [o \in Offsets |-> IF o \notin Published THEN "unpublished"
                                   ELSE IF kept(o) THEN "resolved" ELSE "pending"]
       /\ how' = [o \in Offsets |-> IF o \in Published /\ kept(o) THEN how[o] ELSE ""]
    /\ holder' = [o \in Offsets |-> NoOne]
    /\ attempts' = [o \in Offsets |-> 0]
    /\ fails' = [o \in Offsets |-> 0]
    /\ members' = {}
    /\ connected' = {}
    /\ accepts' = [c \in Consumers |-> {}]
    /\ cap' = [c \in Consumers |-> 0]
    /\ NewEpoch
    /\ UNCHANGED <<published, keyOf, processed, pcur, pholes>>

-----------------------------------------------------------------------------
(* The history: what a step did, read from the variables before and after it, whichever action took
   it.  A delivery is a message becoming outstanding; a failure is an outstanding message becoming
   pending while its holder stays a member (a holder that leaves returns it, KS-RTY-7); a release
   makes a blocked message pending; an epoch ends when membership changes or at a restart.  A member
   is offline from its disconnection until it leaves, or until a reconnect names it (`back`). *)
HistoryWith(restarted, back) ==
    LET delivered(o) == st[o] # "outstanding" /\ st'[o] = "outstanding"
        failed(o) == st[o] = "outstanding" /\ st'[o] = "pending" /\ holder[o] \in members'
        released(o) == st[o] = "blocked" /\ st'[o] = "pending"
        newEpoch == restarted \/ members' # members
    IN
    /\ ever' = [o \in Offsets |-> ~restarted /\ (ever[o] \/ delivered(o))]
    /\ nfail' = [o \in Offsets |-> IF restarted \/ released(o) THEN 0
                                   ELSE IF failed(o) THEN nfail[o] + 1 ELSE nfail[o]]
    /\ gotKey' = [k \in Keys |-> (IF newEpoch THEN {} ELSE gotKey[k])
                                 \cup {holder'[o] : o \in {p \in Offsets : delivered(p) /\ keyOf'[p] = k}}]
    /\ offline' = IF restarted THEN {}
                  ELSE ((offline \cup (connected \ connected')) \cap members') \ ((members' \ members) \cup back)
    /\ incarnation' = IF restarted THEN incarnation + 1 ELSE incarnation

History(restarted) == HistoryWith(restarted, {})

(* The model-checking environment: every action, with budgets that keep the state space finite. *)

Spend(kind) == spent' = [spent EXCEPT ![kind] = @ + 1]

PublishAny == \E k \in Keys : Publish(k) /\ UNCHANGED spent /\ History(FALSE)
RouteAny == \E k \in Keys, c \in Consumers : Route(k, c) /\ UNCHANGED spent /\ History(FALSE)
DeliverAny == \E o \in Offsets, c \in Consumers : Deliver(o, c) /\ UNCHANGED spent /\ History(FALSE)
AckAny == \E o \in Offsets : Ack(o, holder[o]) /\ UNCHANGED spent /\ History(FALSE)
FailAny == spent.fail < MaxFailures /\ \E o \in Offsets : Fail(o, holder[o]) /\ Spend("fail") /\ History(FALSE)
ZombieAny == \E o \in Offsets, c \in Consumers : ZombieResult(o, c) /\ UNCHANGED spent /\ History(FALSE)
PoisonAny == \E o \in Offsets : Poison(o) /\ UNCHANGED spent /\ History(FALSE)
ReleaseAny == \E o \in Offsets : Release(o) /\ UNCHANGED spent /\ History(FALSE)
SkipAny == \E o \in Offsets : Skip(o) /\ UNCHANGED spent /\ History(FALSE)
FilterAny == \E o \in Offsets : Filter(o) /\ UNCHANGED spent /\ History(FALSE)
\* Joining when nobody is connected is free: a subscription whose consumers all went away gets one back.
JoinAny == /\ spent.member < MaxMemberChanges \/ connected = {}
           /\ \E c \in Consumers, acc \in FilterChoices : Join(c, acc, Capacity)
           /\ IF connected = {} THEN UNCHANGED spent ELSE Spend("member")
           /\ History(FALSE)
LeaveAny == /\ spent.member < MaxMemberChanges
            /\ \E c \in members : (KeepConnected => connected \ {c} # {}) /\ Leave(c)
            /\ Spend("member")
            /\ History(FALSE)
DisconnectAny == /\ spent.member < MaxMemberChanges
                 /\ \E c \in connected : (KeepConnected => connected \ {c} # {}) /\ Disconnect(c)
                 /\ Spend("member")
                 /\ History(FALSE)
ReconnectAny == /\ spent.member < MaxMemberChanges
                /\ \E c \in members \ connected : Reconnect(c) /\ HistoryWith(FALSE, {c})
                /\ Spend("member")
EvictAny == \E c \in Consumers : Evict(c) /\ UNCHANGED spent /\ History(FALSE)
PersistAny == MaxRestarts > 0 /\ Persist /\ UNCHANGED spent /\ History(FALSE)
RestartAny == spent.restart < MaxRestarts /\ Restart /\ Spend("restart") /\ History(TRUE)

AllResolved == \A o \in Published : st[o] = "resolved"
\* Nothing left to do: a terminal state, not a deadlock.
Done == AllResolved /\ published = MaxMsgs /\ UNCHANGED vars

Next ==
    \/ PublishAny \/ RouteAny \/ DeliverAny \/ AckAny \/ FailAny \/ ZombieAny \/ PoisonAny \/ ReleaseAny
    \/ SkipAny \/ FilterAny \/ JoinAny \/ LeaveAny \/ DisconnectAny \/ ReconnectAny \/ EvictAny
    \/ PersistAny \/ RestartAny \/ Done

\* Quiescence (section 19): consumers keep acking, the dispatcher keeps dispatching, operators
\* release blocked keys, disconnected members are evicted, and a consumer comes back when none is
\* left.  One weak-fairness condition over all of these suffices: each budget is finite, so these
\* progress steps cannot go on for ever, and whatever stays enabled is eventually taken.
Progress ==
    \/ RouteAny \/ DeliverAny \/ AckAny \/ PoisonAny \/ ReleaseAny \/ SkipAny \/ FilterAny \/ EvictAny
    \/ (connected = {} /\ JoinAny) \/ PersistAny
Fairness == WF_vars(Progress)

Spec == Init /\ [][Next]_vars
LiveSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(* Properties, named after the requirement each checks.  They spell out their own sets rather than
   use the helpers the actions use, so that a wrong helper is caught, not shared. *)

EarlierOfKey(o) == {p \in Offsets : p < o /\ keyOf[p] = keyOf[o]}
HolderSet(k) == {holder[o] : o \in {p \in Offsets : keyOf[p] = k /\ st[p] = "outstanding"}}
HeldAt(c) == {o \in Offsets : st[o] = "outstanding" /\ holder[o] = c}
Takers(k) == {c \in members : k \in accepts[c]}
Open(o) == st[o] \in {"pending", "outstanding", "blocked"}

TypeOK ==
    /\ published \in 0 .. MaxMsgs
    /\ keyOf \in [Offsets -> Keys \cup {NoKey}]
    /\ st \in [Offsets -> MsgStates]
    /\ holder \in [Offsets -> Consumers \cup {NoOne}]
    /\ how \in [Offsets -> Resolutions \cup {""}]
    /\ members \subseteq Consumers /\ connected \subseteq members
    /\ target \in [Keys -> Consumers \cup {NoOne}]
    /\ draining \in [Keys -> Consumers \cup {NoOne}]
    /\ ever \in [Offsets -> BOOLEAN] /\ nfail \in [Offsets -> Nat]
    /\ gotKey \in [Keys -> SUBSET Consumers] /\ offline \subseteq Consumers

\* A step delivers o when o becomes outstanding.
Delivered(o) == st[o] # "outstanding" /\ st'[o] = "outstanding"
\* A member leaves (or is evicted) in a step that is not a restart.
Left(c) == c \in members /\ c \notin members' /\ incarnation' = incarnation
Joined(c) == c \notin members /\ c \in members'
NewlyResolved(o, r) == how[o] = "" /\ how'[o] = r

\* Over history: for every message delivered since the last restart, every earlier message of its
\* key was delivered since the last restart too, or is resolved.
KS_ORD_1_FirstDeliveryOrder ==
    \A o \in Offsets : ever[o] => \A p \in EarlierOfKey(o) : ever[p] \/ st[p] = "resolved"

\* Strict: while a message is outstanding, every earlier message of its key is resolved (so at most
\* one message of a key is outstanding).
KS_ORD_2_StrictDeliveryOrder ==
    Profile = "strict" => \A o \in Offsets : st[o] = "outstanding" => \A p \in EarlierOfKey(o) : st[p] = "resolved"

\* Processing order: a message is acked only when every earlier message of its key is resolved.  Holds
\* in the strict profile;
\* the owner profile gives it up for prefetch (KS-ORD-4), which the OwnerPrefetch config shows.
KS_ORD_2_ProcessingOrder ==
    [][\A o \in Offsets : NewlyResolved(o, "acked") => \A p \in EarlierOfKey(o) : st[p] = "resolved"]_vars

\* Over history: no message is delivered while an earlier message of its key is pending after being
\* delivered since the last restart (awaiting redelivery).
KS_ORD_3_RedeliveryFirst ==
    [][\A o \in Offsets : Delivered(o) => \A p \in EarlierOfKey(o) : ~(st[p] = "pending" /\ ever[p])]_vars

\* At most one consumer holds outstanding messages of a key.
KS_DRN_1_OneHolderPerKey == \A k \in Keys : Cardinality(HolderSet(k)) <= 1

\* The tracked draining state is the one section 7 defines: DrainingFrom(k, target[k]), a holder of k
\* (under hash granularity, of a key of k's slot) other than its target, or NoOne.
KS_DRN_1_DrainingConsistent == \A k \in Keys : draining[k] = DrainingFrom(k, target[k])

\* Over history: since the last membership change (or restart) every delivery of a key, first or
\* again, went to one consumer.
KS_ASN_1_OneTargetPerEpoch == \A k \in Keys : Cardinality(gotKey[k]) <= 1

\* Over history: under hash granularity, since the last membership change (or restart) every delivery
\* of the keys of one slot, first or again, went to one consumer (a slot selector gives a slot one
\* target, which slot draining relies on).
KS_DRN_3_OneTargetPerSlot ==
    DrainGranularity = "hash" =>
        \A j, k \in Keys : SlotOf[j] = SlotOf[k] => Cardinality(gotKey[j] \cup gotKey[k]) <= 1

\* A consumer that joins holds no outstanding message after the join.
KS_GEN_3_RejoinHoldsNothing ==
    [][\A c \in Consumers : Joined(c) => \A o \in Offsets : ~(st'[o] = "outstanding" /\ holder'[o] = c)]_vars

\* Every outstanding message is held by a member whose filter accepts its key.
KS_FLT_2_OnlyAcceptingConsumers ==
    \A o \in Offsets : st[o] = "outstanding" => holder[o] \in members /\ keyOf[o] \in accepts[holder[o]]

\* A message is filtered only in a step that starts with no member accepting its key.
KS_FLT_3_FilterOnlyUnwanted ==
    [][\A o \in Offsets : NewlyResolved(o, "filtered") => Takers(keyOf[o]) = {}]_vars

\* No message is filtered by a step that ends with no members.
KS_FLT_4_NoFilterWithoutMembers ==
    [][\A o \in Offsets : NewlyResolved(o, "filtered") => members' # {}]_vars

\* No member holds more outstanding messages than its capacity.
KS_FLW_1_CapacityNeverExceeded == \A c \in members : Cardinality(HeldAt(c)) <= cap[c]

\* Over history: an open (pending, outstanding or blocked) message delivered since the last restart
\* has fewer than Window open messages before it (their number only falls until a restart).
KS_FLW_2_WindowBound ==
    \A o \in Offsets : ever[o] /\ Open(o) => Cardinality({p \in Offsets : p < o /\ Open(p)}) < Window

\* When a member leaves or is evicted (not at a restart), every message it held is pending after
\* the step.
KS_MEM_1_LeavingReturnsMessages ==
    [][\A c \in Consumers : Left(c) => \A o \in HeldAt(c) : st'[o] = "pending"]_vars

\* Over history: nothing is delivered to a member that disconnected since it last joined.
KS_MEM_3_OnlyConnectedReceive ==
    [][\A o \in Offsets : Delivered(o) => holder'[o] \notin offline]_vars

\* Whenever a message's failure count grows, it was outstanding and becomes pending, with no holder
\* and no resolution.
KS_RTY_1_FailureEndsDelivery ==
    [][\A o \in Offsets : fails'[o] > fails[o] =>
          st[o] = "outstanding" /\ st'[o] = "pending" /\ holder'[o] = NoOne /\ how'[o] = ""]_vars

\* Over history: a message is delivered only if it failed at most MaxRedeliveries times since the last
\* restart or release.
KS_RTY_6_PoisonedNotRedelivered ==
    [][\A o \in Offsets : Delivered(o) => nfail[o] <= MaxRedeliveries]_vars

\* When a member leaves or is evicted (not at a restart), the failure counts of the messages it held
\* stay unchanged.
KS_RTY_7_ReturnedWithoutPenalty ==
    [][\A c \in Consumers : Left(c) => \A o \in HeldAt(c) : fails'[o] = fails[o]]_vars

\* A message is dropped only from pending under the drop policy after more than MaxRedeliveries
\* failures (over history, since the last restart or release), or from blocked (an operator skip).
KS_POI_1_DropOnlyPoisonOrSkip ==
    [][\A o \in Offsets : NewlyResolved(o, "dropped") =>
          (st[o] = "pending" /\ nfail[o] > MaxRedeliveries /\ PoisonPolicy = "drop") \/ st[o] = "blocked"]_vars

\* A message is dead-lettered only from pending under the dead-letter policy after more than
\* MaxRedeliveries failures (over history, since the last restart or release).
KS_POI_2_DeadLetterOnlyPoison ==
    [][\A o \in Offsets : NewlyResolved(o, "dead_lettered") =>
          st[o] = "pending" /\ nfail[o] > MaxRedeliveries /\ PoisonPolicy = "dead-letter"]_vars

\* No message is delivered in a step before or after which a message of its key is blocked.
KS_POI_3_BlockedKeyWaits ==
    [][\A o \in Offsets : Delivered(o) => \A p \in Offsets : keyOf[p] = keyOf[o] => st[p] # "blocked" /\ st'[p] # "blocked"]_vars

\* When a blocked message becomes pending (a release, not a restart), its failure count is 0 and its
\* attempt count unchanged.
KS_POI_4_ReleaseFreshBudget ==
    [][\A o \in Offsets : st[o] = "blocked" /\ st'[o] = "pending" /\ incarnation' = incarnation =>
          fails'[o] = 0 /\ attempts'[o] = attempts[o]]_vars

\* A blocked message that becomes resolved is resolved as dropped (the operator's skip).
KS_POI_5_SkipDrops ==
    [][\A o \in Offsets : st[o] = "blocked" /\ st'[o] = "resolved" => how'[o] = "dropped"]_vars

\* A message is resolved as acked only from outstanding.
KS_ACK_2_OnlyOutstandingAcked ==
    [][\A o \in Offsets : NewlyResolved(o, "acked") => st[o] = "outstanding"]_vars

\* A published message is resolved exactly when it has a resolution (how is not "").
KS_RES_1_ResolutionsExplicit == \A o \in Published : (st[o] = "resolved") <=> (how[o] # "")

\* A resolution never changes into another; it can only disappear (a restart forgets an unpersisted one).
KS_RES_1_ResolvedOnce == [][\A o \in Offsets : how[o] # "" => how'[o] \in {how[o], ""}]_vars

\* Only a pending message is delivered.
KS_RES_2_NoDeliveryWithoutReason ==
    [][\A o \in Offsets : Delivered(o) => st[o] = "pending"]_vars

\* Every message resolved as acked was acked by its holder (processed is set by Ack only).
KS_ACK_1_AckedMeansProcessed == \A o \in Published : how[o] = "acked" => processed[o]

\* Every offset below the persisted cursor, and every persisted hole, is resolved.
KS_CUR_1_PersistedCursorSafe ==
    /\ \A o \in 0 .. (pcur - 1) : st[o] = "resolved"
    /\ \A o \in pholes : st[o] = "resolved"

\* The persisted cursor never decreases.
KS_CUR_2_PersistedCursorMonotone == [][pcur' >= pcur]_vars

\* No offset below the persisted cursor, and no persisted hole, is delivered.
KS_CUR_4_NoResurrection ==
    [][\A o \in Offsets : Delivered(o) => o >= pcur /\ o \notin pholes]_vars

\* Liveness (section 19): eventually every published message stays resolved, and one resolved as
\* acked was acked by its holder (the other resolutions' rules are KS_POI_1, KS_POI_2, KS_FLT_3
\* and KS_FLT_4, checked in the safety configurations).
KS_LIV_1_EverythingResolved ==
    <>[](\A o \in Published : st[o] = "resolved" /\ (how[o] = "acked" => processed[o]))
\* Liveness: eventually no key drains for good (membership changes are finite, so "every drain
\* clears" is "eventually no key drains").
KS_DRN_2_DrainingClears == <>[](\A k \in Keys : draining[k] = NoOne)
==============================================================================
