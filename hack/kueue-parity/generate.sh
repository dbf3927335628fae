#!/usr/bin/env bash
# Records what Kueue v0.19.0's own TAS engine answers on generated cases,
# for pkg/tas's TestKueueParity (pkg/tas/testdata/kueue-v0.19-parity.json).
# It builds nothing of Strata: it copies Kueue's module from the module
# proxy into a scratch directory, drops corpus_test.go.in (Strata's
# generator, which needs the snapshot API internal to Kueue's
# pkg/cache/scheduler) into it and runs it there.
#
#   hack/kueue-parity/generate.sh [cases] [seed]
#
# generate-preemption.sh, next to it, records pkg/preemption's corpus the
# same way.
set -euo pipefail
cases=${1:-800}
seed=${2:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=v0.19.0
# shellcheck source=scratch.sh
. "$root/hack/kueue-parity/scratch.sh"
cp "$root/hack/kueue-parity/corpus_test.go.in" "$scratch/pkg/cache/scheduler/zz_strata_parity_test.go"
out="$root/pkg/tas/testdata/kueue-${version%.*}-parity.json"
mkdir -p "$(dirname "$out")"
(cd "$scratch" && PARITY_CASES=$cases PARITY_SEED=$seed PARITY_OUT="$out" \
	go test ./pkg/cache/scheduler/ -run '^TestStrataParityCorpus$' -count=1)
echo "wrote $out ($cases cases, seed $seed)"
