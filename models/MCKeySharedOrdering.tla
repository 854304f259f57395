------------------------- MODULE MCKeySharedOrdering -------------------------
(* Model-checking wrapper of KeySharedOrdering: symmetry and filter choices for the configs. *)
EXTENDS KeySharedOrdering

\* Consumers and keys are interchangeable: check one representative per permutation (safety only).
Symmetry == Permutations(Consumers) \cup Permutations(Keys)

\* Every joiner accepts every key.
AcceptAll == {Keys}

\* A joiner accepts every key, or exactly one (a filter); symmetric under permuting keys.
AcceptAllOrOne == {Keys} \cup {{k} : k \in Keys}
==============================================================================
