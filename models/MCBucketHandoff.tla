--------------------------- MODULE MCBucketHandoff ---------------------------
(* Model-checking wrapper of BucketHandoff: two keys with fixed hashes.  k1 lies in the lower
   half of the ring and in the lower buckets, k2 in the upper half and the upper buckets, so a
   rollover from 1 to 2 buckets moves k2 to another bucket and a split puts them in different
   children. *)
EXTENDS BucketHandoff
CONSTANTS k1, k2

TwoKeysHi == [k \in Keys |-> IF k = k1 THEN 1000 ELSE 40000]
TwoKeysLo == [k \in Keys |-> IF k = k1 THEN 10000 ELSE 50000]
RolloverOnly == {"rollover"}
SplitOnly == {"split"}
RolloverOrSplit == {"rollover", "split"}
SplitOrMerge == {"split", "merge"}
==============================================================================
