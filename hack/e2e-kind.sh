#!/usr/bin/env bash
# hack/e2e-kind.sh (make test-e2e-kind): the e2e suite (test/e2e) on kind
# clusters instead of kwokctl ones, for machines with a Docker engine that
# runs privileged containers. Strata's CI has none and runs the same specs
# on kwok (make test-e2e); `make test` checks the kind provider offline.
#
# It builds the images (make images) and runs the suite with
# STRATA_E2E_PROVIDER=kind: the suite creates its three clusters itself
# through kind's Go API (test/kindcluster), loads the images, installs
# kwok's controller for the simulated nodes, and deletes the clusters at
# the end (KEEP=1 keeps them; make test-e2e-kind-down removes them).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
TAG=${STRATA_E2E_IMAGE_TAG:-e2e}
ARCH=$(go env GOARCH)

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
  echo "make test-e2e-kind needs a running Docker engine; 'make test-e2e' runs the same specs on kwok without one" >&2
  exit 1
fi
"${ROOT}/hack/k8s-binaries.sh" kubernetes helm # kubectl and helm for the suite
make -C "${ROOT}" images VERSION="${TAG}" ARCH="${ARCH}"
STRATA_E2E_PROVIDER=kind STRATA_E2E_IMAGE_TAG="${TAG}" STRATA_K8S_BIN="${ROOT}/bin/k8s" \
  go test "${ROOT}/test/e2e/..." -timeout 60m -count=1 -v
