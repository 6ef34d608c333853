# memcached-operator. The two commands that matter:
#   make run    run the operator (on a local control plane when KUBECONFIG is unset)
#   make test   every test: formatting, lints, unit, integration (every fuzz seed and past crash
#               replayed among them), end-to-end, bundle validation and supply-chain checks
# Both install what they need (crates, Go-built tools under .tools/) on first use.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
CARGO ?= cargo
# In CI (a fresh clone, every crate built once): no incremental compilation of the workspace's
# crates, whose caches a single build only writes and never reads (common practice in Rust
# projects' CI, tokio's tracing and Vector among them).
ifeq ($(CI),true)
export CARGO_INCREMENTAL ?= 0
endif

.PHONY: help build run olm test test-full test-under-load lint fmt-check clippy clippy-workspace clippy-job clippy-fuzz house \
	test-rust tools test-tools deny tool-cargo-deny

## help: list the targets.
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## /  /'

## build: compile the operator and the packaging tool.
build:
	$(CARGO) build --locked --workspace --bins

## tools: install every pinned tool into .tools/bin (seconds when already there).
tools:
	hack/tools.sh

# The tools the tests run: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# kubelet, kube-proxy, etcd, containerd, CoreDNS, kustomize, OLM (olm, catalog, cpb),
# cert-manager (controller, cainjector; helm renders its CRDs), OpenShift's APIServer CRD, the
# Prometheus Operator (its CRDs, ClusterRoles, operator and config reloader), opm and
# grpc_health_probe, memcached_exporter, Prometheus and its promtool (the alerting rules' unit
# tests), and Debian's memcached, node packages (runc, CNI plugins, iptables) and image tools
# (buildah, skopeo, registry).
# E2E_TOOLS are what tests/e2e needs, NODE_TOOLS what the suites on the real node add
# (tests/node's scorecard scenario adds operator-sdk, which hack/scorecard.sh installs, and its
# monitoring scenario Prometheus, of ALERT_TOOLS), OLM_TOOLS what tests/olm adds to those, and
# ALERT_TOOLS what the alerting rules' tests add.
E2E_TOOLS := memcached node images kube etcd kustomize helm cert-manager openshift-api prometheus-operator
NODE_TOOLS := containerd coredns memcached-exporter
OLM_TOOLS := olm opm grpc-health-probe
ALERT_TOOLS := promtool
# What the node-tools job builds, in the order the steps need it.
NODE_JOB_TOOLS := $(NODE_TOOLS) $(ALERT_TOOLS) operator-sdk $(OLM_TOOLS)
test-tools:
	hack/tools.sh $(E2E_TOOLS) $(NODE_JOB_TOOLS)

## lint: rustfmt and clippy, warnings as errors, and the house rules (`make house`).
lint: fmt-check clippy house

fmt-check:
	$(CARGO) fmt --all --check
	$(CARGO) fmt --check --manifest-path fuzz/Cargo.toml

## house: no file over 600 lines in src/, packager/, testkit/, hack/; no circle of imports
## between two files, nor between two folders, of src/ (tests/house.rs, testkit::house).
house:
	$(CARGO) test --locked --test house

## clippy: the workspace's crates and the fuzz targets (clippy-fuzz), warnings as errors.
clippy: clippy-workspace clippy-fuzz

# In a build directory of its own (target/clippy), so that make test can run it beside the
# test builds and suites, which hold cargo's lock on target/ while they run.
clippy-workspace:
	CARGO_TARGET_DIR=target/clippy $(CARGO) clippy --locked --workspace --all-targets -- -D warnings

# In the fuzz workspace's own target directory, fuzz/target, where cargo-fuzz builds too.
clippy-fuzz:
	$(CARGO) clippy --locked --manifest-path fuzz/Cargo.toml -- -D warnings

## test-rust: unit and integration tests of every crate (the suites run the binaries that
## cargo test builds for them, CARGO_BIN_EXE_*, so no other debug build of the workspace is
## made: one would compile tokio and its dependents again without the features the tests
## add, tokio's test-util among them), then the end-to-end tests, which
## plain `cargo test` lists as ignored (they start their own control plane from .tools/bin):
## the operator's as a process (e2e, no node), then on a real node (kubelet, containerd, the
## images built from the shipped Dockerfiles): installed with `make deploy` and the real
## cert-manager (deploy), from the chart in the local registry with helm (helm), the node's
## own (node), and through the real OLM (olm), whose tools
## are the last built; then the alerting rules' unit tests with Prometheus's promtool
## (tests/alerts), which nothing before needs; after each
## suite, that its clusters left nothing on the machine (LEFTOVERS). The suites mostly wait
## (on the kubelet, OLM, the control plane) and leave a core idle, so tests/e2e, which needs
## no node, runs beside the three on the node, as a job (hack/background.sh; its test binary
## run directly, since cargo holds the build directory's lock while its tests run), with its
## whole report printed when it ends; and what a later step needs is built beside the earlier
## ones: the operator's release binary (which deploy's images hold), and under make test the
## tools themselves (TOOL_JOBS) from the start. A step that needs a tool a job has not reached
## yet builds it itself, one that a job is building waits for it (hack/tools.sh locks each
## tool), so OLM's tools build beside tests/deploy and tests/node.
LEFTOVERS = @echo "hack/node.sh leftovers  \# what the suite's clusters left on this machine" && \
  hack/node.sh leftovers || { echo "the suite's clusters left the above behind"; exit 1; }
E2E_BINARY = $(CARGO) test --locked -p memcached-operator --test e2e --no-run 2>&1 | \
  sed -n 's/^ *Executable .*(\(.*\))$$/\1/p'
test-rust:
	$(CARGO) test --locked --workspace
	hack/background.sh wait e2e-tools
	hack/tools.sh $(E2E_TOOLS)
	$(if $(JOBS_STARTED),,hack/background.sh start --nice 5 operator-binary hack/images.sh operator-binary)
	@e2e="$$($(E2E_BINARY))" && [[ -x "$$e2e" ]] || { echo "no test binary for tests/e2e"; exit 1; }; \
	  echo "hack/background.sh start --nice 0 e2e $$e2e --ignored $(E2E_SCENARIOS)"; \
	  hack/background.sh start --nice 0 e2e "$$e2e" --ignored $(E2E_SCENARIOS)
	hack/tools.sh $(NODE_TOOLS)
	hack/background.sh wait operator-binary
	$(CARGO) test --locked -p memcached-operator --test deploy -- --ignored $(DEPLOY_SCENARIOS)
	$(LEFTOVERS)
	$(CARGO) test --locked -p memcached-operator --test helm -- --ignored
	$(LEFTOVERS)
	$(CARGO) test --locked -p memcached-operator --test node -- --ignored $(NODE_SCENARIOS)
	$(LEFTOVERS)
	hack/tools.sh $(OLM_TOOLS)
	$(CARGO) test --locked -p memcached-operator --test olm -- --ignored $(OLM_SCENARIOS)
	$(LEFTOVERS)
	hack/tools.sh $(ALERT_TOOLS)
	$(CARGO) test --locked -p memcached-operator --test alerts -- --ignored
	hack/background.sh wait --log e2e
	$(LEFTOVERS)
	hack/background.sh wait node-tools
	hack/background.sh wait ahead

## test-under-load: every suite of test-rust (unit, integration, e2e, deploy, olm, node) while
## one stress-ng CPU worker per core competes at normal priority (hack/under-load.sh), to
## show that no wait measures the machine's speed.
test-under-load: test-tools
	hack/under-load.sh $(MAKE) --no-print-directory test-rust

## NODE_SCENARIOS, DEPLOY_SCENARIOS, OLM_SCENARIOS and E2E_SCENARIOS: what tests/node,
## tests/deploy, tests/olm and tests/e2e run (libtest's filters). So that a cold run stays
## within the hour, make test skips tests/node's two slowest drills, the API server and etcd
## restarted while 300 Memcacheds are created (about 11 minutes together); tests/deploy's
## control experiment, a self-signed renewal served without waiting for the caBundles, which
## shows writes failing for as long as the new CA is not trusted (about 100 s); tests/olm's
## check-bundle verdicts against OLM's on 21 bundle variants (about 200 s); and tests/e2e's
## thousand Memcacheds created and deleted (about 250 s of both cores beside the node's
## suites); make test-full runs all five.
NODE_SCENARIOS ?= --skip _while_memcacheds_are_created_
DEPLOY_SCENARIOS ?= --skip without_waiting_for_the_ca_bundles
OLM_SCENARIOS ?= --skip check_bundle_and_olm_agree_on_every_bundle_variant
E2E_SCENARIOS ?= --skip a_thousand_memcacheds_created_and_deleted_leave_no_record_behind

## test: everything CI runs. The tools build from the start, beside the Rust builds and the
## suites (hack/background.sh; each job's log is in target/background/): what tests/e2e needs
## and the operator's musl release binary that deploy's images hold (nice 0, as the steps;
## its fat LTO runs on one core), the node's tools, OLM's and promtool, in the order the steps
## need them (nice 5), the workspace's clippy (nice 10, in target/clippy, a build directory of
## its own so that it never waits for cargo's lock on target/ nor holds it), then hadolint and
## cargo-deny (nice 19); each step waits for the job that builds what it uses (which runs at
## the step's nice from then on), and clippy's verdict is waited for after the suites.
## The machine is busy from start to end on two cores, so a job that nothing waits for early
## goes where the suites leave a core idle. The fuzz targets' clippy (a check of every crate
## again, in their own workspace) is left to make lint and make clippy, and fuzzing to make
## fuzz and make fuzz-smoke: their libFuzzer build costs more CPU than any other tool (1,929
## CPU-seconds optimised, 925 unoptimised), while tests/fuzz_seeds.rs replays every seed and
## past crash through the same checks in the ordinary test build.
TOOL_JOBS = hack/background.sh start --nice 0 e2e-tools hack/tools.sh $(E2E_TOOLS) && \
  hack/background.sh start --nice 0 operator-binary hack/images.sh operator-binary && \
  hack/background.sh start --nice 5 node-tools hack/tools.sh $(NODE_JOB_TOOLS) && \
  hack/background.sh start --nice 10 clippy $(MAKE) --no-print-directory clippy-workspace && \
  hack/background.sh start ahead hack/tools.sh hadolint cargo-deny
TEST_STEPS = fmt-check house test-rust clippy-job deny validate
JOBS = e2e-tools operator-binary node-tools clippy ahead e2e
test:
	@$(TOOL_JOBS)
	@echo "make $(TEST_STEPS)"
	@$(MAKE) --no-print-directory $(TEST_STEPS) JOBS_STARTED=1 || \
	  { status=$$?; hack/background.sh stop $(JOBS); exit $$status; }

# make test's clippy, run as a job from the start: its verdict.
clippy-job:
	hack/background.sh wait --log clippy

## test-full: make test with every scenario, the five make test skips too.
test-full:
	$(MAKE) --no-print-directory test NODE_SCENARIOS= DEPLOY_SCENARIOS= OLM_SCENARIOS= \
	  E2E_SCENARIOS=

## deny: licenses, banned and duplicate crates, crate sources, and security advisories when
## the advisory database can be fetched (see deny.toml and README, Dependencies).
## DENY_ADVISORIES=required: fail when it cannot be fetched.
DENY_ADVISORIES ?= auto
CARGO_DENY = $(TOOLS_BIN)/cargo-deny
deny: tool-cargo-deny
	$(CARGO_DENY) --locked check bans licenses sources
	@if timeout 120 $(CARGO_DENY) --locked fetch db >.tools/deny-fetch.log 2>&1; then \
	  echo "$(CARGO_DENY) --locked check --disable-fetch advisories"; \
	  $(CARGO_DENY) --locked check --disable-fetch advisories; \
	elif [ "$(DENY_ADVISORIES)" = required ]; then \
	  cat .tools/deny-fetch.log; echo "deny: the advisory database cannot be fetched"; exit 1; \
	else \
	  echo "deny: advisories: NOT checked: the RustSec database cannot be fetched here"; \
	  echo "      ($$(grep . .tools/deny-fetch.log | tail -n 1)); licenses, bans and sources are checked"; \
	fi

## run: run the operator. Without KUBECONFIG: installs it through the real OLM on a local
## cluster with a real node (kubelet, containerd; the images built from the shipped
## Dockerfiles), then the samples, prints how to reach a server by its DNS name, and follows
## the operator's logs (Ctrl-C stops all). With KUBECONFIG: the operator alone against that
## cluster.
run: test-tools
	@if [ -n "$${KUBECONFIG:-}" ]; then $(MAKE) --no-print-directory build; fi
	hack/run.sh

## olm: start the local control plane with a real node and OLM v0 on it, in the background
## (see docs/local-cluster.md); `hack/control-plane.sh stop` stops both.
olm: test-tools
	NODE=kubelet hack/control-plane.sh start
	hack/olm.sh start

# ==== OLM packaging: images, bundle, catalog, install (generator) ====================
# Everything under bundle/, catalog/, config/ and charts/ (and bundle.Dockerfile, catalog.Dockerfile)
# is written by `memcached-packager generate`; edit the Rust declarations, not the YAML.

CARGO_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
VERSION ?= $(CARGO_VERSION)
REGISTRY ?= quay.io/f2367556
IMG ?= $(REGISTRY)/memcached-operator:v$(VERSION)
BUNDLE_IMG ?= $(REGISTRY)/memcached-operator-bundle:v$(VERSION)
CATALOG_IMG ?= $(REGISTRY)/memcached-operator-catalog:v$(VERSION)
CONTAINER_TOOL ?= docker
KUBECTL ?= kubectl
# Where make bundle writes and bundle-build and catalog-build build from (a release's pinned
# output goes elsewhere than the committed files: docs/releasing.md).
OUTPUT_DIR ?= .

TOOLS_BIN := .tools/bin
OPERATOR_SDK := $(TOOLS_BIN)/operator-sdk
OPM := $(TOOLS_BIN)/opm
KUSTOMIZE := $(TOOLS_BIN)/kustomize
HADOLINT := $(TOOLS_BIN)/hadolint
HELM := $(TOOLS_BIN)/helm
GENERATE := env -u SOURCE_DATE_EPOCH $(CARGO) run --quiet --locked -p memcached-packager -- generate

.PHONY: generate bundle operator-binary images scorecard docker-build docker-push bundle-build bundle-push catalog-build \
	catalog-push install uninstall deploy undeploy validate tool-operator-sdk tool-opm \
	tool-kustomize tool-hadolint tool-promtool tool-helm check-version helm-install helm-uninstall

# hack/tools.sh installs a pinned tool into .tools/bin (and returns at once when it is there).
PACKAGING_TOOLS := operator-sdk opm kustomize hadolint promtool helm
$(addprefix tool-,$(PACKAGING_TOOLS) cargo-fuzz cargo-deny): tool-%:
	hack/tools.sh $*

check-version:
	@test "$(VERSION)" = "$(CARGO_VERSION)" || { \
	  echo "VERSION=$(VERSION) but Cargo.toml says $(CARGO_VERSION): bump Cargo.toml and"; \
	  echo "RELEASES in packager/src/release.rs, then run make bundle"; exit 1; }

## generate: rewrite bundle/, catalog/, config/, charts/ and the bundle and catalog Dockerfiles.
generate:
	$(GENERATE)

## bundle: generate for IMG and BUNDLE_IMG into OUTPUT_DIR, then validate the bundle;
## USE_IMAGE_DIGESTS=true names every image by the digest its registry gives (generate
## --image-digests, docs/releasing.md).
bundle: check-version tool-operator-sdk
	$(GENERATE) --output-dir $(OUTPUT_DIR) --image $(IMG) --bundle-image $(BUNDLE_IMG) \
	  $(if $(filter true,$(USE_IMAGE_DIGESTS)),--image-digests)
	$(OPERATOR_SDK) bundle validate $(OUTPUT_DIR)/bundle --select-optional suite=operatorframework

## operator-binary: the release binary the operator image holds (x86_64-unknown-linux-musl,
## jemalloc), which docker-build copies in.
operator-binary:
	hack/images.sh operator-binary

## scorecard: operator-sdk scorecard on the shipped bundle, all six tests of its configuration,
## on the local cluster's real node with the images built here (without KUBECONFIG, or with
## one naming that cluster), or against the cluster KUBECONFIG names (STORAGE_IMAGE and
## UNTAR_IMAGE replace scorecard's helper images) (hack/scorecard.sh).
scorecard:
	hack/scorecard.sh

## images: build every image the local cluster's node runs (operator, bundle, catalog, opm,
## the stand-ins, CoreDNS) with buildah and push them to this checkout's registry
## (hack/registry.sh; docs/packaging.md, Images); an unchanged image is not rebuilt.
images:
	hack/images.sh build
	hack/registry.sh release

docker-build: operator-binary
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) -t $(IMG) .

docker-push:
	$(CONTAINER_TOOL) push $(IMG)

bundle-build:
	$(CONTAINER_TOOL) build -f $(OUTPUT_DIR)/bundle.Dockerfile -t $(BUNDLE_IMG) $(OUTPUT_DIR)

bundle-push:
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

catalog-build: tool-opm
	$(OPM) validate $(OUTPUT_DIR)/catalog
	$(CONTAINER_TOOL) build -f $(OUTPUT_DIR)/catalog.Dockerfile -t $(CATALOG_IMG) $(OUTPUT_DIR)

catalog-push:
	$(CONTAINER_TOOL) push $(CATALOG_IMG)

## install / uninstall: the CRD alone (with its conversion webhook) into the current cluster.
install: tool-kustomize
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

uninstall: tool-kustomize
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

## deploy / undeploy: everything in config/default, with cert-manager issuing the webhooks'
## certificate. Without KUBECONFIG: onto the local cluster with a real node (started if it is
## not running), the images built from the shipped Dockerfiles, with cert-manager from .tools
## (hack/deploy.sh, docs/local-cluster.md); `hack/control-plane.sh stop` stops it all. With KUBECONFIG: into that
## cluster, which must run cert-manager, running IMG.
DEFAULT_IMG := $(REGISTRY)/memcached-operator:v$(CARGO_VERSION)
deploy: tool-kustomize
	@if [ -z "$${KUBECONFIG:-}" ]; then \
	  test "$(IMG)" = "$(DEFAULT_IMG)" || { \
	    echo "deploy: the local cluster's node runs the release's image only ($(DEFAULT_IMG)), not IMG=$(IMG)"; exit 1; }; \
	  NODE=kubelet hack/deploy.sh start >/dev/null; \
	else \
	  tmp="$$(mktemp -d)" && trap 'rm -rf "$$tmp"' EXIT && \
	  $(GENERATE) --image $(IMG) --bundle-image $(BUNDLE_IMG) --output-dir "$$tmp" >/dev/null && \
	  $(KUSTOMIZE) build "$$tmp/config/default" | $(KUBECTL) apply --server-side -f -; \
	fi

undeploy: tool-kustomize
	@if [ -z "$${KUBECONFIG:-}" ]; then \
	  hack/deploy.sh undeploy; \
	else \
	  $(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -; \
	fi

## helm-install / helm-uninstall: the chart (charts/memcached-operator) pushed to the local
## registry as an OCI artifact and installed from there with helm, with cert-manager issuing
## the webhooks' certificate (CERTIFICATES=operator: the operator's own self-signed one, no
## cert-manager), onto the local cluster with a real node (started if it is not running;
## hack/helm.sh, docs/installing.md); `hack/control-plane.sh stop` stops it all.
helm-install:
	@test -z "$${KUBECONFIG:-}" || { echo "helm-install: for the local cluster (KUBECONFIG unset);" \
	  "for another cluster: helm install memcached-operator charts/memcached-operator" \
	  "--namespace memcached-operator-system --create-namespace (docs/installing.md)"; exit 1; }
	hack/helm.sh start >/dev/null

helm-uninstall:
	hack/helm.sh uninstall

## validate: the committed files are what the generator writes, the bundle passes
## operator-sdk's operatorframework suite with no error and no warning, its multiarch
## validator inspects the images the CSV names with podman, pulled through the local
## registry's mirror (hack/images.sh builds the operator's first) and finds their platforms,
## labels and node affinity in agreement (the warnings it may give are that the upstream
## images the CSV defaults to, the operand memcached:1.6.39-alpine and memcached_exporter,
## cannot be pulled here: no copy of them is built here, and a rebuild under their names would
## be inspected in their place; see docs/packaging.md, Platforms), the catalog passes opm, config/default renders, Prometheus's promtool parses
## every query of the Grafana dashboard (config/grafana), the Helm chart passes `helm lint
## --strict` and the real helm and kustomize agree with it (packager/tests/chart.rs: its
## schema refuses unknown and mistyped values, it renders what config/default does, the
## operator accepts every flag it passes), and hadolint finds nothing in the three
## Dockerfiles nor in those of the local cluster's images (hack/images/).
OPERAND_IMAGE := docker.io/library/memcached:1.6.39-alpine
EXPORTER_IMAGE := quay.io/prometheus/memcached-exporter:v0.14.4
validate: tool-operator-sdk tool-opm tool-kustomize tool-hadolint tool-promtool tool-helm
	@tmp="$$(mktemp -d)" && trap 'rm -rf "$$tmp"' EXIT && \
	  $(GENERATE) --output-dir "$$tmp" >/dev/null && \
	  for d in bundle catalog config charts; do diff -r "$$tmp/$$d" "$$d" || exit 1; done && \
	  for f in bundle.Dockerfile catalog.Dockerfile; do diff "$$tmp/$$f" "$$f" || exit 1; done || \
	  { echo "generated files drifted: run make generate and commit"; exit 1; }
	@out="$$($(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework 2>&1)"; \
	  status=$$?; echo "$$out"; \
	  if [ $$status -ne 0 ] || echo "$$out" | grep -Eq 'level=(warning|error)'; then \
	    echo "operator-sdk bundle validate: errors or warnings"; exit 1; fi
	hack/images.sh build operator
	@grep -q 'image: $(OPERAND_IMAGE)$$' bundle/manifests/*.clusterserviceversion.yaml || \
	  { echo "the CSV's operand image is not $(OPERAND_IMAGE): update OPERAND_IMAGE"; exit 1; }
	@grep -q 'image: $(EXPORTER_IMAGE)$$' bundle/manifests/*.clusterserviceversion.yaml || \
	  { echo "the CSV's exporter image is not $(EXPORTER_IMAGE): update EXPORTER_IMAGE"; exit 1; }
	@trap 'hack/registry.sh release' EXIT && eval "$$(hack/images.sh env)" && \
	  out="$$($(OPERATOR_SDK) bundle validate ./bundle --select-optional name=multiarch \
	    --optional-values=container-tools=podman 2>&1)" && status=0 || status=$$?; echo "$$out"; \
	  unexplained="$$(grep -E 'level=(warning|error)' <<<"$$out" \
	    | grep -Fv -e 'unable to inspect the image ($(OPERAND_IMAGE))' \
	      -e 'unable to inspect the image ($(EXPORTER_IMAGE))' || true)"; \
	  if [ $$status -ne 0 ] || [ -n "$$unexplained" ]; then \
	    echo "operator-sdk multiarch: the images' platforms, the labels or the node affinity disagree"; exit 1; fi; \
	  echo "multiarch: the operator image inspected (linux/amd64, as the labels and node affinity say);" \
	    "$(OPERAND_IMAGE) and $(EXPORTER_IMAGE) cannot be pulled here (upstream's images: no copy of them is built here)"
	$(OPM) validate catalog
	$(KUSTOMIZE) build config/default >/dev/null
	$(HELM) lint --strict charts/memcached-operator --namespace memcached-operator-system
	$(CARGO) test --locked -p memcached-packager --test chart -- --ignored
	$(CARGO) test --locked -p memcached-operator --test alerts -- --ignored the_dashboards_queries
	$(HADOLINT) Dockerfile bundle.Dockerfile catalog.Dockerfile hack/images/*/Dockerfile
# ==== end of OLM packaging ==============================================================

# ==== benchmarks =========================================================================
.PHONY: bench bench-micro bench-load bench-controller

## bench: micro-benchmarks, then the webhooks under load (release build, TLS echo as the
## floor), memory, start-up and generate, then `run` with 1,000 Memcacheds on a local
## control plane; writes target/bench/results.{json,md} and controller.json (~10 min).
bench: bench-micro bench-load bench-controller

## bench-micro: criterion benchmarks of defaulting, validation, reviews and conversion.
bench-micro:
	$(CARGO) bench --locked --bench admission --bench conversion -- \
	  --warm-up-time 1 --measurement-time 2

bench-load:
	$(CARGO) build --locked --release -p memcached-packager
	$(CARGO) bench --locked --bench load

## bench-controller: `run` with BENCH_OBJECTS (default 1000; a list such as "1000 3000"
## runs each size in turn) Memcached objects in its caches: reconcile time, memory, API
## requests per object by verb (from the API server's audit log of the operator's
## ServiceAccount, first pass and steady state), create-burst slowdown; then the peer,
## operator-sdk's memcached sample (hack/tools.sh peer), measured the same way on a control
## plane of its own; the whole BENCH_ROUNDS times (default 1), interleaved. A run that has not
## settled BENCH_SETTLE_LIMIT seconds (default 3600) after its create says so in its JSON
## (`"settled": false`). Each run's JSON in target/bench/ (controller.json and
## peer-controller.json, the last run's, and NAME-N-ROUND.json).
BENCH_OBJECTS ?= 1000
BENCH_ROUNDS ?= 1
BENCH_SETTLE_LIMIT ?= 3600
bench-controller: test-tools
	$(CARGO) build --locked --release -p memcached-operator
	hack/tools.sh peer
	for round in $$(seq $(BENCH_ROUNDS)); do \
	  for objects in $(BENCH_OBJECTS); do \
	    for subject in operator peer; do \
	      SUBJECT=$$subject SETTLE_LIMIT=$(BENCH_SETTLE_LIMIT) \
	        hack/bench-controller.sh $$objects || exit 1; \
	      name=$$([ $$subject = operator ] && echo controller || echo peer-controller); \
	      cp target/bench/$$name.json target/bench/$$name-$$objects-$$round.json; \
	    done; \
	  done; \
	done
# ==== end of benchmarks ==================================================================

# ==== fuzzing ============================================================================
.PHONY: fuzz fuzz-smoke tool-cargo-fuzz

# The libFuzzer targets in fuzz/: review bodies to the webhooks, certificate PEM, bundle files.
FUZZ_TARGETS := admission_review conversion_review cert_pair bundle_manifests
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 15
FUZZ := CARGO_FUZZ=$(CURDIR)/$(TOOLS_BIN)/cargo-fuzz hack/fuzz.sh

## fuzz: run each fuzz target for FUZZ_SECONDS (default 60) with libFuzzer, on the stable
## toolchain; new inputs are kept in fuzz/.work/, crashes go to fuzz/artifacts/.
fuzz: tool-cargo-fuzz
	$(FUZZ) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

## fuzz-smoke: replay every seed and past crash, then fuzz each target FUZZ_SMOKE_SECONDS
## (default 15). Its build is unoptimised (cargo-fuzz --dev): 925 CPU-seconds cold instead of
## the optimised build's 1,929, for fewer executions a second in a pass this short.
FUZZ_SMOKE := FUZZ_BUILD_FLAGS="--sanitizer none --dev" $(FUZZ)
fuzz-smoke: tool-cargo-fuzz
	$(FUZZ_SMOKE) $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)
# ==== end of fuzzing =====================================================================
