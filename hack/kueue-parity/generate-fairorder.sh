#!/usr/bin/env bash
# Records which pending workloads Kueue v0.19.0's own scheduler admits, and
# on which flavor, with fair sharing on, for pkg/simulate's
# TestKueueFairOrderParity (pkg/simulate/testdata/kueue-v0.19-fairorder-parity.json):
# the queues of a cohort (flat, or a tree of Cohort objects), weighted, one
# or two pending workloads each, contending for what the cohort lends;
# Kueue's scheduling cycles run until two in a row admit nothing. As the other
# generators, it builds nothing of Strata: fairorder_corpus_test.go.in runs
# inside a scratch copy of Kueue's module, in its pkg/scheduler (it needs
# the scheduler's unexported cycle).
#
# PARITY_CLASSICAL=1: fair sharing off (kueue-v0.19-classicorder-parity.json).
# PARITY_PREEMPT=1: the queues preempt, and the record says which workloads
# Kueue preempted (kueue-v0.19-*-preempt-parity.json, for
# TestKueue(Classic|Fair)OrderPreemptParity; recorded with 100 29 and 100 31).
#
#   hack/kueue-parity/generate-fairorder.sh [cases] [seed]
set -euo pipefail
cases=${1:-300}
seed=${2:-17}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=v0.19.0
# shellcheck source=scratch.sh
. "$root/hack/kueue-parity/scratch.sh"
cp "$root/hack/kueue-parity/fairorder_corpus_test.go.in" "$scratch/pkg/scheduler/zz_strata_fairorder_parity_test.go"
name=fairorder
if [ -n "${PARITY_CLASSICAL:-}" ]; then name=classicorder; fi
# PARITY_PREEMPT=1: the queues have random preemption policies, and the
# record says which workloads Kueue preempted.
if [ -n "${PARITY_PREEMPT:-}" ]; then name=$name-preempt; fi
out="$root/pkg/simulate/testdata/kueue-${version%.*}-$name-parity.json"
mkdir -p "$(dirname "$out")"
(cd "$scratch" && PARITY_CLASSICAL=${PARITY_CLASSICAL:-} PARITY_PREEMPT=${PARITY_PREEMPT:-} PARITY_ONLY=${PARITY_ONLY:-} PARITY_VERBOSE=${PARITY_VERBOSE:-} PARITY_CASES=$cases PARITY_SEED=$seed PARITY_OUT="$out" \
	go test ./pkg/scheduler/ -run '^TestStrataFairOrderCorpus$' -count=1 -v | { grep -v '^=== RUN' || true; })
echo "wrote $out ($cases cases, seed $seed)"
