#!/usr/bin/env bash
# Records which flavor Kueue v0.19.0's own flavor assigner chooses, with
# flavor fungibility and classical preemption, on generated cohort trees (PARITY_TREES=1) of
# two flavors, for pkg/simulate's TestKueueFungibilityParityTrees
# (pkg/simulate/testdata/kueue-v0.19-fungibility-parity-trees.json). As
# generate-preemption.sh does, it builds nothing of Strata: it copies
# Kueue's module from the module proxy into a scratch directory, drops
# fungibility_corpus_test.go.in (Strata's generator) into a new package
# directory of it and runs it there.
#
#   hack/kueue-parity/generate-fungibility-trees.sh [cases] [seed]
set -euo pipefail
cases=${1:-400}
seed=${2:-11}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=v0.19.0
# shellcheck source=scratch.sh
. "$root/hack/kueue-parity/scratch.sh"
mkdir -p "$scratch/pkg/strataparity"
cp "$root/hack/kueue-parity/fungibility_corpus_test.go.in" "$scratch/pkg/strataparity/zz_strata_fungibility_parity_test.go"
out="$root/pkg/simulate/testdata/kueue-${version%.*}-fungibility-parity-trees.json"
mkdir -p "$(dirname "$out")"
(cd "$scratch" && PARITY_TREES=1 PARITY_CASES=$cases PARITY_SEED=$seed PARITY_OUT="$out" \
	go test ./pkg/strataparity/ -run '^TestStrataFungibilityParityCorpus$' -count=1 -v | { grep -v '^=== RUN' || true; })
echo "wrote $out ($cases cases, seed $seed)"
