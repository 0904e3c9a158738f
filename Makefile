# Dolphin: a MySQL operator for Kubernetes, shipped through OLM.
#
# Two commands on a fresh machine:   make demo   and   make test
# Every tool is built from the Go module proxy through a wrapper module under hack/tools/
# (its committed go.mod is the version pin) into a cache outside the checkout, keyed by
# version, and linked into ./bin. MySQL comes from Debian's packages (hack/mysql/).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# ---- images and versions ----------------------------------------------------------------
VERSION ?= 0.2.0
# The release this version upgrades from: the CSV's spec.replaces and olm.skipRange come from it.
PREVIOUS_VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= quay.io/dolphin-operator/dolphin-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
CONTAINER_TOOL ?= docker
GIT_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/dolphin-operator/dolphin/internal/version.Version=$(VERSION) \
  -X github.com/dolphin-operator/dolphin/internal/version.GitCommit=$(GIT_COMMIT)

# ---- tool cache -------------------------------------------------------------------------
LOCALBIN := $(CURDIR)/bin
export DOLPHIN_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/dolphin
TOOLS := hack/tools
modver = $(shell awk '$$1=="$(2)" && NF>1 {print $$2; exit} $$1=="require" && $$2=="$(2)" {print $$3; exit}' $(TOOLS)/$(1)/go.mod)
BUILD_TOOL := hack/build-tool.sh

KUBE_VERSION           := $(call modver,k8s,k8s.io/kubernetes)
KUBE_MINOR             := $(word 2,$(subst ., ,$(KUBE_VERSION)))
ETCD_VERSION           := $(call modver,etcd,go.etcd.io/etcd/server/v3)
KWOK_VERSION           := $(call modver,kwok,sigs.k8s.io/kwok)
CONTROLLER_GEN_VERSION := $(call modver,controller-gen,sigs.k8s.io/controller-tools)
KUSTOMIZE_VERSION      := $(call modver,kustomize,sigs.k8s.io/kustomize/kustomize/v5)
OPERATOR_SDK_VERSION   := $(call modver,operator-sdk,github.com/operator-framework/operator-sdk)
OPM_VERSION            := $(call modver,opm,github.com/operator-framework/operator-registry)
CHAINSAW_VERSION       := $(call modver,chainsaw,github.com/kyverno/chainsaw)
GOLANGCI_LINT_VERSION  := $(call modver,golangci-lint,github.com/golangci/golangci-lint/v2)
OLM_VERSION            := $(call modver,olm,github.com/operator-framework/operator-lifecycle-manager)
CONTAINERD_VERSION     := $(call modver,containerd,github.com/containerd/containerd/v2)
COREDNS_VERSION        := $(call modver,coredns,github.com/coredns/coredns)

CONTROLLER_GEN := $(LOCALBIN)/controller-gen
KUSTOMIZE      := $(LOCALBIN)/kustomize
OPERATOR_SDK   := $(LOCALBIN)/operator-sdk
SCORECARD_TEST := $(LOCALBIN)/scorecard-test
OPM            := $(LOCALBIN)/opm
CHAINSAW       := $(LOCALBIN)/chainsaw
KUBECTL        := $(LOCALBIN)/kubectl

# /version of our kube binaries must say what they are (hack/lib/version.sh does this upstream).
KUBE_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) \
  -X $(p).gitTreeState=clean -X $(p).buildDate=1970-01-01T00:00:00Z)
SDK_PKG := github.com/operator-framework/operator-sdk
SDK_LDFLAGS := -s -w -X $(SDK_PKG)/internal/version.Version=$(OPERATOR_SDK_VERSION) \
  -X $(SDK_PKG)/internal/version.GitVersion=$(OPERATOR_SDK_VERSION) \
  -X $(SDK_PKG)/internal/version.ImageVersion=$(OPERATOR_SDK_VERSION)

# Test environment: envtest and the local cluster find their binaries here; the MySQL helper
# finds the provisioned server in the cache.
export KUBEBUILDER_ASSETS := $(LOCALBIN)
export DOLPHIN_BIN_DIR := $(LOCALBIN)
export DOLPHIN_MYSQL_DIR := $(DOLPHIN_CACHE)/mysql/sid
DOLPHIN_PROMETHEUS_DIR := $(DOLPHIN_CACHE)/prometheus/sid
PROMTOOL := $(DOLPHIN_PROMETHEUS_DIR)/root/usr/bin/promtool
# The e2e tier runs this Prometheus (test/ground's prometheus.go).
export DOLPHIN_PROMETHEUS := $(DOLPHIN_PROMETHEUS_DIR)/root/usr/bin/prometheus
# The images the local cluster's nodes run (hack/images writes the list).
export DOLPHIN_IMAGES := $(LOCALBIN)/images.json
GOTEST ?= go test
TEST_FLAGS ?= -count=1
COVER_DIR := $(CURDIR)/.cover

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs, RBAC and webhook configurations from the Go markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./api/...;./controllers/...;./internal/..." \
	  output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
	  output:webhook:artifacts:config=config/webhook
	go run ./hack/alerts > config/prometheus/dolphin-alerts.yaml

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods (zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet on every module of the repository.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint with the project's linters (.golangci.yml).
	$(LOCALBIN)/golangci-lint run ./...

.PHONY: verify-generated
verify-generated: manifests generate bundle catalog chart ## Fail when generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- api config bundle catalog charts)" ]; then \
	  git status --porcelain -- api config bundle catalog charts; git diff --stat -- api config bundle catalog charts; \
	  echo "generated files drifted: run 'make manifests generate bundle catalog chart' and commit the result"; exit 1; fi
	@echo "generated files are up to date"

##@ Test

# `make test` is the gate (CI, .ci/run): the fast tiers and the Core ground tests on one
# ground; `make test-all` runs every test. Each ends with its tiers' times and the ground
# tests' own table (docs/development.md: the levels and the budgets).
CORE_TIERS := test-tools verify-generated vet lint test-unit test-rules test-envtest test-mysql test-core
ALL_TIERS  := test-tools verify-generated vet lint test-unit test-rules test-envtest test-mysql test-ground test-helm test-olm test-harness
TEST_BUDGET ?= 1200
TEST_ALL_BUDGET ?= 2700
.PHONY: test test-all
test: ## The gate: every fast tier and the Core ground tests on one real-node ground, in order; ends with the time tables (what CI runs).
	@hack/run-tiers.sh --budget $(TEST_BUDGET) $(CORE_TIERS)

test-all: ## Every test, Core and Full: the fast tiers, one shared ground for e2e, chaos, deploy, chainsaw and scorecard, then Helm, OLM and the harnesses' own tests.
	@hack/run-tiers.sh --budget $(TEST_ALL_BUDGET) $(ALL_TIERS)

# Every tool the tiers use, built first, two builds at a time: one `go build` of a pinned
# tool kept ~1.4 of 2 cores busy on average (user/wall time, measured cold), and MySQL's
# provisioning mostly waits on the network. Warm, this is a few seconds of stamp checks.
TEST_TOOLS := operator-sdk envtest-tools chainsaw opm olm golangci-lint cluster-tools controller-gen kustomize catalog-render mysql busybox promtool kwok moco cert-manager-crds krew
.PHONY: test-tools
test-tools: ## Build every tool make test needs, two at a time.
	@$(MAKE) --no-print-directory -j2 $(TEST_TOOLS)

# Packages by tier. Unit tests need nothing; envtest needs etcd + kube-apiserver; mysql needs
# a provisioned mysqld; the ground tiers need the whole local cluster (and MySQL). A tier's
# helper fails, never skips, when what it needs is missing: these targets build and
# provision it first.
ENVTEST_PKGS := ./test/envtest/...
MYSQL_PKGS   := ./test/mysqld/... ./test/sql/... ./test/backup/...
# The packages that attach to one shared ground (test/ground/suite), run one at a time: the
# chaos rounds and failover timings must not share the machine with another test.
GROUND_PKGS  := ./test/e2e/ ./test/chaos/ ./test/deploy/
# Each starts a ground of its own: the Helm installs (no operator to begin with), OLM,
# the local cluster's own tests, and make bench-scale's harness at unit size (kwok).
HELM_PKGS    := ./test/helm/
HARNESS_PKGS := ./test/localcluster/ ./test/bench/scale/
UNIT_PKGS     = $(shell go list ./... | grep -v -e '/test/') ./test/ground/... ./test/bundle/... ./test/release/... ./test/dashboard/... ./test/promfixture/... ./test/chart/...

.PHONY: test-unit
test-unit: kustomize krew ## Unit tests: pure logic, the generated bundle and the Helm chart (beside config/default's kustomize build); no cluster, no MySQL.
	$(GOTEST) $(TEST_FLAGS) $(UNIT_PKGS)
	cd hack/catalog && $(GOTEST) $(TEST_FLAGS) -tags containers_image_openpgp ./...

.PHONY: test-rules
test-rules: promtool ## Check the alert rules and run their unit tests (promtool, positive and negative case per alert).
	cd config/prometheus && $(PROMTOOL) check rules dolphin-alerts.yaml && $(PROMTOOL) test rules dolphin-alerts_test.yaml

.PHONY: test-envtest
test-envtest: envtest-tools ## Integration tests against a real API server (envtest).
	$(GOTEST) $(TEST_FLAGS) $(ENVTEST_PKGS)

.PHONY: test-mysql
test-mysql: mysql versitygw ## Tests against real mysqld instances (and, for backups, a real S3 server).
	$(GOTEST) $(TEST_FLAGS) $(MYSQL_PKGS)

# The build an operator upgrade starts from in the deploy tier's upgrade test: a commit of
# main whose CI passed (hack/previous-image builds its operator image from its own tree and
# Dockerfile; the clone needs its history). Move it forward when the upgrade path changes.
UPGRADE_FROM ?= c8eb2cd90be9ddd664ca8c4f21e69212e1d1e7ee
export DOLPHIN_PREVIOUS_IMAGES := $(LOCALBIN)/previous-images.json
export DOLPHIN_UPGRADE_FROM := $(UPGRADE_FROM)
.PHONY: previous-image
previous-image: ## Build the operator image of $(UPGRADE_FROM), the build the upgrade test starts from.
	go run ./hack/previous-image --repo-root . --commit $(UPGRADE_FROM) --version $(VERSION) \
	  --cache $(DOLPHIN_CACHE)/builds/$(UPGRADE_FROM) --out $(LOCALBIN)/previous-image --manifest $(DOLPHIN_PREVIOUS_IMAGES)

# The ground tiers run go test through hack/testrun (go test -json in, `go test -v` output
# and a per-test table out; hack/run-tiers.sh prints every tier's rows at the end).
# DOLPHIN_TEST_TABLE, set by run-tiers, is where the rows go.
TESTRUN = go run ./hack/testrun $(if $(DOLPHIN_TEST_TABLE),--table $(DOLPHIN_TEST_TABLE)) --
GROUND_DEPS := build plugin cluster-tools mysql versitygw images previous-image kustomize manifests
GROUND_TEST = $(TESTRUN) $(GOTEST) $(TEST_FLAGS) -json -p 1 -timeout $(1) $(GROUND_PKGS)
GROUND = $(LOCALBIN)/ground demo --state-dir $(CURDIR)/.run/$(1) --more-images $(DOLPHIN_PREVIOUS_IMAGES) --exit

.PHONY: ground-bin
ground-bin:
	go build -o $(LOCALBIN)/ground ./test/ground/cmd/ground
	@# The test binaries are built before the ground starts: -p 1 would build them one at a time.
	$(GOTEST) -c -o $(CURDIR)/.run/testbin/ $(GROUND_PKGS) $(HELM_PKGS) $(HARNESS_PKGS) >/dev/null

.PHONY: test-core
test-core: $(GROUND_DEPS) ground-bin ## make test's ground tier: the Core tests of e2e, chaos and deploy, one package after another on one real-node ground (log: .run/test-core.log).
	@mkdir -p .run
	$(call GROUND,core) --run 'DOLPHIN_TEST_LEVEL=core $(call GROUND_TEST,30m)' 2>&1 | tee .run/test-core.log

.PHONY: test-ground
test-ground: $(GROUND_DEPS) chainsaw operator-sdk release-images ground-bin ## make test-all's ground tier: every test of e2e, chaos and deploy, then the chainsaw suites and scorecard, on one real-node ground (log: .run/test-ground.log).
	@mkdir -p .run
	$(call GROUND,ground) --release-images $(DOLPHIN_RELEASE_IMAGES) \
	  --run 'DOLPHIN_TEST_LEVEL=all $(call GROUND_TEST,60m) && $(CHAINSAW_RUN) && $(SCORECARD_RUN)' 2>&1 | tee .run/test-ground.log

.PHONY: test-helm
test-helm: $(GROUND_DEPS) cert-manager-crds ground-bin ## `make deploy` then `make undeploy`, and the Helm chart installed, upgraded, uninstalled and installed again, on a ground of their own.
	$(TESTRUN) $(GOTEST) $(TEST_FLAGS) -json -timeout 20m $(HELM_PKGS)

.PHONY: test-harness
test-harness: $(GROUND_DEPS) kwok moco ground-bin ## The local cluster's own tests (nodes, DNS, volumes, node loss) and make bench-scale's harness at unit size (kwok).
	$(TESTRUN) $(GOTEST) $(TEST_FLAGS) -json -p 1 -timeout 20m $(HARNESS_PKGS)

# The e2e tests that capture a fixture (test/e2e/fixtures_test.go) write it only when
# DOLPHIN_CAPTURE_FIXTURES names a directory; the unit tier checks the alert rules' tests and
# the dashboard against what they wrote.
FIXTURE_TESTS = TestAThreeInstanceClusterBecomesReady|TestBackupsAreWhatTheirStatusSays|TestVerificationRestoresTheNewestBackupAndCatchesACorruptedOne|TestTheOperatorArchivesThePrimarysBinaryLogs
.PHONY: alert-fixtures
alert-fixtures: $(GROUND_DEPS) ground-bin ## Recapture config/prometheus/fixtures (the operator's and mysqld_exporter's series) from four e2e tests on the local cluster.
	rm -f config/prometheus/fixtures/*.prom
	DOLPHIN_CAPTURE_FIXTURES=$(CURDIR)/config/prometheus/fixtures \
	  $(GOTEST) $(TEST_FLAGS) -v -timeout 30m -run '^($(FIXTURE_TESTS))$$$$' ./test/e2e/


# The chaos suite alone on a ground of its own, every round (`make test` runs its Core
# rounds, `make test-all` all of them, on the shared ground). It prints its summary line
# (`chaos rounds=… lost_writes=… seed=…`) at the end; DOLPHIN_CHAOS_SEED=<seed> replays a
# run's order of rounds.
.PHONY: test-chaos
test-chaos: build cluster-tools mysql images kustomize manifests ## Fault rounds (kills, hangs, partitions, operator and API server restarts) with a lost-write checker, on real nodes (log: .run/test-chaos.log).
	@mkdir -p .run
	$(GOTEST) $(TEST_FLAGS) -v -timeout 20m ./test/chaos/... 2>&1 | tee .run/test-chaos.log
	@grep '^chaos rounds=' .run/test-chaos.log

# The release images the OLM tier pushes to the ground's registry (hack/release-images):
# this checkout's and every earlier release's (built from its commit), and opm's, OLM's util
# and scorecard-test images from the pinned modules. Earlier releases' trees and builds are
# cached under $(DOLPHIN_CACHE)/releases.
export DOLPHIN_RELEASE_IMAGES := $(LOCALBIN)/release-images.json
moddir = $(shell cd $(TOOLS)/$(1) && go list -m -f '{{.Dir}}' $(2))
.PHONY: release-images
release-images: build opm olm operator-sdk busybox ## Build the release's images (operator, bundle, scorecard tests; earlier releases from their commits) and OLM's, as OCI tarballs, no engine needed.
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $(LOCALBIN)/dolphin-scorecard-tests ./scorecard/cmd/dolphin-scorecard-tests
	go run ./hack/release-images --repo-root . --out $(LOCALBIN)/release-images --cache $(DOLPHIN_CACHE)/releases \
	  --manifest $(DOLPHIN_RELEASE_IMAGES) --version $(VERSION) --manager $(LOCALBIN)/manager \
	  --scorecard-tests $(LOCALBIN)/dolphin-scorecard-tests --busybox $(DOLPHIN_CACHE)/busybox \
	  --registry-module $(call moddir,opm,github.com/operator-framework/operator-registry) --opm-version $(OPM_VERSION) \
	  --olm-module $(call moddir,olm,$(OLM_PKG)) --olm-version $(OLM_VERSION) \
	  --sdk-module $(call moddir,operator-sdk,$(SDK_PKG)) --sdk-version $(OPERATOR_SDK_VERSION) \
	  --opm $(LOCALBIN)/opm --grpc-health-probe $(LOCALBIN)/grpc_health_probe --cpb $(LOCALBIN)/cpb \
	  --copy-content $(LOCALBIN)/copy-content --scorecard-test $(SCORECARD_TEST)

# OLM's CRDs come from the pinned OLM module (downloaded by `make olm`).
OLM_CRDS = $(shell cd $(TOOLS)/olm && go list -m -f '{{.Dir}}' github.com/operator-framework/operator-lifecycle-manager)/deploy/chart/crds

.PHONY: test-olm
test-olm: cluster-tools images olm opm catalog-render release-images ## Install and upgrade Dolphin through real OLM from its catalog, on real nodes (log: .run/test-olm.log).
	@mkdir -p .run
	DOLPHIN_OLM_CRDS=$(OLM_CRDS) \
	  $(TESTRUN) $(GOTEST) $(TEST_FLAGS) -json -timeout 20m ./test/olm/... 2>&1 | tee .run/test-olm.log

CHAINSAW_RUN = PATH=$(LOCALBIN):$$PATH $(CHAINSAW) test --test-dir $(CURDIR)/test/chainsaw --config $(CURDIR)/test/chainsaw/.chainsaw.yaml
.PHONY: test-chainsaw
test-chainsaw: cluster-tools images chainsaw kustomize manifests ## Chainsaw suites (test/chainsaw) against the real-node ground with the operator.
	go build -o $(LOCALBIN)/ground ./test/ground/cmd/ground
	$(LOCALBIN)/ground demo --state-dir $(CURDIR)/.run/chainsaw --run '$(CHAINSAW_RUN)'

.PHONY: bench-failover
bench-failover: cluster-tools images kustomize manifests ## Measure write unavailability on real nodes: node loss, hung mysqld (SIGSTOP), mysqld crash (restarted, and kept down), switchover (BENCH_RUNS, default 5).
	go build -o $(LOCALBIN)/bench-failover ./test/bench/failover
	$(LOCALBIN)/bench-failover --runs $(BENCH_RUNS) $(if $(BENCH_ONLY),--only $(BENCH_ONLY))

BENCH_RUNS ?= 5
BENCH_ONLY ?=

.PHONY: bench-backup
bench-backup: mysql versitygw ## Measure logical and physical backups and restores of a data set (BENCH_SIZE_MB, default 1024) with real mysqld and a real S3 server.
	go build -o $(LOCALBIN)/bench-backup ./test/bench/backup
	$(LOCALBIN)/bench-backup --size-mb $(BENCH_SIZE_MB)

BENCH_SIZE_MB ?= 1024

.PHONY: bench-reconcile
bench-reconcile: envtest-tools ## Measure settled reconcile passes against a real API server: API and discovery requests a pass, against an uncached lookup (BENCH_PASSES, default 200).
	go test ./test/envtest/ -count=1 -v -run '^$$' -bench '^BenchmarkSettledClusterPass$$' -benchtime $(BENCH_PASSES)x

BENCH_PASSES ?= 200

.PHONY: bench-scale
bench-scale: envtest-tools kube-controller-manager kube-scheduler kwok moco build ## Measure Dolphin and moco looking after many clusters on a kwok control plane: convergence, memory, CPU, API requests, dials (BENCH_SCALE_N, BENCH_SCALE_OPS, BENCH_SCALE_DBS, BENCH_SCALE_STEADY, BENCH_SCALE_REPEAT).
	go build -o $(LOCALBIN)/bench-scale ./test/bench/scale
	$(LOCALBIN)/bench-scale --n "$(BENCH_SCALE_N)" --ops "$(BENCH_SCALE_OPS)" --dbs $(BENCH_SCALE_DBS) \
	  --steady $(BENCH_SCALE_STEADY) --root $(CURDIR) --dolphin $(LOCALBIN)/manager --moco $(LOCALBIN)/moco-controller \
	  --repeat $(BENCH_SCALE_REPEAT) --moco-module "$$(go list -C $(TOOLS)/moco -m -f '{{.Dir}}' github.com/cybozu-go/moco)" --bin-dir $(LOCALBIN)

BENCH_SCALE_N ?= 100 500 1000
BENCH_SCALE_OPS ?= dolphin moco moco-qps500
BENCH_SCALE_DBS ?= both
BENCH_SCALE_STEADY ?= 300s
BENCH_SCALE_REPEAT ?= 1

##@ Build

.PHONY: build
build: ## Build the manager binary into bin/manager.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(LOCALBIN)/manager ./cmd/manager

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-dolphin (with bin/ on PATH: kubectl dolphin status ...).
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(LOCALBIN)/kubectl-dolphin ./cmd/kubectl-dolphin

.PHONY: plugin-release
plugin-release: ## Build the plugin's release archives for krew (bin/plugin-release/) and write plugins/dolphin.yaml, the krew manifest naming them.
	go run ./hack/plugin-release --version $(VERSION) --out $(LOCALBIN)/plugin-release --manifest plugins/dolphin.yaml

.PHONY: images
images: build mysql coredns promtool ## Build the local cluster's images (operator, MySQL, mysqld_exporter, pause, CoreDNS) as OCI tarballs, no engine needed.
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o $(LOCALBIN)/pause ./hack/images/pause
	go run ./hack/images --out $(DOLPHIN_CACHE)/images --operator-out $(LOCALBIN)/images --manifest $(DOLPHIN_IMAGES) \
	  --manager $(LOCALBIN)/manager --version $(VERSION) \
	  --mysql-root $(DOLPHIN_MYSQL_DIR)/root --mysql-version-file $(DOLPHIN_MYSQL_DIR)/VERSION \
	  --pause $(LOCALBIN)/pause --coredns $(LOCALBIN)/coredns --coredns-version $(COREDNS_VERSION) \
	  --prometheus-root $(DOLPHIN_PROMETHEUS_DIR)/root --exporter-version-file $(DOLPHIN_PROMETHEUS_DIR)/EXPORTER_VERSION

.PHONY: run
run: ## Run the manager against the cluster in $KUBECONFIG, webhooks off.
	ENABLE_WEBHOOKS=false go run ./cmd/manager --metrics-secure=false --metrics-bind-address=:8080

.PHONY: demo
demo: cluster-tools images kustomize manifests ## Real nodes, the operator from make deploy, a sample cluster Ready (Ctrl-C stops).
	go build -o $(LOCALBIN)/ground ./test/ground/cmd/ground
	$(LOCALBIN)/ground demo --state-dir $(CURDIR)/.run/demo \
	  --sample config/samples/mysql_v1beta1_mysqlcluster.yaml --wait-ready 5m \
	  $(DEMO_FLAGS)

.PHONY: up
up: cluster-tools images kustomize manifests ## Real nodes with Dolphin's CRDs, no operator: run one with `.run/up/enter make run` (Ctrl-C stops).
	go build -o $(LOCALBIN)/ground ./test/ground/cmd/ground
	$(LOCALBIN)/ground up --state-dir $(CURDIR)/.run/up

##@ Deploy without OLM (to the cluster KUBECONFIG names)

ignore-not-found ?= true

.PHONY: install
install: manifests kustomize kubectl ## Install the CRDs (conversion needs the operator: see docs/install.md).
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests kustomize kubectl ## Remove the CRDs, and with them every MySQLCluster and MySQLBackup.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

# `make deploy` builds config/default through an overlay of its own (.run/deploy), so that IMG
# and the operand images never edit a committed file: RELATED_IMAGE_* variables set in the
# environment (RELATED_IMAGE_MYSQL_9_7=..., see docs/install.md) reach the manager's container.
# DEPLOY_DIR is where the overlay and the manifests go; DEPLOY_NO_REGEN=1 skips `make
# manifests` (the test ground sets both: its clusters deploy at once from one checkout).
DEPLOY_DIR ?= $(CURDIR)/.run/deploy
.PHONY: deploy-manifests
deploy-manifests: $(if $(DEPLOY_NO_REGEN),,manifests) kustomize
	@rm -rf $(DEPLOY_DIR) && mkdir -p $(DEPLOY_DIR)
	@printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\n' \
	  "$$(realpath --relative-to=$(DEPLOY_DIR) $(CURDIR)/config/default)" > $(DEPLOY_DIR)/kustomization.yaml
	@cd $(DEPLOY_DIR) && $(KUSTOMIZE) edit set image $(IMAGE_TAG_BASE)=$(IMG)
	@for v in $$(env | grep -o '^RELATED_IMAGE_[A-Z0-9_]*' | sort); do \
	  cd $(DEPLOY_DIR) && $(KUSTOMIZE) edit add patch --kind Deployment --name controller-manager \
	    --patch "[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/0/env/-\",\"value\":{\"name\":\"$$v\",\"value\":\"$$(printenv $$v)\"}}]"; done
	@$(KUSTOMIZE) build $(DEPLOY_DIR) > $(DEPLOY_DIR)/manifests.yaml

.PHONY: deploy
deploy: deploy-manifests kubectl ## Install the operator with kustomize (config/default, self-issued webhook certificates); IMG picks its image.
	$(KUBECTL) apply --server-side -f $(DEPLOY_DIR)/manifests.yaml

.PHONY: undeploy
undeploy: deploy-manifests kubectl ## Remove what `make deploy` installed, CRDs included.
	$(KUBECTL) delete --ignore-not-found=$(ignore-not-found) --wait=false -f $(DEPLOY_DIR)/manifests.yaml

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine).
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg GIT_COMMIT=$(GIT_COMMIT) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

##@ Helm chart

# charts/dolphin-operator: its CRDs, RBAC, Services, webhook configurations and Chart.yaml are
# generated from config/default (hack/chart); its Deployment, values and schema are its own.
CHART_DIR := charts/dolphin-operator
.PHONY: chart
chart: manifests kustomize ## Generate the Helm chart's CRDs, RBAC, Services, webhook configurations and Chart.yaml from config/default.
	$(KUSTOMIZE) build config/default | go run ./hack/chart --chart $(CHART_DIR) --version $(VERSION)

##@ OLM distribution

# The bundle of this release: what `make bundle` writes to bundle/. CREATED_AT is the release
# date, fixed per version so that the same inputs give the same bundle.
CHANNELS ?= candidate,fast,stable
DEFAULT_CHANNEL ?= stable
CREATED_AT ?= 2026-11-30T00:00:00Z
BUNDLE_GEN_FLAGS ?= -q --overwrite --version $(VERSION) --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
USE_IMAGE_DIGESTS ?= false
ifeq ($(USE_IMAGE_DIGESTS), true)
	BUNDLE_GEN_FLAGS += --use-image-digests
endif
CSV := bundle/manifests/dolphin-operator.clusterserviceversion.yaml

.PHONY: bundle
bundle: manifests kustomize operator-sdk ## Generate bundle/ (CSV, CRDs, RBAC, webhooks, scorecard) and validate it.
	$(OPERATOR_SDK) generate kustomize manifests -q --interactive=false --apis-dir api
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle $(BUNDLE_GEN_FLAGS)
	sed -i -e 's|^    containerImage: .*|    containerImage: $(IMG)|' -e 's|^    createdAt: .*|    createdAt: "$(CREATED_AT)"|' \
	  -e 's|^    olm.skipRange: .*|    olm.skipRange: ">=$(PREVIOUS_VERSION) <$(VERSION)"|' \
	  -e 's|^  replaces: .*|  replaces: dolphin-operator.v$(PREVIOUS_VERSION)|' $(CSV)
	sed -i -e 's|dolphin-scorecard-tests:v.*|dolphin-scorecard-tests:v$(VERSION)|' bundle/tests/scorecard/config.yaml
	$(OPERATOR_SDK) bundle validate ./bundle
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

.PHONY: bundle-build
bundle-build: ## Build the bundle image (needs a container engine).
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image.
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

.PHONY: catalog catalog-render
catalog: opm catalog-render ## Render catalog/ from config/catalog (template + released bundles + bundle/) and validate it.
	$(LOCALBIN)/catalog-render --template config/catalog/template.yaml --bundles config/catalog/bundles \
	  --dev-bundle bundle --image-repo $(IMAGE_TAG_BASE)-bundle --out catalog/dolphin-operator/catalog.yaml
	$(OPM) validate catalog

catalog-render: ## Build hack/catalog, the catalog renderer, into bin/.
	cd hack/catalog && go build -tags containers_image_openpgp -o $(LOCALBIN)/catalog-render .

.PHONY: catalog-build
catalog-build: ## Build the catalog image (needs a container engine).
	$(CONTAINER_TOOL) build -f catalog.Dockerfile -t $(CATALOG_IMG) .

# operator-sdk scorecard as a user runs it: each test a pod, its image pulled (here from the
# ground's registry, as quay.io's), Dolphin's tests under the ServiceAccount of
# config/scorecard/rbac.yaml, against the operator installed by `make deploy`. scorecard-untar
# is named by the SDK's version: scorecard's default names the published image's digest.
SCORECARD_FLAGS := -n dolphin-scorecard -s dolphin-scorecard --pod-security restricted --wait-time 10m \
  --untar-image quay.io/operator-framework/scorecard-untar:$(OPERATOR_SDK_VERSION) -o text
SCORECARD_RUN = $(KUBECTL) apply -f config/scorecard/rbac.yaml && $(OPERATOR_SDK) scorecard ./bundle $(SCORECARD_FLAGS)
.PHONY: scorecard
scorecard: operator-sdk cluster-tools images kustomize manifests release-images ## Run operator-sdk scorecard on real nodes: the bundle's tests as pods, their images from the ground's registry (log: .run/scorecard.log).
	go build -o $(LOCALBIN)/ground ./test/ground/cmd/ground
	@mkdir -p .run
	$(LOCALBIN)/ground demo --state-dir $(CURDIR)/.run/scorecard --release-images $(DOLPHIN_RELEASE_IMAGES) --exit \
	  --run '$(SCORECARD_RUN)' 2>&1 | tee .run/scorecard.log

.PHONY: scorecard-local
scorecard-local: operator-sdk cluster-tools images kustomize manifests ## Run the bundle's scorecard tests here: built-ins in a chroot, Dolphin's on the real-node ground.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/dolphin-scorecard-tests ./scorecard/cmd/dolphin-scorecard-tests
	go build -o $(LOCALBIN)/scorecard-local ./scorecard/cmd/scorecard-local
	@mkdir -p .run
	$(LOCALBIN)/scorecard-local --bundle bundle --scorecard-test $(SCORECARD_TEST) \
	  --dolphin-tests $(LOCALBIN)/dolphin-scorecard-tests --output $(CURDIR)/.run/scorecard-results.json

.PHONY: scorecard-image-build
scorecard-image-build: ## Build the image of Dolphin's scorecard tests, under the name the bundle's scorecard configuration gives it (needs a container engine).
	$(CONTAINER_TOOL) build -f scorecard/Dockerfile -t quay.io/dolphin-operator/dolphin-scorecard-tests:v$(VERSION) .

##@ Tools (built once per version into $(DOLPHIN_CACHE), linked into ./bin)

.PHONY: tools envtest-tools cluster-tools mysql host-deps busybox promtool
tools: cluster-tools kwok controller-gen kustomize operator-sdk opm chainsaw golangci-lint olm ## Build every pinned tool.
envtest-tools: etcd kube-apiserver kubectl ## etcd, kube-apiserver and kubectl for envtest.
cluster-tools: host-deps envtest-tools kube-controller-manager kube-scheduler kubelet kube-proxy containerd coredns ## Everything the local cluster runs with real nodes (kwok, for Nodes 0, is `make kwok`).
host-deps: ## Check (and as root install) the host programs the test ground uses.
	@hack/host-deps.sh
busybox: ## Provision a static busybox from Debian's busybox-static into the cache (no host install).
	@hack/busybox/provision.sh
promtool: host-deps ## Provision Prometheus, promtool and mysqld_exporter from Debian sid's packages into the cache (no host install).
	@hack/prometheus/provision.sh >/dev/null
mysql: host-deps ## Provision Oracle MySQL from Debian sid into the cache (no host install).
	hack/mysql/provision.sh >/dev/null
	@cat $(DOLPHIN_MYSQL_DIR)/VERSION

.PHONY: etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy containerd coredns kwok
etcd:
	@$(BUILD_TOOL) etcd $(ETCD_VERSION) $(TOOLS)/etcd go.etcd.io/etcd/server/v3 -ldflags '-s -w'
kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy:
	@$(BUILD_TOOL) $@ $(KUBE_VERSION) $(TOOLS)/k8s k8s.io/kubernetes/cmd/$@ -ldflags '$(KUBE_LDFLAGS)'
# containerd, its runc shim and ctr, static (no cgo: the storage drivers that need it are tagged out).
CONTAINERD_PKG := github.com/containerd/containerd/v2
CONTAINERD_FLAGS := -tags 'no_btrfs no_devmapper no_zfs no_aufs urfave_cli_no_docs' \
  -ldflags '-s -w -X $(CONTAINERD_PKG)/version.Version=$(CONTAINERD_VERSION) -X $(CONTAINERD_PKG)/version.Revision=$(CONTAINERD_VERSION)'
containerd:
	@for c in containerd containerd-shim-runc-v2 ctr; do \
	  $(BUILD_TOOL) $$c $(CONTAINERD_VERSION) $(TOOLS)/containerd $(CONTAINERD_PKG)/cmd/$$c $(CONTAINERD_FLAGS); done
# CoreDNS with only the plugins the ground's Corefile uses (hack/tools/coredns/main.go).
coredns:
	@$(BUILD_TOOL) coredns $(COREDNS_VERSION)-ground $(TOOLS)/coredns . -ldflags '-s -w'
kwok:
	@$(BUILD_TOOL) kwok $(KWOK_VERSION) $(TOOLS)/kwok sigs.k8s.io/kwok/cmd/kwok -ldflags '-s -w'
	@hack/kwok-stages.sh $(KWOK_VERSION)

.PHONY: controller-gen kustomize operator-sdk opm chainsaw golangci-lint olm versitygw moco
OLM_PKG := github.com/operator-framework/operator-lifecycle-manager
olm: ## OLM v0's olm and catalog operators, and the cpb and copy-content its util image carries (for make test-olm).
	@$(BUILD_TOOL) olm $(OLM_VERSION) $(TOOLS)/olm $(OLM_PKG)/cmd/olm -tags=containers_image_openpgp -ldflags '-s -w'
	@$(BUILD_TOOL) catalog-operator $(OLM_VERSION) $(TOOLS)/olm $(OLM_PKG)/cmd/catalog -tags=containers_image_openpgp -ldflags '-s -w'
	@$(BUILD_TOOL) cpb $(OLM_VERSION) $(TOOLS)/olm $(OLM_PKG)/util/cpb -ldflags '-s -w'
	@$(BUILD_TOOL) copy-content $(OLM_VERSION) $(TOOLS)/olm $(OLM_PKG)/cmd/copy-content -ldflags '-s -w'

controller-gen:
	@$(BUILD_TOOL) controller-gen $(CONTROLLER_GEN_VERSION) $(TOOLS)/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen -ldflags '-s -w'
kustomize:
	@$(BUILD_TOOL) kustomize $(KUSTOMIZE_VERSION) $(TOOLS)/kustomize sigs.k8s.io/kustomize/kustomize/v5 -ldflags '-s -w'
operator-sdk:
	@$(BUILD_TOOL) operator-sdk $(OPERATOR_SDK_VERSION) $(TOOLS)/operator-sdk $(SDK_PKG)/cmd/operator-sdk -tags=containers_image_openpgp -ldflags '$(SDK_LDFLAGS)'
	@$(BUILD_TOOL) scorecard-test $(OPERATOR_SDK_VERSION) $(TOOLS)/operator-sdk $(SDK_PKG)/images/scorecard-test -ldflags '-s -w'
GRPC_HEALTH_PROBE_VERSION := $(call modver,opm,github.com/grpc-ecosystem/grpc-health-probe)
opm: ## opm, and the grpc_health_probe its image carries (the version operator-registry pins).
	@$(BUILD_TOOL) opm $(OPM_VERSION) $(TOOLS)/opm github.com/operator-framework/operator-registry/cmd/opm -tags=json1,containers_image_openpgp -ldflags '-s -w'
	@$(BUILD_TOOL) grpc_health_probe $(GRPC_HEALTH_PROBE_VERSION) $(TOOLS)/opm github.com/grpc-ecosystem/grpc-health-probe -ldflags '-s -w'
VERSITYGW_VERSION := $(call modver,versitygw,github.com/versity/versitygw)
versitygw: ## An S3 server on a POSIX folder (versitygw), for backup tests.
	@$(BUILD_TOOL) versitygw $(VERSITYGW_VERSION) $(TOOLS)/versitygw github.com/versity/versitygw/cmd/versitygw \
	  -ldflags '-s -w -X main.Version=$(VERSITYGW_VERSION) -X main.Build=$(VERSITYGW_VERSION)'
MOCO_VERSION := $(call modver,moco,github.com/cybozu-go/moco)
moco: ## The peer operator the scale benchmark measures Dolphin against (cybozu-go/moco's controller).
	@$(BUILD_TOOL) moco-controller $(MOCO_VERSION) $(TOOLS)/moco github.com/cybozu-go/moco/cmd/moco-controller -ldflags '-s -w'
# cert-manager's CRDs, from its module on the Go module proxy (its controller's module is not
# served there): the deploy tier installs them so that the chart's Issuers and Certificates
# are checked against the real schemas.
CERT_MANAGER_VERSION ?= v1.21.2
export DOLPHIN_CERT_MANAGER_CRDS := $(DOLPHIN_CACHE)/cert-manager/$(CERT_MANAGER_VERSION)/crds
.PHONY: cert-manager-crds
cert-manager-crds:
	@if [ ! -f $(DOLPHIN_CERT_MANAGER_CRDS)/cert-manager.io_certificates.yaml ]; then \
	  dir=$$(go mod download -json github.com/cert-manager/cert-manager@$(CERT_MANAGER_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p') && \
	  test -n "$$dir" && mkdir -p $(DOLPHIN_CERT_MANAGER_CRDS) && cp $$dir/deploy/crds/cert-manager.io_*.yaml $(DOLPHIN_CERT_MANAGER_CRDS)/ && \
	  echo "cert-manager $(CERT_MANAGER_VERSION) CRDs in $(DOLPHIN_CERT_MANAGER_CRDS)"; fi
KREW_VERSION := $(call modver,krew,sigs.k8s.io/krew)
krew: ## krew (as kubectl-krew) and its manifest validator, for the plugin's release test.
	@$(BUILD_TOOL) kubectl-krew $(KREW_VERSION) $(TOOLS)/krew sigs.k8s.io/krew/cmd/krew -ldflags '-s -w'
	@$(BUILD_TOOL) validate-krew-manifest $(KREW_VERSION) $(TOOLS)/krew sigs.k8s.io/krew/cmd/validate-krew-manifest -ldflags '-s -w'
golangci-lint:
	@$(BUILD_TOOL) golangci-lint $(GOLANGCI_LINT_VERSION) $(TOOLS)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint -ldflags '-s -w'
chainsaw:
	@$(BUILD_TOOL) chainsaw $(CHAINSAW_VERSION) $(TOOLS)/chainsaw github.com/kyverno/chainsaw -ldflags '-s -w'
