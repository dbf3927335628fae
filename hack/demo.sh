#!/usr/bin/env bash
# make demo: a kwok worker cluster (real kube-apiserver, controller-manager,
# scheduler; kwok simulates 16 GPU nodes in 2 blocks x 2 racks), strata-agent
# installed with its helm chart and running as a process with the chart's
# ServiceAccount, and the sample Jobs of docs/examples/simulate. It prints
# where each Job landed (flavor, racks, nodes) or why it waits.
# hack/demo.sh down removes everything.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${ROOT}/bin/k8s
export KWOK_WORKDIR=${ROOT}/.kwok
NAME=strata-demo
KC=${KWOK_WORKDIR}/${NAME}.kubeconfig
AGENT_KC=${KWOK_WORKDIR}/${NAME}-agent.kubeconfig
PIDFILE=${KWOK_WORKDIR}/${NAME}-agent.pid
LOG=${KWOK_WORKDIR}/${NAME}-agent.log
kubectl() { "${BIN}/kubectl" --kubeconfig "${KC}" "$@"; }

down() {
  if [[ -f "${PIDFILE}" ]]; then
    kill "$(cat "${PIDFILE}")" 2>/dev/null || true
    rm -f "${PIDFILE}"
  fi
  "${BIN}/kwokctl" delete cluster --name "${NAME}" >/dev/null 2>&1 || true
  rm -f "${KC}" "${AGENT_KC}"
}

if [[ "${1:-}" == "down" ]]; then
  down
  echo "demo removed"
  exit 0
fi

"${ROOT}/hack/k8s-binaries.sh"
mkdir -p "${KWOK_WORKDIR}" "${ROOT}/bin"
go build -o "${ROOT}/bin/strata-agent" "${ROOT}/agent/cmd/strata-agent"
down

echo "== creating the kwok cluster ${NAME}"
"${BIN}/kwokctl" create cluster --name "${NAME}" --runtime binary \
  --kube-apiserver-binary "${BIN}/kube-apiserver" \
  --kube-controller-manager-binary "${BIN}/kube-controller-manager" \
  --kube-scheduler-binary "${BIN}/kube-scheduler" \
  --kwok-controller-binary "${BIN}/kwok" --etcd-binary "${BIN}/etcd" \
  --kubeconfig "${KC}" --wait 2m >/dev/null

echo "== installing the strata-agent chart"
"${BIN}/helm" install strata-agent "${ROOT}/charts/strata-agent" --kubeconfig "${KC}" \
  --namespace strata-system --create-namespace --set replicas=0 --wait >/dev/null

echo "== starting strata-agent with the chart's ServiceAccount (log: ${LOG})"
TOKEN=$(kubectl create token strata-agent --namespace strata-system --duration 24h)
cp "${KC}" "${AGENT_KC}"
"${BIN}/kubectl" --kubeconfig "${AGENT_KC}" config set-credentials strata-agent --token "${TOKEN}" >/dev/null
"${BIN}/kubectl" --kubeconfig "${AGENT_KC}" config set-context --current --user strata-agent >/dev/null
"${ROOT}/bin/strata-agent" --kubeconfig "${AGENT_KC}" --metrics-bind-address 0 \
  --health-probe-bind-address 127.0.0.1:0 >"${LOG}" 2>&1 &
echo $! >"${PIDFILE}"

echo "== the cluster and the Jobs of docs/examples/simulate"
kubectl create namespace ml >/dev/null
kubectl create namespace monitoring >/dev/null
kubectl apply -f "${ROOT}/docs/examples/simulate/cluster.yaml" >/dev/null
# kwok reports the nodes Ready; the node lifecycle controller then lifts the
# not-ready taints.
kubectl wait --for=condition=Ready nodes --all --timeout=120s >/dev/null
for _ in $(seq 60); do
  [[ -z "$(kubectl get nodes -o jsonpath='{.items[*].spec.taints}')" ]] && break
  sleep 1
done
kubectl apply -f "${ROOT}/docs/examples/simulate/jobs.yaml"

echo "== waiting for every Job to be admitted and complete, or to wait with a reason"
for _ in $(seq 90); do
  decided=$(kubectl get workloads -n ml -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Admitted")].status}{"\n"}{end}' | grep -c -e True -e False || true)
  [[ "${decided}" -ge 4 ]] && break
  sleep 1
done
for wl in $(kubectl get workloads -n ml -o jsonpath='{range .items[?(@.status.admission)]}{.metadata.name}{" "}{end}'); do
  kubectl wait --for=condition=Complete "job/${wl#job-}" -n ml --timeout=120s >/dev/null
done

printf '\n%-20s %-9s %-8s %-28s %s\n' JOB ADMITTED FLAVOR RACKS "NODES (pods) / REASON"
for wl in $(kubectl get workloads -n ml -o jsonpath='{.items[*].metadata.name}'); do
  job=${wl#job-}
  admitted=$(kubectl get workload -n ml "${wl}" -o jsonpath='{.status.conditions[?(@.type=="Admitted")].status}')
  if [[ "${admitted}" != "True" ]]; then
    reason=$(kubectl get workload -n ml "${wl}" -o jsonpath='{.status.conditions[?(@.type=="Admitted")].message}')
    printf '%-20s %-9s %-8s %-28s %s\n' "${job}" "${admitted:-?}" - - "${reason}"
    continue
  fi
  flavor=$(kubectl get workload -n ml "${wl}" -o jsonpath='{.status.admission.podSetAssignments[0].flavor}')
  nodes=$(kubectl get pods -n ml -l "strata.dev/workload=${wl}" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | awk '{printf "%s(%s) ", $2, $1}')
  racks=$(for n in $(kubectl get pods -n ml -l "strata.dev/workload=${wl}" -o jsonpath='{.items[*].spec.nodeName}'); do
    kubectl get node "${n}" -o jsonpath='{.metadata.labels.cloud\.provider\.com/topology-block}/{.metadata.labels.cloud\.provider\.com/topology-rack}{"\n"}'
  done | sort -u | tr '\n' ' ')
  printf '%-20s %-9s %-8s %-28s %s\n' "${job}" True "${flavor}" "${racks:-(pods not created yet)}" "${nodes}"
done
cat <<EOM

The cluster keeps running: kubectl --kubeconfig ${KC} get workloads -A
Offline, the same placement question: go run ./pkg/cmd/kubectl-strata simulate -f docs/examples/simulate/
Remove it all: make demo-down
EOM
