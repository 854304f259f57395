------------------------------ MODULE BucketHandoff ------------------------------
(***************************************************************************)
(* The buckets selector of spec/key-shared.md section 17 (PIP-486): a      *)
(* key's hash H routes each entry to the active segment whose range holds  *)
(* H >> 16, and within it to bucket floor(hashB * N / 65536).  Buckets are *)
(* assigned to members by position (KS-BKT-3); a bucket whose target       *)
(* changes is withheld until its prior owner holds none of its entries     *)
(* (KS-BKT-4).  Layout changes may chain: a rollover seals an active      *)
(* segment for a same-range successor with a new N, a split for two        *)
(* children over its halves, a merge seals two adjacent segments for one   *)
(* successor over both; a successor is consumed only once no ancestor      *)
(* (its predecessors, theirs, ...) has an unresolved entry in its range    *)
(* (KS-BKT-5, applied transitively as the reference does).  Owner          *)
(* profile: several entries of a key may be outstanding at its bucket's    *)
(* owner.  With controller_moves (bucket_assignment = "controller") the    *)
(* controller may also move a bucket to another staying member at any      *)
(* time, announcing the move; the move is a handoff like any other and     *)
(* waits for the prior owner's entries of the bucket (KS-BKT-3, KS-BKT-4). *)
(* With checkpoint_resume (MaxRestarts > 0) each bucket records a         *)
(* checkpoint, an offset below which every entry of the bucket is         *)
(* resolved (KS-BKT-6), and a restart resumes each bucket from its own    *)
(* checkpoint: what it covers stays resolved, everything else of the      *)
(* bucket is dispatched again (KS-BKT-9).                                  *)
(*                                                                         *)
(* The properties are stated over the history variable seen (set by a      *)
(* delivery, read by no guard) and over the holders of outstanding         *)
(* entries, not over the guards.  Deliberately broken variants are         *)
(* selected by the constant Bug.                                           *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    Consumers,        \* member names: natural numbers, so that "sorted by name" is numeric order
    Keys,             \* routing keys
    HashHi,           \* HashHi[k]: H >> 16 of key k (its place on the segment ring)
    HashLo,           \* HashLo[k]: H & 0xFFFF of key k (its hashB)
    InitialN,         \* bucket count of segment 0
    RolloverN,        \* bucket count of a rollover successor (InitialN again when the sealed one had RolloverN)
    NMax,             \* the per-segment maximum N_max
    Layouts,          \* the layout changes the environment may make: a subset of {"rollover", "split", "merge"}
    MaxLayoutChanges, \* layout changes in one behaviour (a chain when 2)
    MaxMsgs,          \* entries published in one behaviour
    MaxFailures,      \* nacks in one behaviour
    MaxMemberChanges, \* joins and leaves in one behaviour
    InitialMembers,   \* the members at the start, their buckets already handed to them
    MaxControllerMoves, \* controller_moves: bucket moves the controller may make in one behaviour (0: option off)
    MaxRestarts,      \* checkpoint_resume: restarts in one behaviour (0: no restart, and no checkpoint is kept)
    NoOne,            \* a model value: no consumer
    Bug               \* "none", or the name of a deliberately broken variant

Bugs == {"none", "NoWithhold", "SuccessorFirst", "MergeWaitsForOne", "MoveAtOnce"}

Segments == 0 .. 3          \* segment 0 and up to three successors
NoSeg == -1                 \* pred of segment 0; segOf/bucketOf of an unpublished offset

ASSUME /\ Consumers \subseteq Nat /\ InitialMembers \subseteq Consumers
       /\ Layouts \subseteq {"rollover", "split", "merge"}
       /\ InitialN \in 1 .. NMax /\ RolloverN \in 1 .. NMax /\ Bug \in Bugs
       /\ MaxLayoutChanges \in 0 .. 2 /\ MaxControllerMoves \in Nat /\ MaxRestarts \in Nat
       /\ \A k \in Keys : HashHi[k] \in 0 .. 65535 /\ HashLo[k] \in 0 .. 65535

Offsets == 0 .. (MaxMsgs - 1)
Buckets == 0 .. (NMax - 1)

VARIABLES
    published,   \* entries 0 .. published-1 exist
    keyOf,       \* keyOf[o]: the entry's key
    segOf,       \* segOf[o]: the segment it was routed to
    bucketOf,    \* bucketOf[o]: its bucket in that segment
    st,          \* st[o]: "unpublished", "pending", "outstanding" or "resolved"
    holder,      \* holder[o]: the consumer holding its outstanding delivery, else NoOne
    delivered,   \* delivered[o]: the dispatcher's record that o was delivered at least once
    members,     \* current members
    nseg,        \* segments 0 .. nseg-1 exist
    segN,        \* segN[s]: bucket count of segment s, 0 while it does not exist
    pred,        \* pred[s]: the segment s succeeded (the lower one of a merge), NoSeg for segment 0
    pred2,       \* pred2[s]: the upper segment a merged s succeeded, else NoSeg
    lo, hi,      \* the range [lo[s], hi[s]] of H >> 16 that segment s covers
    sealed,      \* the sealed segments
    assigned,    \* assigned[s][b]: the consumer bucket b of segment s was handed to, else NoOne
    moved,       \* moved[s][b]: the member the controller moved bucket b of segment s to, NoOne if it did not
    announced,   \* history: announced[s][b], the controller's last announced move of b (read by no guard)
    seen,        \* history: seen[o] once o was delivered since the last restart (set by Deliver, read by no guard)
    ckpt,        \* ckpt[s][b]: the checkpoint of bucket b of segment s, durable (checkpoint_resume)
    spent        \* budgets used by the environment

vars == <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, nseg, segN, pred, pred2, lo, hi,
          sealed, assigned, moved, announced, seen, ckpt, spent>>

-----------------------------------------------------------------------------
(* Layout. *)

Exists(s) == s < nseg
Active(s) == Exists(s) /\ s \notin sealed
InRange(s, h) == lo[s] <= h /\ h <= hi[s]

\* Every segment s descends from: its predecessors, theirs, and so on (the broken variant
\* MergeWaitsForOne forgets the upper predecessor of a merge).
Preds(s) == {p \in {pred[s], IF Bug = "MergeWaitsForOne" THEN NoSeg ELSE pred2[s]} : p # NoSeg}
RECURSIVE Ancestors(_)
Ancestors(s) == UNION {{p} \cup Ancestors(p) : p \in Preds(s)}

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
\* The bucket's target: the member the controller moved it to, else the member owning it by position.
Target(s, b) == IF moved[s][b] # NoOne THEN moved[s][b] ELSE TargetAmong(segN[s], b)
Handed(n) == [b \in Buckets |-> IF b < n THEN TargetAmong(n, b) ELSE NoOne]
OfBucket(s, b) == {o \in Offsets : segOf[o] = s /\ bucketOf[o] = b}
OutstandingIn(s, b) == {o \in OfBucket(s, b) : st[o] = "outstanding"}
HoldersIn(s, b) == {holder[o] : o \in OutstandingIn(s, b)}
\* A moving bucket is withheld while its prior owner holds entries of it.
Withheld(s, b) == Exists(s) /\ b < segN[s] /\ assigned[s][b] # Target(s, b) /\ assigned[s][b] \in HoldersIn(s, b)

Unresolved(o) == st[o] \in {"pending", "outstanding"}
SameKeyBefore(o) == {p \in 0 .. (o - 1) : keyOf[p] = keyOf[o]}
\* An ancestor of s still has unresolved entries in s's range (KS-BKT-5).
PredecessorBusy(s) ==
    \E p \in Offsets : segOf[p] \in Ancestors(s) /\ Unresolved(p) /\ InRange(s, HashHi[keyOf[p]])

-----------------------------------------------------------------------------
Init ==
    /\ published = 0
    /\ keyOf = [o \in Offsets |-> CHOOSE k \in Keys : TRUE]
    /\ segOf = [o \in Offsets |-> NoSeg]
    /\ bucketOf = [o \in Offsets |-> NoSeg]
    /\ st = [o \in Offsets |-> "unpublished"]
    /\ holder = [o \in Offsets |-> NoOne]
    /\ delivered = [o \in Offsets |-> FALSE]
    /\ members = InitialMembers
    /\ nseg = 1
    /\ segN = [s \in Segments |-> IF s = 0 THEN InitialN ELSE 0]
    /\ pred = [s \in Segments |-> NoSeg]
    /\ pred2 = [s \in Segments |-> NoSeg]
    /\ lo = [s \in Segments |-> 0]
    /\ hi = [s \in Segments |-> 65535]
    /\ sealed = {}
    /\ assigned = [s \in Segments |-> IF s = 0 THEN Handed(InitialN) ELSE [b \in Buckets |-> NoOne]]
    /\ moved = [s \in Segments |-> [b \in Buckets |-> NoOne]]
    /\ announced = [s \in Segments |-> [b \in Buckets |-> NoOne]]
    /\ seen = [o \in Offsets |-> FALSE]
    /\ ckpt = [s \in Segments |-> [b \in Buckets |-> 0]]
    /\ spent = [fail |-> 0, member |-> 0, layout |-> 0, move |-> 0, restart |-> 0]

\* The layout, with the checkpoints: the durable state a restart keeps.
Layout == <<nseg, segN, pred, pred2, lo, hi, sealed, ckpt>>
Moves == <<moved, announced>>
\* A membership change ends every controller move: the policy places every bucket again (by position here).
NoMoves == /\ moved' = [s \in Segments |-> [b \in Buckets |-> NoOne]]
           /\ announced' = [s \in Segments |-> [b \in Buckets |-> NoOne]]

Publish(k) ==
    /\ published < MaxMsgs
    /\ LET s == SegmentFor(k) IN
       /\ keyOf' = [keyOf EXCEPT ![published] = k]
       /\ segOf' = [segOf EXCEPT ![published] = s]                    \* req: KS-BKT-1
       /\ bucketOf' = [bucketOf EXCEPT ![published] = BucketFor(k, s)]
    /\ st' = [st EXCEPT ![published] = "pending"]
    /\ published' = published + 1
    /\ UNCHANGED <<holder, delivered, members, Layout, assigned, seen, spent, Moves>>

\* A bucket is handed to its target once the prior owner holds none of its entries (bucket_assigned).
Handoff(s, b) ==
    /\ Exists(s) /\ b < segN[s]
    /\ assigned[s][b] # Target(s, b)
    /\ Bug = "NoWithhold" \/ assigned[s][b] \notin HoldersIn(s, b)    \* req: KS-BKT-4
    /\ assigned' = [assigned EXCEPT ![s][b] = Target(s, b)]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, Layout, seen, spent, Moves>>

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
    /\ seen' = [seen EXCEPT ![o] = TRUE]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, members, Layout, assigned, spent, Moves>>

Ack(o) ==
    /\ st[o] = "outstanding"
    /\ st' = [st EXCEPT ![o] = "resolved"]
    /\ holder' = [holder EXCEPT ![o] = NoOne]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, delivered, members, Layout, assigned, seen, spent, Moves>>

Nack(o) ==
    /\ spent.fail < MaxFailures
    /\ st[o] = "outstanding"
    /\ st' = [st EXCEPT ![o] = "pending"]
    /\ holder' = [holder EXCEPT ![o] = NoOne]
    /\ spent' = [spent EXCEPT !.fail = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, delivered, members, Layout, assigned, seen, Moves>>

Join(c) ==
    /\ spent.member < MaxMemberChanges \/ members = {}
    /\ c \notin members
    /\ members' = members \cup {c}
    /\ spent' = IF members = {} THEN spent ELSE [spent EXCEPT !.member = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, Layout, assigned, seen>>
    /\ NoMoves

\* A member leaves: its deliveries end and their entries are pending again (KS-MEM-1).
Leave(c) ==
    /\ spent.member < MaxMemberChanges
    /\ c \in members
    /\ members' = members \ {c}
    /\ st' = [o \in Offsets |-> IF st[o] = "outstanding" /\ holder[o] = c THEN "pending" ELSE st[o]]
    /\ holder' = [o \in Offsets |-> IF holder[o] = c THEN NoOne ELSE holder[o]]
    /\ spent' = [spent EXCEPT !.member = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, delivered, Layout, assigned, seen>>
    /\ NoMoves

\* Rollover: seal active segment s, create a successor over the same range with a new N (KS-BKT-2).
Rollover(s) ==
    /\ "rollover" \in Layouts /\ spent.layout < MaxLayoutChanges
    /\ Active(s) /\ nseg < 4
    /\ LET new == nseg
           n == IF segN[s] = RolloverN THEN InitialN ELSE RolloverN IN
       /\ nseg' = nseg + 1
       /\ segN' = [segN EXCEPT ![new] = n]
       /\ pred' = [pred EXCEPT ![new] = s]
       /\ lo' = [lo EXCEPT ![new] = lo[s]]
       /\ hi' = [hi EXCEPT ![new] = hi[s]]
       /\ assigned' = [assigned EXCEPT ![new] = Handed(n)]
    /\ sealed' = sealed \cup {s}
    /\ spent' = [spent EXCEPT !.layout = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, seen, pred2, ckpt, Moves>>

\* Split: seal active segment s, create two children over [lo, m] and [m + 1, hi], m = (lo + hi) \div 2,
\* with max(1, N / 2) buckets each.
Split(s) ==
    /\ "split" \in Layouts /\ spent.layout < MaxLayoutChanges
    /\ Active(s) /\ nseg < 3 /\ lo[s] < hi[s]
    /\ LET a == nseg
           b == nseg + 1
           mid == (lo[s] + hi[s]) \div 2
           n == IF segN[s] \div 2 >= 1 THEN segN[s] \div 2 ELSE 1 IN
       /\ nseg' = nseg + 2
       /\ segN' = [segN EXCEPT ![a] = n, ![b] = n]
       /\ pred' = [pred EXCEPT ![a] = s, ![b] = s]
       /\ lo' = [lo EXCEPT ![a] = lo[s], ![b] = mid + 1]
       /\ hi' = [hi EXCEPT ![a] = mid, ![b] = hi[s]]
       /\ assigned' = [assigned EXCEPT ![a] = Handed(n), ![b] = Handed(n)]
    /\ sealed' = sealed \cup {s}
    /\ spent' = [spent EXCEPT !.layout = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, seen, pred2, ckpt, Moves>>

\* Merge: seal two adjacent active segments a and b, create one successor over both ranges with
\* min(N_a + N_b, N_max) buckets; both are its predecessors.
Merge(a, b) ==
    /\ "merge" \in Layouts /\ spent.layout < MaxLayoutChanges
    /\ Active(a) /\ Active(b) /\ hi[a] + 1 = lo[b] /\ nseg < 4
    /\ LET merged == nseg
           m == IF segN[a] + segN[b] <= NMax THEN segN[a] + segN[b] ELSE NMax IN
       /\ nseg' = nseg + 1
       /\ segN' = [segN EXCEPT ![merged] = m]
       /\ pred' = [pred EXCEPT ![merged] = a]
       /\ pred2' = [pred2 EXCEPT ![merged] = b]
       /\ lo' = [lo EXCEPT ![merged] = lo[a]]
       /\ hi' = [hi EXCEPT ![merged] = hi[b]]
       /\ assigned' = [assigned EXCEPT ![merged] = Handed(m)]
    /\ sealed' = sealed \cup {a, b}
    /\ spent' = [spent EXCEPT !.layout = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, seen, ckpt, Moves>>

\* controller_moves: the controller moves bucket b of segment s to c, a member that stays, with no
\* join or leave, and announces it.  The move changes only the target: the bucket is handed to c by
\* Handoff once the prior owner holds none of its entries, as after a membership change.  The broken
\* variant MoveAtOnce hands the bucket over in the same step, without withholding.
ControllerMove(s, b, c) ==
    /\ spent.move < MaxControllerMoves
    /\ Exists(s) /\ b < segN[s]
    /\ c \in members /\ c # Target(s, b)                                 \* req: KS-BKT-3
    /\ moved' = [moved EXCEPT ![s][b] = c]
    /\ announced' = [announced EXCEPT ![s][b] = c]                      \* req: KS-BKT-3 (announced)
    /\ assigned' = IF Bug = "MoveAtOnce" THEN [assigned EXCEPT ![s][b] = c] ELSE assigned
    /\ spent' = [spent EXCEPT !.move = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, Layout, seen>>

\* checkpoint_resume: bucket b of segment s records its checkpoint, the first offset of the bucket that is
\* not resolved (or the log's end when there is none): every entry of the bucket below it is resolved
\* (KS-BKT-6).  A checkpoint may lag: the action may wait.
Frontier(s, b) ==
    LET open == {o \in OfBucket(s, b) : st[o] # "resolved"}
    IN IF open = {} THEN published ELSE CHOOSE o \in open : \A p \in open : o <= p
Checkpoint(s, b) ==
    /\ MaxRestarts > 0
    /\ Exists(s) /\ b < segN[s]
    /\ ckpt[s][b] < Frontier(s, b)
    /\ ckpt' = [ckpt EXCEPT ![s][b] = Frontier(s, b)]                  \* req: KS-BKT-6
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, st, holder, delivered, members, nseg, segN, pred, pred2, lo,
                   hi, sealed, assigned, seen, spent, Moves>>

\* checkpoint_resume: the dispatcher crashes and restarts.  Deliveries end and the volatile records go
\* (delivered, the controller's moves); the layout and the checkpoints are durable.  Each bucket resumes
\* from its own checkpoint: an entry below it stays resolved, every other published entry of the bucket
\* is dispatched again (this model keeps no cursor or holes).  A bucket's assignment stays as it was; with
\* no holder left, Handoff gives it to its target at once.  Resumes(o): o lies below its bucket's checkpoint.
Resumes(o) == o < ckpt[segOf[o]][bucketOf[o]]
Restart ==
    /\ spent.restart < MaxRestarts
    /\ st' = [o \in Offsets |->
                IF st[o] = "unpublished" THEN "unpublished"
                ELSE IF Resumes(o) THEN "resolved"                            \* req: KS-BKT-9
                ELSE "pending"]
    /\ holder' = [o \in Offsets |-> NoOne]
    /\ delivered' = [o \in Offsets |-> FALSE]
    /\ seen' = [o \in Offsets |-> FALSE]
    /\ spent' = [spent EXCEPT !.restart = @ + 1]
    /\ UNCHANGED <<published, keyOf, segOf, bucketOf, members, Layout, assigned>>
    /\ NoMoves

PublishAny == \E k \in Keys : Publish(k)
HandoffAny == \E s \in Segments, b \in Buckets : Handoff(s, b)
DeliverAny == \E o \in Offsets : Deliver(o)
AckAny == \E o \in Offsets : Ack(o)
NackAny == \E o \in Offsets : Nack(o)
JoinAny == \E c \in Consumers : Join(c)
LeaveAny == \E c \in Consumers : Leave(c)
RolloverAny == \E s \in Segments : Rollover(s)
SplitAny == \E s \in Segments : Split(s)
MergeAny == \E a, b \in Segments : Merge(a, b)
ControllerMoveAny == \E s \in Segments, b \in Buckets, c \in Consumers : ControllerMove(s, b, c)
CheckpointAny == \E s \in Segments, b \in Buckets : Checkpoint(s, b)

AllResolved == \A o \in Offsets : st[o] # "pending" /\ st[o] # "outstanding"
Done == AllResolved /\ published = MaxMsgs /\ UNCHANGED vars

Next == PublishAny \/ HandoffAny \/ DeliverAny \/ AckAny \/ NackAny \/ JoinAny \/ LeaveAny
        \/ RolloverAny \/ SplitAny \/ MergeAny \/ ControllerMoveAny \/ CheckpointAny \/ Restart \/ Done

\* The prior owner keeps acking, the dispatcher hands over and delivers, and a consumer comes back
\* when none is left.  One weak-fairness condition over all of these suffices: each budget is
\* finite, so these progress steps cannot go on for ever, and whatever stays enabled is taken.
Progress == HandoffAny \/ DeliverAny \/ AckAny \/ (members = {} /\ JoinAny)
Fairness == WF_vars(Progress)

Spec == Init /\ [][Next]_vars
LiveSpec == Spec /\ Fairness

-----------------------------------------------------------------------------
(* Properties, named after the requirement each checks.  Ranges of N (1 .. NMax) follow from the
   ASSUMEs and TypeOK, so KS_BKT_2 states only what they cannot: a segment's N never changes. *)

TypeOK ==
    /\ st \in [Offsets -> {"unpublished", "pending", "outstanding", "resolved"}]
    /\ members \subseteq Consumers
    /\ nseg \in 1 .. 4
    /\ segN \in [Segments -> 0 .. NMax]
    /\ seen \in [Offsets -> BOOLEAN]
    /\ moved \in [Segments -> [Buckets -> members \cup {NoOne}]]
    /\ ckpt \in [Segments -> [Buckets -> 0 .. MaxMsgs]]

Delivered(o) == st[o] # "outstanding" /\ st'[o] = "outstanding"

\* The properties spell out their own sets rather than use the helpers the actions use, so that a
\* wrong helper is caught, not shared.
Open(o) == st[o] \in {"pending", "outstanding"}
BucketHolders(s, b) == {holder[o] : o \in {p \in Offsets : segOf[p] = s /\ bucketOf[p] = b /\ st[p] = "outstanding"}}
RECURSIVE Lineage(_)
Lineage(s) == (IF pred[s] = NoSeg THEN {} ELSE {pred[s]} \cup Lineage(pred[s]))
              \cup (IF pred2[s] = NoSeg THEN {} ELSE {pred2[s]} \cup Lineage(pred2[s]))
EarlierOfKey(o) == {p \in Offsets : p < o /\ keyOf[p] = keyOf[o]}

\* KS-BKT-3 computed independently of Rank/OwnsBucket: bucket b of N among k members belongs to the
\* member at position ceil((b+1)*k/N) - 1 in name order.
OwnerBySpec(n, b) ==
    LET k == Cardinality(members) j == ((b + 1) * k - 1) \div n
        at == {c \in members : Cardinality({d \in members : d < c}) = j}
    IN IF at = {} THEN NoOne ELSE CHOOSE c \in at : TRUE

\* A segment's bucket count never changes once the segment exists.
KS_BKT_2_BucketCountFixed ==
    [][\A s \in Segments : segN[s] > 0 => segN'[s] = segN[s]]_vars

\* Every entry is delivered to the owner of its bucket: the member the controller announced last for it
\* since the last membership change (history: announced), else the owner by position as OwnerBySpec
\* computes it.
KS_BKT_3_DeliverToBucketOwner ==
    [][\A o \in Offsets : Delivered(o) =>
          holder'[o] = IF announced[segOf[o]][bucketOf[o]] # NoOne THEN announced[segOf[o]][bucketOf[o]]
                       ELSE OwnerBySpec(segN[segOf[o]], bucketOf[o])]_vars

\* At most one consumer holds outstanding entries of a bucket.
KS_BKT_4_OneHolderPerBucket ==
    \A s \in Segments, b \in Buckets : Cardinality(BucketHolders(s, b)) <= 1

\* A bucket's assignment changes only when its prior owner holds none of its entries.
KS_BKT_4_HandoffAfterDrain ==
    [][\A s \in Segments, b \in Buckets :
          assigned'[s][b] # assigned[s][b] /\ assigned[s][b] # NoOne => assigned[s][b] \notin BucketHolders(s, b)]_vars

\* Over history: once an entry of a segment was delivered, no ancestor of that segment (Lineage) has an
\* unresolved entry in its range (sealed segments take no entries, so none can appear later).
KS_BKT_5_SuccessorWaits ==
    \A o, p \in Offsets : seen[o] /\ segOf[p] \in Lineage(segOf[o]) /\ Open(p)
                          => ~InRange(segOf[o], HashHi[keyOf[p]])

\* Over history, across segments: for every entry ever delivered, every earlier entry of its key was
\* delivered too, or is resolved.
KS_ORD_1_FirstDeliveryOrder ==
    \A o \in Offsets : seen[o] => \A p \in EarlierOfKey(o) : seen[p] \/ st[p] = "resolved"

\* Over history: no entry is delivered while an earlier entry of its key is pending after being
\* delivered (awaiting redelivery).
KS_ORD_3_RedeliveryFirst ==
    [][\A o \in Offsets : Delivered(o) => \A p \in EarlierOfKey(o) : ~(st[p] = "pending" /\ seen[p])]_vars

\* At most one consumer holds outstanding entries of a key.
KS_DRN_1_OneHolderPerKey ==
    \A k \in Keys : Cardinality({holder[o] : o \in {p \in Offsets : keyOf[p] = k /\ st[p] = "outstanding"}}) <= 1

\* An entry its bucket's checkpoint covers (the property's own reading of ckpt).
BelowCheckpoint(o) == segOf[o] # NoSeg /\ o < ckpt[segOf[o]][bucketOf[o]]

\* Every entry below its bucket's checkpoint is resolved.
KS_BKT_6_CheckpointCoversResolved == \A o \in Offsets : BelowCheckpoint(o) => st[o] = "resolved"

\* Nothing a bucket's checkpoint covers is delivered again, before or after a restart.
KS_BKT_9_CheckpointedNotRedelivered == [][\A o \in Offsets : Delivered(o) => ~BelowCheckpoint(o)]_vars

\* Over history: nothing above a bucket's checkpoint is skipped: an entry is resolved only if it was
\* delivered since the last restart (and acked) or its bucket's checkpoint covers it.
KS_BKT_9_NothingSkipped == \A o \in Offsets : st[o] = "resolved" => seen[o] \/ BelowCheckpoint(o)

\* Liveness: eventually no bucket is withheld for good (moves are finite, so "every withheld bucket
\* is eventually handed over" is "eventually none is").
KS_BKT_4_HandoffCompletes == <>[](\A s \in Segments, b \in Buckets : ~Withheld(s, b))

\* Liveness: eventually every entry stays resolved, that is acked (an ack is the only resolution of
\* this model).
KS_LIV_1_EverythingResolved == <>[]AllResolved
==============================================================================
