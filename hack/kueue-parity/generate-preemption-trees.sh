#!/usr/bin/env bash
# As generate-preemption.sh, on cohort trees (Kueue's Cohort objects):
# the queues in cohorts left and right under root, each cohort with quota
# of its own; for pkg/preemption's TestKueuePreemptionParityTrees
# (pkg/preemption/testdata/kueue-v0.19-preemption-parity-trees.json).
#
#   hack/kueue-parity/generate-preemption-trees.sh [cases] [seed]
set -euo pipefail
cases=${1:-400}
seed=${2:-11}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=v0.19.0
# shellcheck source=scratch.sh
. "$root/hack/kueue-parity/scratch.sh"
mkdir -p "$scratch/pkg/strataparity"
cp "$root/hack/kueue-parity/preemption_corpus_test.go.in" "$scratch/pkg/strataparity/zz_strata_preemption_parity_test.go"
out="$root/pkg/preemption/testdata/kueue-${version%.*}-preemption-parity-trees.json"
mkdir -p "$(dirname "$out")"
(cd "$scratch" && PARITY_TREES=1 PARITY_CASES=$cases PARITY_SEED=$seed PARITY_OUT="$out" \
	go test ./pkg/strataparity/ -run '^TestStrataPreemptionParityCorpus$' -count=1 -v | { grep -v '^=== RUN' || true; })
echo "wrote $out ($cases cases, seed $seed)"
