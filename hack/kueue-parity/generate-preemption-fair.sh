#!/usr/bin/env bash
# As generate-preemption.sh, with Kueue's fair sharing on (its
# fairSharing configuration, one of the three accepted strategy lists, and
# fairSharing weights on the queues and cohorts): half the cases in flat
# cohorts, half in cohort trees; for pkg/preemption's
# TestKueuePreemptionParityFair
# (pkg/preemption/testdata/kueue-v0.19-preemption-parity-fair.json).
#
#   hack/kueue-parity/generate-preemption-fair.sh [cases] [seed]
set -euo pipefail
cases=${1:-400}
seed=${2:-13}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=v0.19.0
# shellcheck source=scratch.sh
. "$root/hack/kueue-parity/scratch.sh"
mkdir -p "$scratch/pkg/strataparity"
cp "$root/hack/kueue-parity/preemption_corpus_test.go.in" "$scratch/pkg/strataparity/zz_strata_preemption_parity_test.go"
out="$root/pkg/preemption/testdata/kueue-${version%.*}-preemption-parity-fair.json"
mkdir -p "$(dirname "$out")"
(cd "$scratch" && PARITY_FAIR=1 PARITY_CASES=$cases PARITY_SEED=$seed PARITY_OUT="$out" \
	go test ./pkg/strataparity/ -run '^TestStrataPreemptionParityCorpus$' -count=1 -v | { grep -v '^=== RUN' || true; })
echo "wrote $out ($cases cases, seed $seed)"
