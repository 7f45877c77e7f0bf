# leasetune: see README.md. Every target works on a fresh clone; tools that
# are built from source (kube-apiserver, etcd) come from committed tools
# modules and are cached once per machine in ~/.cache/leasetune (scripts/lib/cache.sh).

SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
BIN := bin/leasetune

# Integration packages run one at a time: each starts its own control plane,
# and two cores do not run two of them well.
INTEGRATION_PKGS := ./tests/integration/...
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /tests/integration/ -e /tests/upstream/) ./tests/upstream/releases/...
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 3m

.PHONY: all build run image cluster cluster-down test-cluster test test-unit test-integration test-smoke test-upstream controlplane lint golangci-lint chart-lint generate verify-generated fmt fuzz bench bench-audit clean ui verify-ui test-ui

all: lint build test

build: ## build bin/leasetune
	$(GO) build -o $(BIN) ./cmd/leasetune

run: build ## run leasetune: against $$KUBECONFIG when set, else against a local control plane seeded with a sample installation
	@if [ -n "$$KUBECONFIG" ]; then \
	  echo "running against $$KUBECONFIG (nothing is seeded)"; exec $(BIN) controller --log-format text; \
	else \
	  assets="$$(scripts/controlplane.sh)" && helm="$$(scripts/helm.sh)" && mkdir -p .cache/dev && \
	  "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) --show-only templates/webhook.yaml > .cache/dev/webhook.yaml && \
	  $(GO) build -o bin/devenv ./hack/devenv && \
	  exec bin/devenv "$$assets" "$$PWD/$(BIN)" "$$PWD/.cache/dev" "$$PWD/.cache/dev/webhook.yaml"; \
	fi

image: ## the leasetune image, without Docker: bin/leasetune-image.tar (docker-archive; scripts/image.sh push REF pushes it)
	scripts/image.sh

# The single-node Kubernetes of docs/cluster.md (root): containerd, runc and
# the CNI plugins from Debian, Kubernetes v1.36 built from its module, in a
# network namespace of its own; Fleet's Deployments on a stand-in image;
# leasetune installed by its chart. cluster-down removes all of it.
cluster: ## a single-node Kubernetes on this machine with leasetune installed by its chart (root; docs/cluster.md)
	scripts/cluster.sh up

cluster-down: ## stop the node of make cluster and remove every process, mount, namespace, interface and file it made
	scripts/cluster.sh down

# The tests of leasetune's real pods on that node (tests/cluster); they fail
# when no node is up.
test-cluster: ## leasetune's real pods on the node of make cluster: failover, webhook, PodDisruptionBudget, rollouts, helm upgrade and uninstall, memory
	@echo "test-cluster: go test -tags cluster ./tests/cluster on the node of make cluster ..."; start=$$SECONDS; \
	  assets="$$(scripts/controlplane.sh node)" && helm="$$(scripts/helm.sh)" || exit 1; \
	  if KUBECTL="$$assets/kubectl" HELM="$$helm" LEASETUNE_REPO="$$PWD" $(GO) test -tags cluster -count=1 -v -timeout 14m ./tests/cluster; \
	  then echo "test-cluster: passed in $$((SECONDS - start))s"; else echo "test-cluster: failed after $$((SECONDS - start))s"; exit 1; fi

controlplane: ## build kube-apiserver, etcd and kubectl into ~/.cache/leasetune/controlplane (idempotent)
	scripts/controlplane.sh

test: test-unit test-ui test-integration test-smoke ## unit tests (fuzz seed corpora included), the UI's jest tests, integration tests on kube-apiserver v1.36 (the browser test among them) and the smoke run on v1.28

# -race: the controllers share caches and state between goroutines.
# Each step says what it runs, then how long it took: compiling client-go
# and the rest with -race takes minutes before go test prints anything.
# The Grafana dashboard's queries are parsed by Prometheus's own PromQL
# parser in the tools module that pins Prometheus (tools/prometheus, its own
# go.mod: Prometheus's dependencies stay out of the root module's).
# helm v3 and v4 (tests/chart, tests/promrules) and promtool (tests/promrules) are
# had before go test starts, so that their first builds (minutes) are not
# spent inside a test binary's timeout.
test-unit:
	@echo "test-unit: helm v3, helm v4 and promtool for the chart's tests (scripts/helm.sh, scripts/promtool.sh; built once, minutes) ..."; start=$$SECONDS; \
	  scripts/helm.sh >/dev/null && LEASETUNE_HELM=4 scripts/helm.sh >/dev/null || exit 1; \
	  if promtool="$$(scripts/promtool.sh)"; then echo "test-unit: promtool $$promtool ($$((SECONDS - start))s)"; \
	  else promtool=; echo "test-unit: no promtool ($$((SECONDS - start))s): tests/promrules skips, saying why"; fi; \
	  echo "test-unit: go test -race over $(words $(UNIT_PKGS)) packages (the first build with -race takes minutes) ..."; start=$$SECONDS; \
	  if PROMTOOL="$$promtool" $(GO) test -race -count=1 $(UNIT_PKGS); then echo "test-unit: passed in $$((SECONDS - start))s"; \
	  else echo "test-unit: failed after $$((SECONDS - start))s"; exit 1; fi
	@echo "test-unit: the image builder (cd tools/image && go test) ..."; start=$$SECONDS; \
	  if (cd tools/image && $(GO) test -mod=readonly -count=1 ./...); then echo "test-unit: the image builder passed in $$((SECONDS - start))s"; \
	  else echo "test-unit: the image builder failed after $$((SECONDS - start))s"; exit 1; fi
	@echo "test-unit: the dashboard's PromQL (cd tools/prometheus && go test) ..."; start=$$SECONDS; \
	  if (cd tools/prometheus && $(GO) test -mod=readonly -count=1 ./...); then echo "test-unit: the dashboard's PromQL passed in $$((SECONDS - start))s"; \
	  else echo "test-unit: the dashboard's PromQL failed after $$((SECONDS - start))s"; exit 1; fi

test-integration:
	@echo "test-integration: control plane (scripts/controlplane.sh; built once, minutes) ..."; start=$$SECONDS; \
	  assets="$$(scripts/controlplane.sh)" || exit 1; echo "test-integration: control plane in $$assets ($$((SECONDS - start))s)"; \
	  echo "test-integration: Prometheus for tests/integration/prometheus (scripts/prometheus.sh; built once, minutes) ..."; start=$$SECONDS; \
	  if prom="$$(scripts/prometheus.sh)"; then echo "test-integration: Prometheus $$prom ($$((SECONDS - start))s)"; \
	  else echo "test-integration: no Prometheus ($$((SECONDS - start))s): tests/integration/prometheus skips, saying why"; fi; \
	  echo "test-integration: the Prometheus Operator for tests/integration/prometheus (scripts/prometheus-operator.sh; built once, minutes) ..."; start=$$SECONDS; \
	  if op="$$(scripts/prometheus-operator.sh)"; then echo "test-integration: Prometheus Operator $$op ($$((SECONDS - start))s)"; \
	  else echo "test-integration: no Prometheus Operator ($$((SECONDS - start))s): its test in tests/integration/prometheus skips, saying why"; fi; \
	  echo "test-integration: go test -race -p 1 $(INTEGRATION_PKGS): one package at a time, each with its own kube-apiserver and etcd, each printed as it ends ..."; start=$$SECONDS; \
	  if KUBEBUILDER_ASSETS="$$assets" $(GO) test -race -count=1 -p 1 -timeout 30m $(INTEGRATION_PKGS); then echo "test-integration: passed in $$((SECONDS - start))s"; \
	  else echo "test-integration: failed after $$((SECONDS - start))s"; exit 1; fi

# The smoke run on the oldest Kubernetes the chart claims (kubeVersion
# >=1.28.0-0; tools/controlplane-1.28): the packages that exercise what an
# old apiserver could refuse — the webhook's matchConditions (admission),
# the Settings' writes and re-creation (settings), the chart installed and
# upgraded with helm v3 and v4 (helm), its RBAC (rbac).
SMOKE_PKGS := ./tests/integration/admission ./tests/integration/settings ./tests/integration/helm ./tests/integration/rbac

test-smoke: ## the smoke run: $(SMOKE_PKGS) on kube-apiserver v1.28
	@echo "test-smoke: control plane v1.28 (LEASETUNE_KUBE=1.28 scripts/controlplane.sh; built once, minutes) ..."; start=$$SECONDS; \
	  assets="$$(LEASETUNE_KUBE=1.28 scripts/controlplane.sh)" || exit 1; echo "test-smoke: control plane in $$assets ($$((SECONDS - start))s)"; \
	  echo "test-smoke: go test -race -p 1 $(SMOKE_PKGS) ..."; start=$$SECONDS; \
	  if KUBEBUILDER_ASSETS="$$assets" $(GO) test -race -count=1 -p 1 -timeout 20m $(SMOKE_PKGS); then echo "test-smoke: passed in $$((SECONDS - start))s"; \
	  else echo "test-smoke: failed after $$((SECONDS - start))s"; exit 1; fi

# The suite beside the real Rancher and Fleet (tests/upstream, docs/upstream.md)
# runs on binaries a developer built by hand from their release tags, in
# folders outside the clone that variables name (LEASETUNE_RANCHER_V2_12_12,
# LEASETUNE_RANCHER_V2_15_0, LEASETUNE_FLEET_V0_13_14, LEASETUNE_WEBHOOK_V0_11_0 ...:
# tests/upstream/releases).
# It builds none of them: a package whose folders are missing is not run,
# and each of its cases is one skip line saying what it expects. Each
# package runs in a network namespace of its own (scripts/netns-run.sh):
# the Service addresses its kube-proxy double adds, and any request Rancher
# or Fleet makes, stay inside it. Not part of
# `make test`; .ci/run runs it when the folders are there.
test-upstream: ## the suite beside the real Rancher and Fleet (the binaries from the folders LEASETUNE_RANCHER_* and LEASETUNE_FLEET_* name; skips what is missing)
	@lines="$$($(GO) run ./tests/upstream/releases/cmd/upstream-cases)" || exit 1; \
	  if [ -z "$$lines" ]; then echo "test-upstream: no release folder is set: every case skipped (docs/upstream.md)"; exit 0; fi; \
	  for shell in $$(echo "$$lines" | awk '$$4 != "-" {print $$4}' | sort -u); do \
	    echo "test-upstream: Rancher's dashboard from @rancher/shell $$shell (scripts/dashboard.sh: npm packages, about 4 minutes the first time) ..."; start=$$SECONDS; \
	    scripts/dashboard.sh $$shell >/dev/null || exit 1; echo "test-upstream: dashboard $$shell ready ($$((SECONDS - start))s)"; \
	  done; \
	  if echo "$$lines" | grep -q /rancher; then \
	    echo "test-upstream: the browser and its driver's packages (scripts/chromium.sh: Debian's chromium when missing; scripts/ui.sh deps: npm ci of ui/package-lock.json when missing) ..."; start=$$SECONDS; \
	    scripts/chromium.sh >/dev/null && scripts/ui.sh deps >/dev/null || exit 1; echo "test-upstream: chromium and ui/node_modules ready ($$((SECONDS - start))s)"; \
	  fi; \
	  $(GO) build -o /dev/null ./cmd/leasetune && scripts/helm.sh >/dev/null || exit 1; \
	  bins="$$(mktemp -d)"; trap 'rm -rf "$$bins"' EXIT; \
	  echo "$$lines" | while read -r pkg kube suite shell down; do \
	    echo "test-upstream: $$pkg ($$suite): control plane v$$kube (LEASETUNE_KUBE=$$kube scripts/controlplane.sh: the Kubernetes its releases' charts accept) ..."; start=$$SECONDS; \
	    assets="$$(LEASETUNE_KUBE=$$kube scripts/controlplane.sh)" || exit 1; echo "test-upstream: control plane in $$assets ($$((SECONDS - start))s)"; \
	    if [ "$$down" != - ]; then \
	      echo "test-upstream: $$pkg ($$suite): the downstream cluster's control plane ($$down: LEASETUNE_KUBE_FLAVOUR=$$down scripts/controlplane.sh) ..."; start=$$SECONDS; \
	      LEASETUNE_KUBE=$$kube LEASETUNE_KUBE_FLAVOUR=$$down scripts/controlplane.sh >/dev/null || exit 1; echo "test-upstream: downstream control plane ready ($$((SECONDS - start))s)"; \
	    fi; \
	    bin="$$bins/$$(basename $$pkg).test"; $(GO) test -tags upstream -c -o "$$bin" $$pkg || exit 1; \
	    echo "test-upstream: $$pkg ($$suite) in a network namespace of its own (each step prints a line with its duration) ..."; start=$$SECONDS; \
	    if (cd $$pkg && LEASETUNE_UPSTREAM_SUITE="$$suite" KUBEBUILDER_ASSETS="$$assets" "$$OLDPWD/scripts/netns-run.sh" "$$bin" -test.count=1 -test.v -test.timeout=40m </dev/null); \
	    then echo "test-upstream: $$pkg ($$suite) passed in $$((SECONDS - start))s"; \
	    else echo "test-upstream: $$pkg ($$suite) failed after $$((SECONDS - start))s"; exit 1; fi; \
	  done

# The Rancher UI extension (ui/, scripts/ui.sh): npm ci, then the extension
# build into pkg/uiplugin/bundle, which the binary embeds and git holds (so
# `go build` needs no Node). verify-ui rebuilds it from source and fails when
# the committed copy differs; the build is reproducible, so it only differs
# when the sources changed without `make ui`.
ui: ## npm ci in ui/ and build the UI extension into pkg/uiplugin/bundle, and charts/leasetune/uiplugin.json from it (commit both)
	scripts/ui.sh ci && scripts/ui.sh build

verify-ui: ## fail if pkg/uiplugin/bundle (or charts/leasetune/uiplugin.json) is not what ui/ builds to
	scripts/ui.sh verify

test-ui: ## the UI's jest tests: the golden validation cases and the page's components
	@echo "test-ui: jest (golden cases from go run ./hack/golden, the page's components) ..."; start=$$SECONDS; \
	  if scripts/ui.sh test; then echo "test-ui: passed in $$((SECONDS - start))s"; \
	  else echo "test-ui: failed after $$((SECONDS - start))s"; exit 1; fi

generate: ## regenerate deepcopy and wrangler clients (pkg/apis, pkg/generated)
	scripts/generate.sh

verify-generated: ## fail if the committed generated code differs from what generate makes
	@tmp="$$(mktemp -d)"; cp -a pkg "$$tmp"/; scripts/generate.sh >/dev/null 2>&1 || { echo "make generate failed"; exit 1; }; \
	  if ! diff -r "$$tmp/pkg" pkg; then echo "generated code is stale: run make generate and commit"; \
	    rm -rf pkg; cp -a "$$tmp/pkg" .; exit 1; fi

HELM_TEMPLATE_FLAGS := --namespace leasetune-system --kube-version 1.30.0
# (the chart needs 1.28+: the webhook's matchConditions)

MONITORING_APIS := --api-versions monitoring.coreos.com/v1/ServiceMonitor --api-versions monitoring.coreos.com/v1/PrometheusRule

chart-lint: ## helm lint and helm template of charts/leasetune, with helm v3 (tools/helm) and helm v4 (tools/helm-v4, what Rancher v2.15 and Fleet v0.15+ use); the UIPlugin, ServiceMonitor and PrometheusRule only where their APIs are served
	@set -e; for major in 3 4; do helm="$$(LEASETUNE_HELM=$$major scripts/helm.sh)"; echo "chart-lint: helm $$major ($$helm)"; "$$helm" lint --strict charts/leasetune && \
	  "$$helm" lint --strict charts/leasetune --set installCRDs=false,replicaCount=1,podDisruptionBudget.enabled=false && \
	  "$$helm" lint --strict charts/leasetune --set monitoring.enabled=true && \
	  ! "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) --set monitoring.enabled=true | grep -q '^kind: \(ServiceMonitor\|PrometheusRule\)' && \
	  [ "$$("$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) --set monitoring.enabled=true $(MONITORING_APIS) | grep -c '^kind: \(ServiceMonitor\|PrometheusRule\)')" = 2 ] && \
	  "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) >/dev/null && \
	  "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) | grep -q '^kind: PodDisruptionBudget' && \
	  ! "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) | grep -q '^kind: UIPlugin' && \
	  "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) --api-versions catalog.cattle.io/v1/UIPlugin | grep -q '^kind: UIPlugin' && \
	  "$$helm" lint --strict charts/leasetune --set monitoring.dashboards.enabled=true && \
	  ! "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) | grep -q '^  name: leasetune-dashboard$$' && \
	  "$$helm" template leasetune charts/leasetune $(HELM_TEMPLATE_FLAGS) --set monitoring.dashboards.enabled=true | grep -q '^  name: leasetune-dashboard$$' || exit 1; done

lint: verify-generated verify-ui chart-lint golangci-lint ## gofmt, go vet, golangci-lint, go.mod tidiness, generated code current, the embedded UI bundle current, chart
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags upstream ./tests/upstream/...
	$(GO) vet -tags cluster ./tests/cluster/...
	cd hack/bench && $(GO) vet ./...
	@for m in . hack/bench; do tmp="$$(mktemp -d)"; cp $$m/go.mod $$m/go.sum "$$tmp"/; (cd $$m && $(GO) mod tidy); \
	  if ! diff -u "$$tmp/go.mod" $$m/go.mod || ! diff -u "$$tmp/go.sum" $$m/go.sum; then \
	    echo "$$m/go.mod, go.sum were not tidy (restored; run go mod tidy there)"; cp "$$tmp"/go.mod "$$tmp"/go.sum $$m/; exit 1; fi; done

# golangci-lint (tools/golangci-lint, built once by scripts/golangci-lint.sh,
# about 3 minutes) with .golangci.yaml: staticcheck, errcheck, unused,
# errorlint, contextcheck, gosec, dupl, funlen, over every package and the
# upstream tag's, and over hack/bench's module.
golangci-lint: ## golangci-lint run (.golangci.yaml)
	@echo "golangci-lint: building it when missing (scripts/golangci-lint.sh; once, minutes) ..."; \
	  bin="$$(scripts/golangci-lint.sh)" || exit 1; start=$$SECONDS; \
	  if "$$bin" run --timeout 20m ./... && (cd hack/bench && "$$bin" run --timeout 20m ./...); then echo "golangci-lint: passed in $$((SECONDS - start))s"; \
	  else echo "golangci-lint: failed after $$((SECONDS - start))s"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

# Every Fuzz* target of the module, one after the other, FUZZTIME each
# (go test runs one fuzz target at a time). The seed corpora also run in
# make test-unit.
FUZZTIME ?= 60s
fuzz: ## run every fuzz test (func Fuzz* in a _test.go file) for FUZZTIME each
	@set -e; grep -rH --include='*_test.go' -e '^func Fuzz[A-Za-z0-9_]*(' pkg cmd hack | \
	  sed -E 's#^(.*)/[^/]*_test.go:func (Fuzz[A-Za-z0-9_]*)\(.*#./\1 \2#' | sort -u | \
	  while read -r pkg f; do echo "fuzz: $$f in $$pkg for $(FUZZTIME) ..."; \
	    $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg </dev/null || exit 1; done

# The benchmark (hack/bench): for each configuration of CONFIGS (bench: the
# channel given, --settle 0s, no webhook registered, no UI; chart: the
# chart's defaults; both beside Fleet v0.9.9, where a global agent change
# writes every cluster), N fleet Clusters on a local control plane of its own
# with an audit log; the raw-PATCH floor, then leasetune's first start and
# REST seconds at rest, and ROUNDS global changes, each between floors
# (leasetune restarted for each); one table, a column per configuration.
# today: the chart's defaults beside Fleet v0.16.1's Deployments and N
# clusters: start to caches synced, requests at rest, one global agent
# change (one write) to fleet-agentmanagement and to the ElectionStatus,
# its size, peak RSS; a table of its own.
# Not run by CI. docs/benchmark.md.
N ?= 10000
REST ?= 180
CONFIGS ?= bench,chart,today
ROUNDS ?= 3
bench: build ## benchmark leasetune against the raw-PATCH floor on a local control plane (N clusters, REST seconds at rest, CONFIGS, ROUNDS)
	assets="$$(scripts/controlplane.sh)" && (cd hack/bench && $(GO) build -o ../../bin/bench .) && \
	  bin/bench -assets "$$assets" -helm "$$(scripts/helm.sh)" -binary $(BIN) -n $(N) -rest $(REST)s -configs $(CONFIGS) -rounds $(ROUNDS)

# BenchmarkAudit (pkg/audit): `leasetune audit`'s readers against
# json-iterator, encoding/json and jq's pipeline on two generated logs of
# AUDIT_MB MiB (428: issue #27's 449 MB). Not run by CI; jq only when it is
# installed. See docs/audit.md.
AUDIT_MB ?= 428
AUDIT_BENCHTIME ?= 3x
bench-audit: ## benchmark leasetune audit against json-iterator, encoding/json and jq (two logs of AUDIT_MB MiB)
	LEASETUNE_AUDIT_BENCH_MB=$(AUDIT_MB) $(GO) test -v -run '^$$' -bench '^BenchmarkAudit$$' -benchtime $(AUDIT_BENCHTIME) -timeout 60m ./pkg/audit

clean:
	rm -rf bin
