------------------------------ MODULE BucketHandoff ------------------------------
(***************************************************************************)
(* The buckets selector of spec/key-shared.md section 17 (PIP-486): a      *)
(* key's hash H routes each entry to the active segment whose range holds  *)
(* H >> 16, and within it to bucket floor(hashB * N / 65536).  Buckets are *)
(* assigned to members by position (KS-BKT-3); a bucket whose target       *)
(* changes is withheld until its prior owner holds none of its entries     *)
(* (KS-BKT-4).  One layout change seals segment 0 and creates either a     *)
(* same-range successor with a new N (rollover) or two children over its   *)
(* halves (split); a successor is consumed only once its predecessor has   *)
(* no unresolved entry in its range (KS-BKT-5).  Owner profile: several    *)
(* entries of a key may be outstanding at its bucket's owner.              *)
(*                                                                         *)
(* Deliberately broken variants are selected by the constant Bug.          *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    Consumers,        \* member names: natural numbers, so that "sorted by name" is numeric order
    Keys,             \* routing keys
    HashHi,           \* HashHi[k]: H >> 16 of key k (its place on the segment ring)
    HashLo,           \* HashLo[k]: H & 0xFFFF of key k (its hashB)
    InitialN,         \* bucket count of segment 0
    RolloverN,        \* bucket count of a rollover successor
    NMax,             \* the per-segment maximum N_max
    Layouts,          \* the layout changes the environment may make: a subset of {"rollover", "split"}
    MaxMsgs,          \* entries published in one behaviour
    MaxFailures,      \* nacks in one behaviour
    MaxMemberChanges, \* joins and leaves in one behaviour
    InitialMembers,   \* the members at the start, their buckets already handed to them
    NoOne,            \* a model value: no consumer
    Bug               \* "none", or the name of a deliberately broken variant

Bugs == {"none", "NoWithhold", "SuccessorFirst"}

ASSUME /\ Consumers \subseteq Nat /\ InitialMembers \subseteq Consumers /\ Layouts \subseteq {"rollover", "split"}
       /\ InitialN \in 1 .. NMax /\ RolloverN \in 1 .. NMax /\ Bug \in Bugs
       /\ \A k \in Keys : HashHi[k] \in 0 .. 65535 /\ HashLo[k] \in 0 .. 65535

Offsets == 0 .. (MaxMsgs - 1)
Segments == 0 .. 2          \* segment 0, and the successors 1 (rollover, or lower child) and 2 (upper child)
Buckets == 0 .. (NMax - 1)
NotYet == -1                \* segOf/bucketOf of an unpublished offset

VARIABLES
    published,   \* entries 0 .. published-1 exist
    keyOf,       \* keyOf[o]: the entry's key
    segOf,       \* segOf[o]: the segment it was routed to
    bucketOf,    \* bucketOf[o]: its bucket in that segment
    st,          \* st[o]: "unpublished", "pending", "outstanding" or "resolved"
    holder,      \* holder[o]: the consumer holding its outstanding delivery, else NoOne
    delivered,   \* delivered[o]: it has been delivered at least once
    members,     \* current members
    layout,      \* "none", "rollover" or "split": the layout change made so far
    segN,        \* segN[s]: bucket count of segment s, 0 while it does not exist
    assigned,    \* assigned[s][b]: the consumer bucket b of segment s was handed to, else NoOne
    spent        \* budgets used by the environment

vars == <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, layout, segN, assigned, spent>>

-----------------------------------------------------------------------------
(* Layout. *)

Exists(s) == segN[s] > 0
Sealed(s) == s = 0 /\ layout # "none"
Active(s) == Exists(s) /\ ~Sealed(s)
RangeLo(s) == IF layout = "split" /\ s = 2 THEN 32768 ELSE 0
RangeHi(s) == IF layout = "split" /\ s = 1 THEN 32767 ELSE 65535
InRange(s, hi) == RangeLo(s) <= hi /\ hi <= RangeHi(s)
Predecessor(s) == IF s > 0 THEN 0 ELSE NoOne

\* KS-BKT-1: the active segment holding H >> 16, and the bucket floor(hashB * N / 65536).
SegmentFor(k) == CHOOSE s \in Segments : Active(s) /\ InRange(s, HashHi[k])
BucketFor(k, s) == (HashLo[k] * segN[s]) \div 65536

(* Assignment. *)

Rank(c) == Cardinality({d \in members : d < c})
OwnsBucket(c, n, b) == LET j == Rank(c) k == Cardinality(members)
                       IN (j * n) \div k <= b /\ b < ((j + 1) * n) \div k
\* KS-BKT-3: member j of k (sorted by name) owns buckets floor(j*N/k) .. floor((j+1)*N/k) - 1.
TargetAmong(n, b) ==
    IF ~\E c \in members : OwnsBucket(c, n, b)
    THEN NoOne
    ELSE CHOOSE c \in members : OwnsBucket(c, n, b)
Target(s, b) == TargetAmong(segN[s], b)
OfBucket(s, b) == {o \in Offsets : segOf[o] = s /\ bucketOf[o] = b}
OutstandingIn(s, b) == {o \in OfBucket(s, b) : st[o] = "outstanding"}
HoldersIn(s, b) == {holder[o] : o \in OutstandingIn(s, b)}
\* A moving bucket is withheld while its prior owner holds entries of it.
Withheld(s, b) == Exists(s) /\ b < segN[s] /\ assigned[s][b] # Target(s, b) /\ assigned[s][b] \in HoldersIn(s, b)

Unresolved(o) == st[o] \in {"pending", "outstanding"}
SameKeyBefore(o) == {p \in 0 .. (o - 1) : keyOf[p] = keyOf[o]}
\* The predecessor of s still has unresolved entries in s's range (KS-BKT-5).
PredecessorBusy(s) ==
    Predecessor(s) # NoOne /\ \E p \in Offsets : segOf[p] = Predecessor(s) /\ Unresolved(p) /\ InRange(s, HashHi[keyOf[p]])

-----------------------------------------------------------------------------
Init ==
    /\ published = 0
    /\ keyOf = [o \in Offsets |-> CHOOSE k \in Keys : TRUE]
    /\ segOf = [o \in Offsets |-> NotYet]
    /\ bucketOf = [o \in Offsets |-> NotYet]
    /\ st = [o \in Offsets |-> "unpublished"]
    /\ holder = [o \in Offsets |-> NoOne]
    /\ delivered = [o \in Offsets |-> FALSE]
    /\ members = InitialMembers
    /\ layout = "none"
    /\ segN = [s \in Segments |-> IF s = 0 THEN InitialN ELSE 0]
    /\ assigned = [s \in Segments |-> [b \in Buckets |-> IF s = 0 /\ b < InitialN THEN Target(0, b) ELSE NoOne]]
    /\ spent = [fail |-> 0, member |-> 0]

Publish(k) ==
    /\ published < MaxMsgs
    /\ LET s == SegmentFor(k) IN
       /\ keyOf' = [keyOf EXCEPT ![published] = k]
       /\ segOf' = [segOf EXCEPT ![published] = s]                    \* req: KS-BKT-1
       /\ bucketOf' = [bucketOf EXCEPT ![published] = BucketFor(k, s)]
    /\ st' = [st EXCEPT ![published] = "pending"]
    /\ published' = published + 1
    /\ UNCHANGED <<holder, delivered, members, layout, segN, assigned, spent>>

\* A bucket is handed to its target once the prior owner holds none of its entries (bucket_assigned).
Handoff(s, b) ==
    /\ Exists(s) /\ b < segN[s]
    /\ assigned[s][b] # Target(s, b)
    /\ Bug = "NoWithhold" \/ assigned[s][b] \notin HoldersIn(s, b)    \* req: KS-BKT-4
    /\ assigned' = [assigned EXCEPT ![s][b] = Target(s, b)]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, layout, segN, spent>>

Deliver(o) ==
    LET s == segOf[o] b == bucketOf[o] c == assigned[s][b] IN
    /\ st[o] = "pending"                                              \* req: KS-RES-2
    /\ c # NoOne /\ c = Target(s, b)                                  \* req: KS-BKT-3, KS-BKT-4
    /\ Bug = "SuccessorFirst" \/ ~PredecessorBusy(s)                  \* req: KS-BKT-5
    /\ ~delivered[o] => \A p \in SameKeyBefore(o) : ~(st[p] = "pending" /\ ~delivered[p])  \* req: KS-ORD-1
    /\ \A p \in SameKeyBefore(o) : ~(st[p] = "pending" /\ delivered[p])                    \* req: KS-ORD-3
    /\ st' = [st EXCEPT ![o] = "outstanding"]
    /\ holder' = [holder EXCEPT ![o] = c]
    /\ delivered' = [delivered EXCEPT ![o] = TRUE]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, members, layout, segN, assigned, spent>>

Ack(o) ==
    /\ st[o] = "outstanding"
    /\ st' = [st EXCEPT ![o] = "resolved"]
    /\ holder' = [holder EXCEPT ![o] = NoOne]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, delivered, members, layout, segN, assigned, spent>>

Nack(o) ==
    /\ spent.fail < MaxFailures
    /\ st[o] = "outstanding"
    /\ st' = [st EXCEPT ![o] = "pending"]
    /\ holder' = [holder EXCEPT ![o] = NoOne]
    /\ spent' = [spent EXCEPT !.fail = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, delivered, members, layout, segN, assigned>>

Join(c) ==
    /\ spent.member < MaxMemberChanges \/ members = {}
    /\ c \notin members
    /\ members' = members \cup {c}
    /\ spent' = IF members = {} THEN spent ELSE [spent EXCEPT !.member = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, layout, segN, assigned>>

\* A member leaves: its deliveries end and their entries are pending again (KS-MEM-1).
Leave(c) ==
    /\ spent.member < MaxMemberChanges
    /\ c \in members
    /\ members' = members \ {c}
    /\ st' = [o \in Offsets |-> IF st[o] = "outstanding" /\ holder[o] = c THEN "pending" ELSE st[o]]
    /\ holder' = [o \in Offsets |-> IF holder[o] = c THEN NoOne ELSE holder[o]]
    /\ spent' = [spent EXCEPT !.member = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, delivered, layout, segN, assigned>>

\* Rollover: seal segment 0, create segment 1 over the same range with a new N (KS-BKT-2).
Rollover ==
    /\ "rollover" \in Layouts /\ layout = "none"
    /\ layout' = "rollover"
    /\ segN' = [segN EXCEPT ![1] = RolloverN]
    /\ assigned' = [assigned EXCEPT ![1] = [b \in Buckets |-> IF b < RolloverN THEN TargetAmong(RolloverN, b) ELSE NoOne]]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, spent>>

\* Split: seal segment 0, create two children over its halves with max(1, N / 2) buckets each.
Split ==
    /\ "split" \in Layouts /\ layout = "none"
    /\ LET n == IF InitialN \div 2 >= 1 THEN InitialN \div 2 ELSE 1 IN
       /\ layout' = "split"
       /\ segN' = [segN EXCEPT ![1] = n, ![2] = n]
       /\ assigned' = [s \in Segments |-> IF s = 0 THEN assigned[0]
                                           ELSE [b \in Buckets |-> IF b < n THEN TargetAmong(n, b) ELSE NoOne]]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, spent>>

PublishAny == \E k \in Keys : Publish(k)
HandoffAny == \E s \in Segments, b \in Buckets : Handoff(s, b)
DeliverAny == \E o \in Offsets : Deliver(o)
AckAny == \E o \in Offsets : Ack(o)
NackAny == \E o \in Offsets : Nack(o)
JoinAny == \E c \in Consumers : Join(c)
LeaveAny == \E c \in Consumers : Leave(c)

AllResolved == \A o \in Offsets : st[o] # "pending" /\ st[o] # "outstanding"
Done == AllResolved /\ published = MaxMsgs /\ UNCHANGED vars

Next == PublishAny \/ HandoffAny \/ DeliverAny \/ AckAny \/ NackAny \/ JoinAny \/ LeaveAny
        \/ Rollover \/ Split \/ Done

\* The prior owner keeps acking, the dispatcher hands over and delivers, and a consumer comes back
\* when none is left.  One weak-fairness condition over all of these suffices: each budget is
\* finite, so these progress steps cannot go on for ever, and whatever stays enabled is taken.
Progress == HandoffAny \/ DeliverAny \/ AckAny \/ (members = {} /\ JoinAny)
Fairness == WF_vars(Progress)

Spec == Init /\ [][Next]_vars
LiveSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(* Properties, named after the requirement each checks. *)

TypeOK ==
    /\ st \in [Offsets -> {"unpublished", "pending", "outstanding", "resolved"}]
    /\ members \subseteq Consumers
    /\ segN \in [Segments -> 0 .. NMax]

Delivered(o) == st[o] # "outstanding" /\ st'[o] = "outstanding"

KS_BKT_2_BucketCountFixed ==
    /\ \A s \in Segments : Exists(s) => segN[s] \in 1 .. NMax
    /\ [][\A s \in Segments : Exists(s) => segN'[s] = segN[s]]_vars

KS_BKT_3_DeliverToBucketOwner ==
    [][\A o \in Offsets : Delivered(o) => holder'[o] = Target(segOf[o], bucketOf[o])]_vars

KS_BKT_4_OneHolderPerBucket ==
    \A s \in Segments, b \in Buckets : Cardinality(HoldersIn(s, b)) <= 1

\* A bucket is handed over only when its prior owner holds none of its entries.
KS_BKT_4_HandoffAfterDrain ==
    [][\A s \in Segments, b \in Buckets :
          assigned'[s][b] # assigned[s][b] /\ assigned[s][b] # NoOne => assigned[s][b] \notin HoldersIn(s, b)]_vars

KS_BKT_5_SuccessorWaits ==
    [][\A o \in Offsets : Delivered(o) => ~PredecessorBusy(segOf[o])]_vars

\* Per-key order across the predecessor and its successors.
KS_ORD_1_FirstDeliveryOrder ==
    [][\A o \in Offsets : Delivered(o) /\ ~delivered[o] =>
          \A p \in SameKeyBefore(o) : st[p] = "resolved" \/ delivered[p]]_vars

KS_DRN_1_OneHolderPerKey ==
    \A k \in Keys : Cardinality({holder[o] : o \in {p \in Offsets : keyOf[p] = k /\ st[p] = "outstanding"}}) <= 1

\* Liveness: every handoff completes when the prior owner acks; everything is resolved.
\* (Moves are finite, so "every withheld bucket is eventually handed over" is "eventually none is".)
KS_BKT_4_HandoffCompletes == <>[](\A s \in Segments, b \in Buckets : ~Withheld(s, b))
KS_LIV_1_EverythingResolved == <>[]AllResolved
==============================================================================
