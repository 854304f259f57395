------------------------- MODULE MCKeySharedOrdering -------------------------
(* Model-checking wrapper of KeySharedOrdering: symmetry and filter choices for the configs. *)
EXTENDS KeySharedOrdering

\* Consumers and keys are interchangeable: check one representative per permutation (safety only).
Symmetry == Permutations(Consumers) \cup Permutations(Keys)

\* Every joiner accepts every key.
AcceptAll == {Keys}

\* A joiner accepts every key, or exactly one (a filter); symmetric under permuting keys.
AcceptAllOrOne == {Keys} \cup {{k} : k \in Keys}

\* drain_granularity = "key": every key is a slot of its own (SlotOf is then not read).
OwnSlots == [k \in Keys |-> k]

\* drain_granularity = "hash": every key in one slot, so that each key has a slot-mate (symmetric
\* under permuting keys).
OneSlot == [k \in Keys |-> 0]
==============================================================================
