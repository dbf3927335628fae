#!/usr/bin/env bash
# make demo: a Strata fleet on kwok clusters (real kube-apiserver,
# controller-manager and scheduler each; kwok simulates the nodes):
#
#   hub   strata-hub, installed with its helm chart, running as a process
#         with the chart's ServiceAccount
#   west  A100 nodes with a free rack     \  strata-agent, installed with its
#   east  A100 nodes, fragmented racks    /  chart, running the same way
#
# west is registered through a kubeconfig Secret, east through a
# ClusterProfile (with an exec credential plugin). The CRDs of JobSet,
# LeaderWorkerSet and MPIJob are on every cluster; their controllers
# (bin/k8s/jobset, lws, mpi-operator) run for each worker. The Jobs and the
# JobSet of docs/examples/fleet/hub, and the LeaderWorkerSet and the MPIJob
# of docs/examples/fleet/hub-kinds, are submitted to the hub; the script
# prints where each landed (cluster, flavor, racks; for the JobSet, where
# each of its Jobs ran; for the LeaderWorkerSet, each group; for the
# MPIJob, the launcher and the workers) or why it waits, and the
# WorkerClusters. Everything keeps running; kubeconfigs and logs are in
# .demo/. hack/demo.sh down removes it all. Running it again while the demo
# is up only prints the results again.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${ROOT}/bin/k8s
DEMO=${ROOT}/.demo
export KWOK_WORKDIR=${ROOT}/.kwok
WORKERS=(west east)
CLUSTERS=(hub "${WORKERS[@]}")
PROVIDER=strata-demo

kc() { echo "${DEMO}/$1.kubeconfig"; }
k() { local c=$1; shift; "${BIN}/kubectl" --kubeconfig "$(kc "${c}")" "$@"; }
say() { printf '== %s\n' "$*"; }

running() {
  local c pid
  for c in "${CLUSTERS[@]}"; do
    [[ -f "${DEMO}/${c}.pid" ]] || return 1
    pid=$(cat "${DEMO}/${c}.pid")
    kill -0 "${pid}" 2>/dev/null || return 1
    k "${c}" get --raw /readyz >/dev/null 2>&1 || return 1
  done
}

down() {
  local c
  for c in "${CLUSTERS[@]}"; do
    local p
    for p in "${DEMO}/${c}.pid" "${DEMO}/jobset-${c}.pid" "${DEMO}/lws-${c}.pid" "${DEMO}/mpi-operator-${c}.pid"; do
      if [[ -f "${p}" ]]; then
        kill "$(cat "${p}")" 2>/dev/null || true
      fi
    done
    "${BIN}/kwokctl" delete cluster --name "strata-demo-${c}" >/dev/null 2>&1 || true
  done
  rm -rf "${DEMO}"
}

# sa_kubeconfig CLUSTER SERVICEACCOUNT OUT: a kubeconfig of CLUSTER that
# authenticates as SERVICEACCOUNT of strata-system (a day's token).
sa_kubeconfig() {
  local token
  token=$(k "$1" create token "$2" --namespace strata-system --duration 24h)
  k "$1" config view --minify --flatten >"$3"
  "${BIN}/kubectl" --kubeconfig "$3" config set-credentials "$2" --token "${token}" >/dev/null
  "${BIN}/kubectl" --kubeconfig "$3" config set-context --current --user "$2" >/dev/null
}

# start NAME BINARY ARGS...: a process with its log and pid in .demo/.
start() {
  local name=$1 bin=$2; shift 2
  "${bin}" "$@" --metrics-bind-address 0 --health-probe-bind-address 127.0.0.1:0 >"${DEMO}/${name}.log" 2>&1 &
  echo $! >"${DEMO}/${name}.pid"
}

results() {
  printf '\n%-18s %-8s %-9s %-28s %s\n' JOB CLUSTER FLAVOR RACKS "NODES (pods) / WHY IT WAITS"
  local wl job sel admitted cluster flavor reason nodes racks
  for wl in $(k hub get workloads -n ml -o jsonpath='{.items[*].metadata.name}'); do
    job=${wl#job-}
    sel="strata.dev/workload=${wl}"
    case "${wl}" in
      jobset-*) job="jobset/${wl#jobset-}" ;;
      mpijob-*) job="mpijob/${wl#mpijob-}" ;;
      lwsset-*) job="lws/${wl#lwsset-}" sel="leaderworkerset.sigs.k8s.io/name=${wl#lwsset-}" ;;
    esac
    admitted=$(k hub get workload -n ml "${wl}" -o jsonpath='{.status.conditions[?(@.type=="Admitted")].status}')
    if [[ "${admitted}" != "True" ]]; then
      reason=$(k hub get workload -n ml "${wl}" -o jsonpath='{.status.conditions[?(@.type=="Admitted")].message}')
      printf '%-18s %-8s %-9s %-28s %s\n' "${job}" - - - "${reason:-not decided yet}"
      continue
    fi
    cluster=$(k hub get workload -n ml "${wl}" -o jsonpath='{.status.placement.cluster}')
    flavor=$(k hub get workload -n ml "${wl}" -o jsonpath='{.status.placement.flavor}')
    nodes=$(k "${cluster}" get pods -n ml -l "${sel}" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | awk '{printf "%s(%s) ", $2, $1}')
    racks=$(for n in $(k "${cluster}" get pods -n ml -l "${sel}" -o jsonpath='{.items[*].spec.nodeName}'); do
      k "${cluster}" get node "${n}" -o jsonpath='{.metadata.labels.cloud\.provider\.com/topology-block}/{.metadata.labels.cloud\.provider\.com/topology-rack}{"\n"}'
    done | sort -u | tr '\n' ' ')
    printf '%-18s %-8s %-9s %-28s %s\n' "${job}" "${cluster}" "${flavor}" "${racks:-(pods not created yet)}" "${nodes}"
    if [[ "${wl}" == jobset-* ]]; then
      # Where each of the JobSet's Jobs ran: its pods by job index.
      k "${cluster}" get pods -n ml -l "strata.dev/workload=${wl}" \
        -o jsonpath='{range .items[*]}{.metadata.labels.jobset\.sigs\.k8s\.io/replicatedjob-name}-{.metadata.labels.jobset\.sigs\.k8s\.io/job-index} {.spec.nodeName}{"\n"}{end}' |
        sort | uniq -c | awk '{printf "%-18s %-8s %-9s %-28s %s(%s)\n", "  Job " $2, "", "", "", $3, $1}'
    fi
  done
  # The LeaderWorkerSet's groups and the MPIJob's pods, by role, on the
  # worker each went to.
  local w
  for w in "${WORKERS[@]}"; do
    k "${w}" get pods -n ml -l leaderworkerset.sigs.k8s.io/name \
      -o jsonpath='{range .items[*]}{"lws/"}{.metadata.labels.leaderworkerset\.sigs\.k8s\.io/name}{" group "}{.metadata.labels.leaderworkerset\.sigs\.k8s\.io/group-index}{" "}{.spec.nodeName}{"\n"}{end}' 2>/dev/null |
      sort | uniq -c | awk -v w="${w}" '{printf "%-18s %-8s %-9s %-28s %s(%s)\n", $2 " " $3 " " $4, w, "", "", $5, $1}'
    k "${w}" get pods -n ml -l training.kubeflow.org/job-role \
      -o jsonpath='{range .items[*]}{"mpijob/"}{.metadata.labels.training\.kubeflow\.org/job-name}{" "}{.metadata.labels.training\.kubeflow\.org/job-role}{" "}{.spec.nodeName}{"\n"}{end}' 2>/dev/null |
      sort | uniq -c | awk -v w="${w}" '{printf "%-18s %-8s %-9s %-28s %s(%s)\n", $2 " " $3, w, "", "", $4, $1}'
  done
  printf '\n'
  k hub get workerclusters
  if [[ -x "${ROOT}/bin/kubectl-strata" ]] && "${ROOT}/bin/kubectl-strata" --help 2>/dev/null | grep -q clusters; then
    printf '\n'
    "${ROOT}/bin/kubectl-strata" clusters --kubeconfig "$(kc hub)" || true
  fi
  cat <<EOM

The fleet keeps running. Look around:
  kubectl --kubeconfig .demo/hub.kubeconfig get jobs,workloads -n ml     # the hub's view
  kubectl --kubeconfig .demo/west.kubeconfig get jobs,pods -n ml -o wide # a worker's
  logs: .demo/hub.log .demo/west.log .demo/east.log, and .demo/{jobset,lws,mpi-operator}-{west,east}.log
Offline, the same question: go run ./pkg/cmd/kubectl-strata simulate \\
  --cluster west=docs/examples/fleet/west --cluster east=docs/examples/fleet/east -f docs/examples/fleet/hub
Remove it all: make demo-down

See the fleet in a browser (on this machine; Ctrl-C stops it):
  bin/kubectl-strata dashboard --kubeconfig .demo/hub.kubeconfig
EOM
}

if [[ "${1:-}" == "down" ]]; then
  down
  echo "demo removed"
  exit 0
fi

# Only what the demo runs (it runs every kind's controller).
"${ROOT}/hack/k8s-binaries.sh" etcd kubernetes kwok helm jobset mpi-operator lws
if running; then
  say "the demo is already running (make demo-down removes it)"
  results
  exit 0
fi
down
mkdir -p "${DEMO}" "${KWOK_WORKDIR}"
say "building strata-hub, strata-agent and kubectl-strata"
(cd "${ROOT}" && go build -o bin/strata-hub ./hub/cmd/strata-hub && go build -o bin/strata-agent ./agent/cmd/strata-agent \
  && go build -o bin/kubectl-strata ./pkg/cmd/kubectl-strata)

for c in "${CLUSTERS[@]}"; do
  say "creating the kwok cluster strata-demo-${c}"
  "${BIN}/kwokctl" create cluster --name "strata-demo-${c}" --runtime binary \
    --kube-apiserver-binary "${BIN}/kube-apiserver" \
    --kube-controller-manager-binary "${BIN}/kube-controller-manager" \
    --kube-scheduler-binary "${BIN}/kube-scheduler" \
    --kwok-controller-binary "${BIN}/kwok" --etcd-binary "${BIN}/etcd" \
    --kubeconfig "$(kc "${c}")" --wait 2m >"${DEMO}/kwokctl-${c}.log" 2>&1 || { cat "${DEMO}/kwokctl-${c}.log" >&2; exit 1; }
done

say "installing JobSet's CRD on every cluster and running its controller for west and east"
jobset_dir=$(cd "${ROOT}" && go mod download sigs.k8s.io/jobset && go list -m -f '{{.Dir}}' sigs.k8s.io/jobset)
for c in "${CLUSTERS[@]}"; do
  k "${c}" apply --server-side -f "${jobset_dir}/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" >/dev/null
  for _ in $(seq 60); do # until the API server serves JobSets
    k "${c}" get jobsets -A >/dev/null 2>&1 && break
    sleep 1
  done
done
for w in "${WORKERS[@]}"; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  config=$(cd "${ROOT}" && go run ./test/kwokcluster/jobset-webhooks --kubeconfig "$(kc "${w}")" --dir "${DEMO}/jobset-${w}" --port "${port}")
  "${BIN}/jobset" --kubeconfig "$(kc "${w}")" --config "${config}" --metrics-bind-address 0 \
    --health-probe-bind-address 127.0.0.1:0 >"${DEMO}/jobset-${w}.log" 2>&1 &
  echo $! >"${DEMO}/jobset-${w}.pid"
done

say "installing the LeaderWorkerSet and MPIJob CRDs on every cluster and running their controllers for west and east"
lws_dir=$(cd "${ROOT}" && go mod download sigs.k8s.io/lws && go list -m -f '{{.Dir}}' sigs.k8s.io/lws)
mpi_dir=$(cd "${ROOT}" && go mod download github.com/kubeflow/mpi-operator && go list -m -f '{{.Dir}}' github.com/kubeflow/mpi-operator)
for c in "${CLUSTERS[@]}"; do
  k "${c}" apply --server-side -f "${lws_dir}/config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml" >/dev/null
  k "${c}" apply --server-side -f "${mpi_dir}/manifests/base/kubeflow.org_mpijobs.yaml" >/dev/null
  for _ in $(seq 60); do # until the API server serves them
    k "${c}" get leaderworkersets,mpijobs -A >/dev/null 2>&1 && break
    sleep 1
  done
done
for w in "${WORKERS[@]}"; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  config=$(cd "${ROOT}" && go run ./test/kwokcluster/jobset-webhooks --controller lws --kubeconfig "$(kc "${w}")" --dir "${DEMO}/lws-${w}" --port "${port}")
  "${BIN}/lws" --kubeconfig "$(kc "${w}")" --config "${config}" >"${DEMO}/lws-${w}.log" 2>&1 &
  echo $! >"${DEMO}/lws-${w}.pid"
  "${BIN}/mpi-operator" --kubeconfig "$(kc "${w}")" >"${DEMO}/mpi-operator-${w}.log" 2>&1 &
  echo $! >"${DEMO}/mpi-operator-${w}.pid"
done

say "installing the strata-hub chart on hub, the strata-agent chart on west and east"
"${BIN}/helm" install strata-hub "${ROOT}/charts/strata-hub" --kubeconfig "$(kc hub)" \
  --namespace strata-system --create-namespace --set replicas=0 --wait >/dev/null
for w in "${WORKERS[@]}"; do
  "${BIN}/helm" install strata-agent "${ROOT}/charts/strata-agent" --kubeconfig "$(kc "${w}")" \
    --namespace strata-system --create-namespace --set replicas=0 --set hubAccess.onboarding=true --wait >/dev/null
done

for w in "${WORKERS[@]}"; do
  say "${w}: nodes, topology and queues of docs/examples/fleet/${w}; strata-agent with the chart's ServiceAccount"
  k "${w}" create namespace ml >/dev/null
  k "${w}" create namespace other-team >/dev/null
  k "${w}" apply -f "${ROOT}/docs/examples/fleet/${w}/cluster.yaml" >/dev/null
  k "${w}" apply -f - >/dev/null <<'YAML'
apiVersion: strata.dev/v1beta1
kind: ClusterQueue
metadata:
  name: training
spec:
  namespaceSelector: {}
  flavors:
  - name: tas-a100
---
apiVersion: strata.dev/v1beta1
kind: LocalQueue
metadata:
  name: training
  namespace: ml
spec:
  clusterQueue: training
YAML
  sa_kubeconfig "${w}" strata-agent "${DEMO}/${w}-agent.kubeconfig"
  start "${w}" "${ROOT}/bin/strata-agent" --kubeconfig "${DEMO}/${w}-agent.kubeconfig"
done
for w in "${WORKERS[@]}"; do
  k "${w}" wait --for=condition=Ready nodes --all --timeout=120s >/dev/null
done

say "registering west through a kubeconfig Secret (the agent chart's strata-hub-access identity)"
sa_kubeconfig west strata-hub-access "${DEMO}/west-hub-access.kubeconfig"
k hub -n strata-system create secret generic west-kubeconfig --from-file=kubeconfig="${DEMO}/west-hub-access.kubeconfig" >/dev/null
k hub apply -f - >/dev/null <<'YAML'
apiVersion: strata.dev/v1beta1
kind: WorkerCluster
metadata:
  name: west
spec:
  kubeConfigSecretRef:
    namespace: strata-system
    name: west-kubeconfig
  # A team onboarded on the hub (a namespace and a LocalQueue there) runs
  # here without anything made by hand: the hub creates its namespace and
  # LocalQueue, pointing at ClusterQueue training.
  onboarding:
    clusterQueue: training
YAML

say "registering east through a ClusterProfile, its token from an exec credential plugin"
inventory=$(cd "${ROOT}" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-inventory-api)
k hub apply -f "${inventory}/config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml" >/dev/null
k hub wait --for=condition=Established crd/clusterprofiles.multicluster.x-k8s.io --timeout=60s >/dev/null
k east create token strata-hub-access --namespace strata-system --duration 24h >"${DEMO}/east-hub-access.token"
cat >"${DEMO}/credential-plugin" <<EOF
#!/bin/sh
# An exec credential plugin as a cloud provider's would be: it answers with
# a token for the cluster (here, from a file).
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "\$(cat "${DEMO}/east-hub-access.token")"
EOF
chmod +x "${DEMO}/credential-plugin"
server=$(k east config view --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(k east config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
if [[ -z "${ca}" ]]; then
  ca=$(base64 -w0 <"$(k east config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')")
fi
k hub apply -f - >/dev/null <<YAML
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ClusterProfile
metadata:
  name: east
  namespace: strata-system
spec:
  displayName: east
  clusterManager:
    name: strata-demo
---
apiVersion: strata.dev/v1beta1
kind: WorkerCluster
metadata:
  name: east
spec:
  clusterProfileRef:
    namespace: strata-system
    name: east
  onboarding:
    clusterQueue: training
YAML
k hub patch clusterprofile east -n strata-system --subresource status --type merge -p "{\"status\":{\"accessProviders\":[{\"name\":\"${PROVIDER}\",\"cluster\":{\"server\":\"${server}\",\"certificate-authority-data\":\"${ca}\"}}]}}" >/dev/null

say "starting strata-hub with the chart's ServiceAccount"
cat >"${DEMO}/hub.yaml" <<EOF
apiVersion: config.strata.dev/v1beta1
kind: HubConfiguration
clusterProfile:
  accessProviders:
  - name: ${PROVIDER}
    execConfig:
      command: ${DEMO}/credential-plugin
      apiVersion: client.authentication.k8s.io/v1
EOF
sa_kubeconfig hub strata-hub "${DEMO}/hub-strata-hub.kubeconfig"
start hub "${ROOT}/bin/strata-hub" --kubeconfig "${DEMO}/hub-strata-hub.kubeconfig" --config "${DEMO}/hub.yaml"
for w in "${WORKERS[@]}"; do
  if ! k hub wait --for=condition=SummariesFresh "workercluster/${w}" --timeout=120s >/dev/null; then
    k hub get workercluster "${w}" -o yaml >&2
    echo "worker ${w} did not connect; see .demo/hub.log" >&2
    exit 1
  fi
done

say "submitting the Jobs and the JobSet of docs/examples/fleet/hub, the LeaderWorkerSet and the MPIJob of docs/examples/fleet/hub-kinds to the hub"
k hub create namespace ml >/dev/null
k hub apply -f "${ROOT}/docs/examples/fleet/hub/queue.yaml" >/dev/null
k hub apply -f "${ROOT}/docs/examples/fleet/hub/jobs.yaml"
k hub apply -f "${ROOT}/docs/examples/fleet/hub/jobset.yaml"
k hub apply -f "${ROOT}/docs/examples/fleet/hub-kinds/"
# At least one Workload per object (a LeaderWorkerSet may have one per
# group); every one decided.
objects=$(k hub get jobs,jobsets,leaderworkersets,mpijobs -n ml --no-headers | wc -l)
for _ in $(seq 120); do
  total=$(k hub get workloads -n ml --no-headers 2>/dev/null | wc -l)
  decided=$(k hub get workloads -n ml -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Admitted")].reason}{"\n"}{end}' \
    | grep -c -e Admitted -e Pending -e NoClusterFits || true)
  [[ "${total}" -ge "${objects}" && "${decided}" -ge "${total}" ]] && break
  sleep 1
done
# The workers' controllers create the admitted jobs' pods: the
# LeaderWorkerSet's 2 groups of 3, the MPIJob's launcher and 2 workers.
for _ in $(seq 60); do
  pods=0
  for w in "${WORKERS[@]}"; do
    pods=$(( pods + $(k "${w}" get pods -n ml -l 'leaderworkerset.sigs.k8s.io/name' --no-headers 2>/dev/null | wc -l) \
      + $(k "${w}" get pods -n ml -l 'training.kubeflow.org/job-role' --no-headers 2>/dev/null | wc -l) ))
  done
  [[ "${pods}" -ge 9 ]] && break
  sleep 1
done
results
