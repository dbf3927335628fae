#!/usr/bin/env bash
# hack/e2e-kind.sh: the e2e suite (test/e2e) on kind clusters instead of
# kwokctl ones, for machines with a Docker engine. It is NOT exercised by
# Strata's CI (its machines have no Docker); `make test-e2e` runs the same
# specs on kwok.
#
# It builds the images (make images), creates three kind clusters from
# hack/kind/ (strata-e2e and strata-e2e-w2 as workers, strata-e2e-hub),
# loads the images, installs kwok's controller in each (the specs' Jobs run
# on simulated nodes), and runs the suite with STRATA_E2E_PROVIDER=kind:
# the specs are the same; only how clusters are made and how the binaries
# run (Deployments from the charts instead of processes) differ.
#
# Usage: hack/e2e-kind.sh            (KEEP=1 keeps the clusters afterwards)
#        hack/e2e-kind.sh down       (removes them)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
KIND_VERSION=${KIND_VERSION:-v0.33.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
# kind v0.33.0's default node image (Kubernetes 1.37.0), pinned by digest as
# kind's release notes ask; the charts need Kubernetes 1.36 or later.
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5}
DIR=${ROOT}/.kind-e2e
TAG=${STRATA_E2E_IMAGE_TAG:-e2e}
ARCH=$(go env GOARCH)
KIND=${ROOT}/bin/kind
BIN=${ROOT}/bin/k8s
CLUSTERS=(strata-e2e strata-e2e-w2 strata-e2e-hub)

down() {
  local c
  for c in "${CLUSTERS[@]}"; do "${KIND}" delete cluster --name "${c}" >/dev/null 2>&1 || true; done
  rm -rf "${DIR}"
}

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
  echo "hack/e2e-kind.sh needs a running Docker engine; 'make test-e2e' runs the same specs on kwok without one" >&2
  exit 1
fi
[[ -x "${KIND}" ]] || GOBIN="${ROOT}/bin" go install "sigs.k8s.io/kind@${KIND_VERSION}"
if [[ "${1:-}" == "down" ]]; then
  down
  exit 0
fi
"${ROOT}/hack/k8s-binaries.sh" kubernetes helm # kubectl and helm for the suite
make -C "${ROOT}" images VERSION="${TAG}" ARCH="${ARCH}"
go mod download "sigs.k8s.io/kwok@${KWOK_VERSION}"
KWOK_KUSTOMIZE=$(go env GOMODCACHE)/sigs.k8s.io/kwok@${KWOK_VERSION}/kustomize/kwok

down
mkdir -p "${DIR}"
for c in "${CLUSTERS[@]}"; do
  config=worker.yaml
  [[ "${c}" == *-hub ]] && config=hub.yaml
  echo "== creating kind cluster ${c}"
  "${KIND}" create cluster --name "${c}" --image "${KIND_NODE_IMAGE}" --config "${ROOT}/hack/kind/${config}" \
    --kubeconfig "${DIR}/${c}.kubeconfig" --wait 3m
  # How the hub's pods reach this cluster: its control plane's address on
  # the kind network.
  "${KIND}" get kubeconfig --internal --name "${c}" >"${DIR}/${c}-internal.kubeconfig"
  for image in strata-agent strata-hub; do
    "${KIND}" load image-archive "${ROOT}/bin/images/${image}-${TAG}-${ARCH}.tar" --name "${c}"
  done
  k() { "${BIN}/kubectl" --kubeconfig "${DIR}/${c}.kubeconfig" "$@"; }
  if [[ "${config}" == worker.yaml ]]; then
    # A fake GPU capacity on the kind worker node, as on a GPU node.
    node=$(k get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[0].metadata.name}')
    k patch node "${node}" --subresource status --type merge -p '{"status":{"capacity":{"nvidia.com/gpu":"8"}}}' >/dev/null
  fi
  echo "== kwok's controller on ${c} (it simulates the specs' nodes)"
  k apply -k "${KWOK_KUSTOMIZE}" >/dev/null
  k -n kube-system set image deployment/kwok-controller "kwok-controller=registry.k8s.io/kwok/kwok:${KWOK_VERSION}" >/dev/null
  k -n kube-system rollout status deployment/kwok-controller --timeout 3m
done

status=0
STRATA_E2E_PROVIDER=kind STRATA_E2E_KIND_DIR="${DIR}" STRATA_E2E_IMAGE_TAG="${TAG}" STRATA_K8S_BIN="${BIN}" \
  go test "${ROOT}/test/e2e/..." -timeout 45m -count=1 -v || status=$?
if [[ "${KEEP:-}" != 1 ]]; then
  down
else
  echo "clusters kept; kubeconfigs in ${DIR}; hack/e2e-kind.sh down removes them"
fi
exit "${status}"
