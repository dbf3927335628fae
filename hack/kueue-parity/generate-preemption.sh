#!/usr/bin/env bash
# Records what Kueue v0.19.0's own flavor assigner and classical preemption
# answer on generated flat cohorts, for pkg/preemption's
# TestKueuePreemptionParity
# (pkg/preemption/testdata/kueue-v0.19-preemption-parity.json). As
# generate.sh does for TAS, it builds nothing of Strata: it copies Kueue's
# module from the module proxy into a scratch directory, drops
# preemption_corpus_test.go.in (Strata's generator) into a new package
# directory of it and runs it there.
#
#   hack/kueue-parity/generate-preemption.sh [cases] [seed]
set -euo pipefail
cases=${1:-600}
seed=${2:-7}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=v0.19.0
# shellcheck source=scratch.sh
. "$root/hack/kueue-parity/scratch.sh"
mkdir -p "$scratch/pkg/strataparity"
cp "$root/hack/kueue-parity/preemption_corpus_test.go.in" "$scratch/pkg/strataparity/zz_strata_preemption_parity_test.go"
out="$root/pkg/preemption/testdata/kueue-${version%.*}-preemption-parity.json"
mkdir -p "$(dirname "$out")"
(cd "$scratch" && PARITY_CASES=$cases PARITY_SEED=$seed PARITY_OUT="$out" \
	go test ./pkg/strataparity/ -run '^TestStrataPreemptionParityCorpus$' -count=1 -v | { grep -v '^=== RUN' || true; })
echo "wrote $out ($cases cases, seed $seed)"
