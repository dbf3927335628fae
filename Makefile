# Strata — see README.md. Every target installs what it needs.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
K8S_BIN := $(BIN)/k8s
GO ?= go
TOOLS_MOD := $(ROOT)/hack/tools/go.mod
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X strata.dev/strata/pkg/version.Version=$(VERSION)

# Label filters for the ginkgo suites, e.g. make test-integration GINKGO_LABELS=smoke
GINKGO_LABELS ?=
# (ginkgo flags go only to packages with ginkgo suites: a plain go test
# package, such as test/integration/charts or k8sbinaries, refuses flags it
# does not know.)
GINKGO_ARGS := $(if $(GINKGO_LABELS),-ginkgo.label-filter='$(GINKGO_LABELS)')
# No colours in CI logs; ginkgo reads this from the environment.
ifneq ($(CI),)
export GINKGO_NO_COLOR := TRUE
endif

HUB_CRDS := $(ROOT)/charts/strata-hub/crds
AGENT_CRDS := $(ROOT)/charts/strata-agent/crds
# The hub holds every kind; the agent all but WorkerCluster.
AGENT_KINDS := topologies resourceflavors clusterqueues localqueues workloads capacitysummaries workloadpriorityclasses cohorts admissionchecks provisioningrequestconfigs

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build strata-agent, strata-hub and kubectl-strata into bin/.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/strata-agent ./agent/cmd/strata-agent
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/strata-hub ./hub/cmd/strata-hub
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-strata ./pkg/cmd/kubectl-strata

##@ Images (docs/images.md)

# The images' architecture; ARCH=arm64 cross-builds.
ARCH ?= $(shell $(GO) env GOARCH)
# The image tag: VERSION without a leading "v", so a build at the tag v0.1.0
# is tagged 0.1.0, the charts' appVersion and so their default image tag.
IMAGE_TAG ?= $(patsubst v%,%,$(VERSION))
IMAGE_REGISTRY = $(or $(REGISTRY),ghcr.io/strata-dev)
IMAGE_SOURCE ?= https://github.com/strata-dev/strata
# The images' creation time: the last commit's, so a rebuild of the same
# commit gives the same image digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_BINARIES := strata-agent=./agent/cmd/strata-agent strata-hub=./hub/cmd/strata-hub kubectl-strata=./pkg/cmd/kubectl-strata
IMAGES_DIR := $(BIN)/images
IMAGE_PUSH :=

.PHONY: images
images: ## OCI images of the three binaries into bin/images/ (ARCH=amd64|arm64, no Docker needed).
	mkdir -p $(BIN)/linux_$(ARCH) $(IMAGES_DIR)
	for b in $(IMAGE_BINARIES); do \
		name=$${b%%=*}; pkg=$${b#*=}; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/linux_$(ARCH)/$$name $$pkg; \
		$(GO) run ./hack/image --binary $(BIN)/linux_$(ARCH)/$$name --arch $(ARCH) \
			--registry $(IMAGE_REGISTRY) --version $(IMAGE_TAG) --source $(IMAGE_SOURCE) \
			--revision "$(REVISION)" --source-date-epoch $(SOURCE_DATE_EPOCH) \
			--output $(IMAGES_DIR)/$$name-$(IMAGE_TAG)-$(ARCH).tar $(IMAGE_PUSH); \
	done
	ls -l $(IMAGES_DIR)

.PHONY: images-push
images-push: ## The same, and push them to REGISTRY (required), with the credentials of ~/.docker/config.json.
	@if [ -z "$(REGISTRY)" ]; then echo "images-push needs REGISTRY, e.g. make images-push REGISTRY=ghcr.io/you"; exit 1; fi
	$(MAKE) images IMAGE_PUSH=--push

##@ Generated code

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC into the charts.
	rm -rf $(HUB_CRDS) $(AGENT_CRDS)
	$(CONTROLLER_GEN) crd paths=./api/v1beta1/... output:crd:artifacts:config=$(HUB_CRDS)
	mkdir -p $(AGENT_CRDS)
	for k in $(AGENT_KINDS); do cp $(HUB_CRDS)/strata.dev_$$k.yaml $(AGENT_CRDS)/; done
	# The agent's permissions on the workload kinds are in the kinds' packages (pkg/jobs/*), the hub's in hub/.
	$(CONTROLLER_GEN) rbac:roleName=strata-agent paths="./agent/...;./pkg/jobs/..." output:rbac:artifacts:config=charts/strata-agent/templates/rbac
	$(CONTROLLER_GEN) rbac:roleName=strata-hub paths=./hub/... output:rbac:artifacts:config=charts/strata-hub/templates/rbac
	# The hub's Role (Secrets in its own namespace) goes where the chart is installed.
	sed -i 's/namespace: strata-system/namespace: {{ .Release.Namespace }}/' charts/strata-hub/templates/rbac/role.yaml

.PHONY: docs
docs: ## Generate docs/reference (the CRDs' fields, the configuration files' fields, the charts' values) from their sources.
	$(GO) run ./hack/docgen

.PHONY: verify
verify: generate manifests docs ## Regenerate everything and fail if the tree changed.
	$(GO) mod tidy
	cd hack/tools && $(GO) mod tidy
	@if [ -n "$$(git status --porcelain -- . )" ]; then \
		echo "Generated files are out of date; run 'make generate manifests docs' and 'go mod tidy', then commit:"; \
		git status --porcelain -- .; git --no-pager diff --stat; exit 1; fi

##@ Checks

.PHONY: helm-lint
helm-lint: ## Lint and render both charts with the real helm.
	hack/k8s-binaries.sh helm
	$(K8S_BIN)/helm lint charts/strata-agent charts/strata-hub
	for c in strata-agent strata-hub; do $(K8S_BIN)/helm template $$c charts/$$c --kube-version 1.37.1 >/dev/null; done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint with .golangci.yml.
	$(GOLANGCI_LINT) run ./...

.PHONY: test
test: test-unit test-integration bench-smoke ## Unit and integration tests, and every benchmark once at tiny sizes (builds the Kubernetes binaries on first use).

.PHONY: test-unit
test-unit: ## Unit tests (no servers), the kind e2e provider's offline checks and the benchmarks' parsers.
	$(GO) test -race $$($(GO) list ./... | grep -v /test/) ./test/kindcluster/... ./test/perf/

.PHONY: test-integration
test-integration: k8s-binaries ## Integration suites on real kube-apiservers.
	KUBEBUILDER_ASSETS=$(K8S_BIN) STRATA_K8S_BIN=$(K8S_BIN) $(GO) test $$($(GO) list ./test/integration/... | grep -v -e /charts$$ -e /framework$$ -e /k8sbinaries$$) -timeout 30m -count=1 -v $(GINKGO_ARGS)
	STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/integration/charts/ -count=1 -v
	$(GO) test ./test/integration/k8sbinaries/ -count=1 -v

.PHONY: test-e2e
test-e2e: k8s-binaries ## kwok e2e suite: real control plane, simulated nodes, the agent chart.
	STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/e2e/... -timeout 30m -count=1 -v $(GINKGO_ARGS)

.PHONY: test-browser
test-browser: k8s-binaries ## kubectl strata dashboard in headless Chromium (installs Debian's chromium package when missing).
	hack/chromium.sh
	KUBEBUILDER_ASSETS=$(K8S_BIN) STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/browser/ -count=1 -v

.PHONY: dashboard-screenshots
dashboard-screenshots: k8s-binaries ## Take docs/images/dashboard-*.png with the browser test.
	hack/chromium.sh
	STRATA_SCREENSHOTS=$(CURDIR)/docs/images KUBEBUILDER_ASSETS=$(K8S_BIN) STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/browser/ -count=1

.PHONY: test-e2e-kind
test-e2e-kind: ## The same e2e specs on kind clusters made through kind's Go API (needs Docker; not run by CI).
	hack/e2e-kind.sh

.PHONY: test-e2e-kind-down
test-e2e-kind-down: ## Delete the kind e2e clusters (after KEEP=1).
	$(GO) run ./test/kindcluster/kind-down

.PHONY: bench
bench: ## Benchmarks (go test -bench), see docs/performance.md.
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v /test/)

.PHONY: bench-agent
bench-agent: k8s-binaries ## Agent throughput and latency with 5,000 nodes, the agent alone on an API server (two minutes).
	STRATA_PERF_CLUSTER=apiserver STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/perf/ -run '^$$' -bench BenchmarkAgent -benchtime 1x -timeout 60m -v

.PHONY: bench-agent-kwok
bench-agent-kwok: k8s-binaries ## The same on a whole kwok cluster of 5,000 nodes sharing the machine (five minutes).
	STRATA_PERF_CLUSTER=kwok STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/perf/ -run '^$$' -bench BenchmarkAgent -benchtime 1x -timeout 60m -v

.PHONY: bench-hub
bench-hub: k8s-binaries ## The hub and three workers (agents in-process), 1,000 Jobs: throughput, latency, CPU and API writes per Job (two minutes).
	STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/perf/ -run '^$$' -bench '^BenchmarkHub$$' -benchtime 1x -timeout 60m -v

.PHONY: bench-hub-backlog
bench-hub-backlog: k8s-binaries ## The hub (its own process) and eight workers with a backlog of 20,000 and then 50,000 GPU Jobs completing continuously: admissions/s, pass time, memory (twenty minutes).
	STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/perf/ -run '^$$' -bench BenchmarkHubBacklog -benchtime 1x -timeout 90m -v

.PHONY: bench-hub-pass
bench-hub-pass: k8s-binaries ## One dispatch pass over 50,000 pending Workloads and 16 full workers (the queues on an API server; a minute).
	STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./hub/dispatch/ -run '^$$' -bench BenchmarkPass -benchtime 10x -count 3 -timeout 30m

.PHONY: bench-hotswap
bench-hotswap: k8s-binaries ## Hot swap: node failure to new assignment, on a real API server (a minute).
	STRATA_K8S_BIN=$(K8S_BIN) $(GO) test ./test/perf/ -run '^$$' -bench BenchmarkHotSwap -benchtime 1x -timeout 30m -v

# Every bench target once at tiny sizes, so that a benchmark whose setup
# drifts from the product fails here instead of reporting a wrong number.
# Each benchmark checks that it measured the path it claims (hot swap: the
# replacement came from pod termination, not from notReadyDelay).
PERF_ENV := STRATA_K8S_BIN=$(K8S_BIN)
.PHONY: bench-smoke
bench-smoke: k8s-binaries ## Every benchmark once at tiny sizes (part of make test, a few minutes).
	$(PERF_ENV) STRATA_PASS_PENDING=2000 STRATA_PASS_WORKERS=4 $(GO) test -run '^$$' -bench . -benchtime 1x -short $$($(GO) list ./... | grep -v /test/)
	$(PERF_ENV) STRATA_PERF_CLUSTER=apiserver STRATA_PERF_NODES=64 STRATA_PERF_JOBS=12 STRATA_PERF_LATENCY_JOBS=4 \
		$(GO) test ./test/perf/ -run '^$$' -bench BenchmarkAgent -benchtime 1x -timeout 10m -count=1
	$(PERF_ENV) STRATA_PERF_CLUSTER=kwok STRATA_PERF_NODES=32 STRATA_PERF_JOBS=8 STRATA_PERF_LATENCY_JOBS=4 \
		$(GO) test ./test/perf/ -run '^$$' -bench BenchmarkAgent -benchtime 1x -timeout 10m -count=1
	$(PERF_ENV) STRATA_HUB_JOBS=24 STRATA_HUB_CREATORS=2 STRATA_HUB_TIMEOUT_S=300 \
		$(GO) test ./test/perf/ -run '^$$' -bench '^BenchmarkHub$$' -benchtime 1x -timeout 10m -count=1
	$(PERF_ENV) STRATA_BACKLOG_WORKERS=2 STRATA_BACKLOG_BLOCKS=1 STRATA_BACKLOG_JOBS=60 STRATA_BACKLOG_MORE_JOBS=20 \
		STRATA_BACKLOG_SECONDS=30 STRATA_BACKLOG_SECONDS2=5 STRATA_BACKLOG_TIME_SCALE=600 \
		$(GO) test ./test/perf/ -run '^$$' -bench BenchmarkHubBacklog -benchtime 1x -timeout 10m -count=1
	$(PERF_ENV) STRATA_HOTSWAP_FAILURES=3 \
		$(GO) test ./test/perf/ -run '^$$' -bench BenchmarkHotSwap -benchtime 1x -timeout 10m -count=1

# Every fuzz target, as package:target. Their seed corpora (and inputs a
# run found, kept in testdata/fuzz) run as plain tests in make test.
FUZZ_TARGETS := ./pkg/tas:FuzzDecode ./pkg/tas:FuzzSummarySnapshot \
	./pkg/workload:FuzzParseTopologyRequest ./pkg/workload:FuzzTopologyHints ./pkg/workload:FuzzJobPodSets \
	./pkg/jobs/kinds:FuzzJobSizes ./pkg/jobs/kinds:FuzzJobSetSizes ./pkg/jobs/kinds:FuzzMPIJobSizes \
	./pkg/jobs/kinds:FuzzLeaderWorkerSetSizes \
	./hub/dispatch:FuzzCopyOf
FUZZTIME ?= 60s
.PHONY: fuzz
fuzz: ## Fuzz every target for FUZZTIME each (default 60s).
	for t in $(FUZZ_TARGETS); do \
		$(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

.PHONY: fuzz-long
fuzz-long: ## Fuzz every target for 5 minutes each (about half an hour).
	$(MAKE) fuzz FUZZTIME=5m

.PHONY: demo
demo: ## A hub and two kwok workers (charts, hub, agents) and the sample Jobs; prints where each landed.
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Remove the demo's clusters and processes.
	hack/demo.sh down

##@ Tools

.PHONY: k8s-binaries
k8s-binaries: ## Build kube-apiserver, controller-manager, scheduler, kubectl, etcd, kwok, helm, JobSet and the MPI operator (cached).
	hack/k8s-binaries.sh

$(CONTROLLER_GEN): $(TOOLS_MOD)
	cd hack/tools && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(GOLANGCI_LINT): $(TOOLS_MOD)
	cd hack/tools && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: clean
clean: ## Remove bin/ (the Kubernetes binary cache outside the tree stays).
	rm -rf $(BIN)
