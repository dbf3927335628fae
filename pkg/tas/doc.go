// Package tas is Strata's topology-aware scheduling engine: plain Go with no
// API-server calls. A Snapshot holds one flavor's topology tree with the free
// capacity of its nodes (the agent) or of summarized node buckets (the hub);
// FindAssignment places a pod set following KEP-2724 — required, preferred and
// unconstrained requests, BestFit and LeastFreeCapacity, two-level and
// multi-layer slices — and returns per-domain pod counts in rank order.
//
// The cost of a placement is linear in the number of capacity bins (nodes, or
// buckets of identical nodes) plus domains, with no allocation per bin; keeping
// a Snapshot current after a node or usage change costs O(resources + depth).
// A Snapshot is not safe for concurrent use.
package tas
