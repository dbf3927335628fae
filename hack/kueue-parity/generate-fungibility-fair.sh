#!/usr/bin/env bash
# As generate-fungibility-trees.sh, with Kueue's fair sharing on (its
# fairSharing configuration, one of the three accepted strategy lists,
# fairSharing weights on the queues and cohorts), half the cases on cohort
# trees, for pkg/simulate's TestKueueFungibilityParityFair
# (pkg/simulate/testdata/kueue-v0.19-fungibility-parity-fair.json).
#
#   hack/kueue-parity/generate-fungibility-fair.sh [cases] [seed]
set -euo pipefail
cases=${1:-400}
seed=${2:-11}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=v0.19.0
# shellcheck source=scratch.sh
. "$root/hack/kueue-parity/scratch.sh"
mkdir -p "$scratch/pkg/strataparity"
cp "$root/hack/kueue-parity/fungibility_corpus_test.go.in" "$scratch/pkg/strataparity/zz_strata_fungibility_parity_test.go"
out="$root/pkg/simulate/testdata/kueue-${version%.*}-fungibility-parity-fair.json"
mkdir -p "$(dirname "$out")"
(cd "$scratch" && PARITY_FAIR=1 PARITY_CASES=$cases PARITY_SEED=$seed PARITY_OUT="$out" \
	go test ./pkg/strataparity/ -run '^TestStrataFungibilityParityCorpus$' -count=1 -v | { grep -v '^=== RUN' || true; })
echo "wrote $out ($cases cases, seed $seed)"
