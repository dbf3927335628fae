#!/usr/bin/env bash
# Builds the Kubernetes binaries Strata's integration and e2e tests run on —
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok,
# kwokctl, helm, JobSet's controller and the MPI operator's — from source through the Go module proxy. Nothing prebuilt is
# downloaded from anywhere.
#
# Binaries are kept in a version-keyed cache outside the work tree
# (STRATA_CACHE_DIR, default: $XDG_CACHE_HOME/strata or ~/.cache/strata), so a
# fresh clone reuses what an earlier clone built. The repository's bin/k8s
# (STRATA_K8S_BIN_DIR overrides it) is a directory of symlinks into that cache.
# Running the script again is cheap: every binary that is already in the cache
# is skipped.
#
# Runs may share the cache at once (two clones, parallel make targets, CI beside
# a developer). Each cache entry NAME-VERSION is built under an exclusive flock
# on ${CACHE_DIR}/.locks/NAME-VERSION.lock; a run that waited for the lock looks
# again and only links what the other run built. A build happens in a private
# directory (mktemp -d under ${CACHE_DIR}/.build, removed when the build ends,
# failed or interrupted too) and its binaries go into place by one rename of their
# directory onto the entry's path, so an entry is never seen half-built, and a
# complete entry is never removed or replaced while another run may use it.
# The symlinks are replaced by rename as well.
#
# Usage: hack/k8s-binaries.sh [component ...]
#   components: kubernetes etcd kwok helm jobset mpi-operator lws (default: all)
set -euo pipefail

KUBERNETES_VERSION=${KUBERNETES_VERSION:-v1.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
# JobSet's controller, for the e2e's and the demo's workers: the version go.mod
# pins for its API.
JOBSET_VERSION=${JOBSET_VERSION:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && awk '$1 == "sigs.k8s.io/jobset" {print $2}' go.mod)}
MPI_OPERATOR_VERSION=${MPI_OPERATOR_VERSION:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && awk '$1 == "github.com/kubeflow/mpi-operator" {print $2}' go.mod)}
LWS_VERSION=${LWS_VERSION:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && awk '$1 == "sigs.k8s.io/lws" {print $2}' go.mod)}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE_DIR=${STRATA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata}
BIN_DIR=${STRATA_K8S_BIN_DIR:-${ROOT}/bin/k8s}
GO=${GO:-go}

log() { printf '[k8s-binaries] %s\n' "$*" >&2; }

# have DIR NAME...: true when every NAME is an executable in DIR.
have() {
  local dir=$1; shift
  local n
  for n in "$@"; do [[ -x "${dir}/${n}" ]] || return 1; done
}

# link DIR NAME...: expose cached binaries under BIN_DIR. Each symlink is made
# under a name of this (sub)shell's own and renamed over the old one, so that runs
# linking the same names at once replace each other's links without failing.
link() {
  local dir=$1; shift
  mkdir -p "${BIN_DIR}"
  local n tmp
  for n in "$@"; do
    tmp=${BIN_DIR}/.${n}.${BASHPID}.tmp
    ln -sfn "${dir}/${n}" "${tmp}"
    mv -fT "${tmp}" "${BIN_DIR}/${n}"
  done
}

# lock_entry ENTRY: take the exclusive lock on cache entry ENTRY (NAME-VERSION),
# waiting for a run that holds it; the lock is held until the calling (sub)shell
# exits. Lock files are never removed: a run could hold one while another makes
# a new file of the same name and locks that.
lock_entry() {
  mkdir -p "${CACHE_DIR}/.locks"
  exec 9>>"${CACHE_DIR}/.locks/$1.lock"
  if ! flock -n 9; then
    log "waiting for another run building $1"
    flock 9
  fi
}

# private_dir ENTRY: make a directory for this run's build of ENTRY under
# ${CACHE_DIR}/.build, on the cache's file system so that what is built in it
# can be renamed into the cache, and print its path.
private_dir() {
  mkdir -p "${CACHE_DIR}/.build"
  mktemp -d "${CACHE_DIR}/.build/$1.XXXXXX"
}

# scratch_module DIR MODULE: a throwaway Go module to build pinned binaries in.
scratch_module() {
  local dir=$1 mod=$2
  mkdir -p "${dir}"
  (cd "${dir}" && GOFLAGS=-mod=mod "${GO}" mod init "${mod}" >/dev/null 2>&1)
}

# install_entry TMP ENTRY NAME...: put TMP/out, which must hold every NAME, into
# place as cache entry ENTRY with one rename (of a directory onto a path that
# does not exist). Should ENTRY exist complete already (put there by a run that
# took no lock), it is kept and TMP/out is dropped with TMP. An incomplete one,
# left by a run that died mid-way before builds took locks, is moved into TMP
# first, to go with it.
install_entry() {
  local tmp=$1 entry=${CACHE_DIR}/$2; shift 2
  have "${tmp}/out" "$@" || { log "the build of ${entry##*/} made no $*"; return 1; }
  chmod 0755 "${tmp}/out" # mktemp -d makes it 0700
  mv -T "${tmp}/out" "${entry}" 2>/dev/null && return
  if have "${entry}" "$@"; then
    log "keeping the ${entry##*/} another run put in the cache"
    return
  fi
  log "replacing the incomplete ${entry}"
  mv -T "${entry}" "${tmp}/stale"
  mv -T "${tmp}/out" "${entry}"
}

# cached NAME VERSION BIN... -- BUILDER [ARG...]: make sure cache entry
# NAME-VERSION holds every BIN, and link them into BIN_DIR. A missing entry is
# built under its lock: BUILDER WORK OUT [ARG...] runs in a subshell and builds
# every BIN into OUT, with WORK a fresh scratch Go module; both are in a private
# directory that goes when the subshell exits.
cached() {
  local name=$1 version=$2; shift 2
  local entry=${name}-${version} bins=()
  while [[ $1 != -- ]]; do bins+=("$1"); shift; done
  shift
  if ! have "${CACHE_DIR}/${entry}" "${bins[@]}"; then
    (
      lock_entry "${entry}"
      # Another run may have built it while this one waited.
      have "${CACHE_DIR}/${entry}" "${bins[@]}" && exit 0
      trap 'exit 1' HUP INT TERM # exit through the EXIT trap
      local tmp
      tmp=$(private_dir "${entry}")
      # shellcheck disable=SC2064 # expand now: a builder may have its own tmp
      trap "rm -rf $(printf %q "${tmp}")" EXIT
      scratch_module "${tmp}/src" "strata.dev/build/${name}"
      mkdir "${tmp}/out"
      "$1" "${tmp}/src" "${tmp}/out" "${@:2}"
      install_entry "${tmp}" "${entry}" "${bins[@]}"
    )
  fi
  link "${CACHE_DIR}/${entry}" "${bins[@]}"
}

build_kubernetes() {
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  cached kubernetes "${KUBERNETES_VERSION}" "${bins[@]}" -- compile_kubernetes "${bins[@]}"
}

# compile_kubernetes WORK OUT BIN...: a builder for cached.
compile_kubernetes() {
  local work=$1 out=$2; shift 2
  local bins=("$@")
  log "building Kubernetes ${KUBERNETES_VERSION} (the longest: about 20 minutes cold on 2 cores, beside the other builds)"
  cd "${work}"
  # k8s.io/kubernetes replaces its staging modules with local paths; a module that
  # depends on it has to point each of them at the matching published version.
  local kmod
  kmod=$(GOFLAGS=-mod=mod "${GO}" mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [[ -f "${kmod}" ]] || { log "cannot download k8s.io/kubernetes@${KUBERNETES_VERSION}"; exit 1; }
  local staging="v0.${KUBERNETES_VERSION#v1.}"
  local replaces
  replaces=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*$#\1#p' "${kmod}")
  [[ -n "${replaces}" ]] || { log "found no staging replaces in ${kmod}"; exit 1; }
  local m
  for m in ${replaces}; do
    GOFLAGS=-mod=mod "${GO}" mod edit -replace "${m}=${m}@${staging}"
  done
  GOFLAGS=-mod=mod "${GO}" mod edit -require "k8s.io/kubernetes@${KUBERNETES_VERSION}"
  local pkgs=() b
  for b in "${bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${b}"); done
  GOFLAGS=-mod=mod "${GO}" get "${pkgs[@]/%/@${KUBERNETES_VERSION}}"
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local ldflags="-s -w"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${pkg}.gitVersion=${KUBERNETES_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
    ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${date}"
  done
  for b in "${bins[@]}"; do
    log "  go build ${b}"
    CGO_ENABLED=0 GOFLAGS=-mod=mod "${GO}" build -trimpath -ldflags "${ldflags}" -o "${out}/${b}" "k8s.io/kubernetes/cmd/${b}"
  done
}

build_etcd() {
  cached etcd "${ETCD_VERSION}" etcd -- compile_etcd
}

# compile_etcd WORK OUT: a builder for cached.
compile_etcd() {
  local work=$1 out=$2
  log "building etcd ${ETCD_VERSION}"
  cat >"${work}/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  cd "${work}"
  GOFLAGS=-mod=mod "${GO}" get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  CGO_ENABLED=0 GOFLAGS=-mod=mod "${GO}" build -trimpath -ldflags "-s -w" -o "${out}/etcd" .
}

# build_module NAME VERSION MODULE PKG...: build main packages of a pinned module
# inside a scratch module (go install pkg@version refuses modules with replaces).
build_module() {
  local name=$1 version=$2 module=$3; shift 3
  local bins=()
  local p
  for p in "$@"; do bins+=("$(basename "${p}")"); done
  cached "${name}" "${version}" "${bins[@]}" -- compile_module "${name}" "${version}" "${module}" "$@"
}

# compile_module WORK OUT NAME VERSION MODULE PKG...: a builder for cached.
compile_module() {
  local work=$1 out=$2 name=$3 version=$4 module=$5; shift 5
  log "building ${name} ${version}"
  cd "${work}"
  # Reuse the module's own replace directives, if it has any.
  local gomod
  gomod=$(GOFLAGS=-mod=mod "${GO}" mod download -json "${module}@${version}" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  local r
  while read -r r; do
    [[ -n "${r}" ]] && GOFLAGS=-mod=mod "${GO}" mod edit -replace "${r}"
  done < <(awk '
    /^replace \(/ {inblock=1; next}
    inblock && /^\)/ {inblock=0; next}
    inblock && /=>/ {gsub(/[[:space:]]+/, " "); sub(/^ /, ""); print; next}
    /^replace .*=>/ {sub(/^replace /, ""); print}
  ' "${gomod}" | awk '$0 !~ /=> \.\.?\// {
      # "a v1 => b v2" or "a => b v2"  ->  a[@v1]=b@v2
      n = split($0, f, " ")
      if (n == 5) print f[1] "@" f[2] "=" f[4] "@" f[5]
      else if (n == 4) print f[1] "=" f[3] "@" f[4]
    }')
  GOFLAGS=-mod=mod "${GO}" mod edit -require "${module}@${version}"
  GOFLAGS=-mod=mod "${GO}" get "${@/%/@${version}}"
  local p
  for p in "$@"; do
    log "  go build $(basename "${p}")"
    CGO_ENABLED=0 GOFLAGS=-mod=mod "${GO}" build -trimpath -ldflags "-s -w" -o "${out}/$(basename "${p}")" "${p}"
  done
}

build_kwok() {
  build_module kwok "${KWOK_VERSION}" sigs.k8s.io/kwok \
    sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
}

build_jobset() {
  build_module jobset "${JOBSET_VERSION}" sigs.k8s.io/jobset sigs.k8s.io/jobset
}

# The MPI operator's controller (kubeflow.org/v2beta1 MPIJobs), for the
# e2e's workers, at the version go.mod requires for its API. Its own main
# serves health checks on :8080 of every interface and always runs a leader
# election: this small main runs the same controller (its package, as its
# main builds it) without either, with --kubeconfig and --threadiness.
build_mpi_operator() {
  cached mpi-operator "${MPI_OPERATOR_VERSION}" mpi-operator -- compile_mpi_operator
}

# compile_mpi_operator WORK OUT: a builder for cached.
compile_mpi_operator() {
  local work=$1 out=$2
  log "building the MPI operator's controller ${MPI_OPERATOR_VERSION}"
  cat >"${work}/main.go" <<'EOF'
// Command mpi-operator runs the MPI operator's MPIJob controller against
// one cluster, without a health server or leader election.
package main

import (
	"flag"
	"os"
	"os/signal"
	"syscall"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	kubeflowscheme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
	informers "github.com/kubeflow/mpi-operator/pkg/client/informers/externalversions"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	threadiness := flag.Int("threadiness", 2, "MPIJobs reconciled at once")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	kubeClient := kubernetes.NewForConfigOrDie(cfg)
	mpiClient := clientset.NewForConfigOrDie(cfg)
	if err := kubeflowscheme.AddToScheme(clientgoscheme.Scheme); err != nil {
		klog.Fatalf("scheme: %v", err)
	}
	kubeInformers := kubeinformers.NewSharedInformerFactory(kubeClient, 0)
	mpiInformers := informers.NewSharedInformerFactory(mpiClient, 0)
	c, err := controller.NewMPIJobController(kubeClient, mpiClient, nil, nil,
		kubeInformers.Core().V1().ConfigMaps(), kubeInformers.Core().V1().Secrets(), kubeInformers.Core().V1().Services(),
		kubeInformers.Batch().V1().Jobs(), kubeInformers.Core().V1().Pods(), kubeInformers.Scheduling().V1().PriorityClasses(),
		mpiInformers.Kubeflow().V2beta1().MPIJobs(), "", "")
	if err != nil {
		klog.Fatalf("controller: %v", err)
	}
	stop := make(chan struct{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-signals; close(stop) }()
	kubeInformers.Start(stop)
	mpiInformers.Start(stop)
	if err := c.Run(*threadiness, stop); err != nil {
		klog.Fatalf("controller: %v", err)
	}
}
EOF
  cd "${work}"
  GOFLAGS=-mod=mod "${GO}" get "github.com/kubeflow/mpi-operator@${MPI_OPERATOR_VERSION}"
  GOFLAGS=-mod=mod "${GO}" mod tidy
  CGO_ENABLED=0 GOFLAGS=-mod=mod "${GO}" build -trimpath -ldflags "-s -w" -o "${out}/mpi-operator" .
}

# The LeaderWorkerSet controller (its module's cmd, webhooks included), for
# the e2e's workers, at the version go.mod requires for its API; built as
# bin/k8s/lws.
build_lws() {
  cached lws "${LWS_VERSION}" lws -- compile_lws
}

# compile_lws WORK OUT: a builder for cached.
compile_lws() {
  local work=$1 out=$2
  log "building the LeaderWorkerSet controller ${LWS_VERSION}"
  cd "${work}"
  GOFLAGS=-mod=mod "${GO}" get "sigs.k8s.io/lws@${LWS_VERSION}"
  CGO_ENABLED=0 GOFLAGS=-mod=mod "${GO}" build -trimpath -ldflags "-s -w" -o "${out}/lws" sigs.k8s.io/lws/cmd
}

build_helm() {
  build_module helm "${HELM_VERSION}" helm.sh/helm/v3 helm.sh/helm/v3/cmd/helm
}

components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=(kubernetes etcd kwok helm jobset mpi-operator lws)
for c in "${components[@]}"; do
  case "${c}" in
    kubernetes | etcd | kwok | helm | jobset | mpi-operator | lws) ;;
    *) log "unknown component ${c} (want: kubernetes etcd kwok helm jobset mpi-operator lws)"; exit 2 ;;
  esac
done
mkdir -p "${CACHE_DIR}"
# Components that are not cached yet build side by side, at most
# STRATA_BUILD_JOBS at once (default: the core count): a Go build does not
# keep every core busy all the time (module downloads, linking), and the
# longest, Kubernetes, goes first. Each writes only its own cache entry and
# symlinks, under its own lock. Every build runs to its end; the script fails
# if any failed.
max_jobs=${STRATA_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
declare -A building=()
failed=()
reap() {
  local pid status=0
  wait -n -p pid || status=$?
  [[ ${status} -eq 0 ]] || { log "building ${building[${pid}]} failed (exit ${status})"; failed+=("${building[${pid}]}"); }
  unset "building[${pid}]"
}
for c in "${components[@]}"; do
  while [[ ${#building[@]} -ge ${max_jobs} ]]; do reap; done
  ( "build_${c//-/_}" ) &
  building[$!]=${c}
done
while [[ ${#building[@]} -gt 0 ]]; do reap; done
if [[ ${#failed[@]} -gt 0 ]]; then
  log "failed: ${failed[*]}"
  exit 1
fi
log "binaries ready in ${BIN_DIR} -> ${CACHE_DIR}"
