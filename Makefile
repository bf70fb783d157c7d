# terravixens: two commands on a fresh machine (see README.md)
#   make synth   set up what synth needs (bindings; no provider binary, no Go), then synthesize the example site
#   make test    set up what the tests need (also the offline provider mirror), then lint and run the whole test suite
SHELL := /bin/bash
.DEFAULT_GOAL := synth

PIPENV_VERSION := 2026.0.3
export PATH := $(CURDIR)/node_modules/.bin:$(HOME)/.local/bin:$(PATH)
export PIPENV_VENV_IN_PROJECT := 1
export PIPENV_YES := 1
export PIPENV_NOSPIN := 1
export PIPENV_VERBOSITY := -1
export TERRAVIXENS_CACHE ?= $(HOME)/.cache/terravixens
# OpenTofu, when `make mirror` had to build it (no terraform >= 1.5 on PATH), is found after everything else.
export PATH := $(PATH):$(TERRAVIXENS_CACHE)/bin
# Provider installation (docs/adr/0013-provider-installation-modes.md): `registry` (default) leaves Terraform's own
# installation alone; `mirror` also builds the offline mirror. Nothing here exports a CLI config: see `provider-env`.
export TERRAVIXENS_PROVIDERS ?= registry
# No call home from Terraform or cdktf (checkpoint, telemetry), nor cdktf's daily npm version lookup. `npx cdktf` in a
# new shell gets the same from .npmrc (docs/adr/0031-guarded-cdktf-path.md).
export CHECKPOINT_DISABLE := 1
export DISABLE_VERSION_CHECK := 1
export CDKTF_DISABLE_PLUGIN_CACHE_ENV := 1
# jsii's runtime still calls util.isArray, deprecated in Node 22: this one warning is noise in every synth.
# cdktf get wants a heap limit in NODE_OPTIONS (it warns otherwise); the bindings need far less than 8 GiB.
export NODE_OPTIONS := --disable-warning=DEP0044 --max-old-space-size=8192

.PHONY: setup setup-test synth lint test test-unit test-integration test-fuzz-nightly mutation mirror tofu providers provider-env tools clean

BINDINGS := terravixens/_bindings
ASKED_MIRROR := $(if $(filter mirror,$(TERRAVIXENS_PROVIDERS)),mirror)
# npm, pip (and Go, when the mirror is needed) download and build side by side; then the bindings, which need
# both environments (`cdktf get` looks up the cdktf Python package in the pipenv environment) and the schemas
# that the mirror step may refresh. No --output-sync (it held a step's lines until the step ended): each long step
# runs under scripts/step.py, which prints its start at once, its lines as they come prefixed with its name, a
# heartbeat on a terminal (not in CI) and its duration at the end.
PARALLEL := $(MAKE) --no-print-directory -j3
STEP := python3 $(CURDIR)/scripts/step.py

setup:
	@$(PARALLEL) node_modules/.installed .venv/.installed $(ASKED_MIRROR)
	@$(MAKE) --no-print-directory $(BINDINGS)/.schema-stamp .venv/.editable .venv/.bytecode

# The integration tests run Terraform against the mirror: they opt in to it (the unit tests do not need it).
# The tests also need Talos' own validators (tools), built from the Go module proxy beside the rest, and OpenTofu
# (one integration path runs with it: tests/integration/test_opentofu.py).
TEST_MIRROR := mirror
TEST_TOFU := tofu
setup-test:
	@$(MAKE) --no-print-directory -j4 node_modules/.installed .venv/.installed-dev $(TEST_MIRROR) tools \
		cloud-init-schema $(TEST_TOFU)
	@$(MAKE) --no-print-directory $(BINDINGS)/.schema-stamp .venv/.editable .venv/.bytecode

# Debian's cloud-init, unpacked (not installed), for `cloud-init schema` on every rendered cloud-init document.
.PHONY: cloud-init-schema
cloud-init-schema:
	@tools/cloud-init/install.sh

node_modules/.installed: package.json package-lock.json
	@$(STEP) npm -- npm ci --no-audit --no-fund
	node --version
	touch $@

# Typed bindings in terravixens/_bindings/ (cdktf.json's codeMakerOutput; the package terravixens._bindings, ADR 0041)
# from the committed schemas (terravixens/schemas/): cdktf get, no Go, no Terraform CLI.
$(BINDINGS)/.schema-stamp: node_modules/.installed .venv/.installed providers.json cdktf.json $(wildcard terravixens/schemas/*.json)
	@$(STEP) bindings -- python3 scripts/providers.py bindings

# The package is installed editable by `pipenv sync`, before the bindings exist. They live inside the package
# (terravixens._bindings), which the editable finder maps whole; installing again once they exist checks that they
# import from any folder and installs the console scripts (terravixens, terravixens-terraform). The virtualenv's own
# setuptools builds it: no download.
.venv/.editable: .venv/.installed $(BINDINGS)/.schema-stamp pyproject.toml
	PYTHONWARNINGS=ignore pipenv run python -m pip install --quiet --no-deps --no-build-isolation --editable .
	cd / && $(CURDIR)/.venv/bin/python -c "import terravixens._bindings.proxmox.provider, terravixens.tfwrap"
	touch $@

# Bytecode of everything a synth imports, at both optimization levels (cdktf.json runs the app as `python -O`; the
# CLI and the tests run without -O), written once here as pip does at install. `pipenv run` sets
# PYTHONDONTWRITEBYTECODE for what it runs, so without this every synth would compile the bindings (and, under -O,
# cdktf itself) again (docs/adr/0027-synth-speed.md).
BYTECODE_IMPORTS := import sys; sys.dont_write_bytecode = False; import terravixens.stacks, terravixens.synth, terravixens.cli
.venv/.bytecode: .venv/.installed $(BINDINGS)/.schema-stamp $(shell find terravixens -path '$(BINDINGS)' -prune -o -name '*.py' -print)
	pipenv run python -c "$(BYTECODE_IMPORTS)"
	pipenv run python -O -c "$(BYTECODE_IMPORTS)"
	touch $@

# Talos' own config generator, patcher and validator, one binary per supported Talos minor (one go.v1.NN.mod and
# go.v1.NN.sum each), built from the Go module proxy; rebuilt only when the source or a module file changes
# (docs/adr/0014-talos-validate.md).
TALOS_VALIDATE := tools/talos-validate
TALOS_MINORS := $(patsubst $(TALOS_VALIDATE)/go.v%.mod,%,$(wildcard $(TALOS_VALIDATE)/go.v*.mod))
# etcd's own snapshot checks (etcdutl's `snapshot status`, bbolt, the appended sha256) and, for the tests, genuine
# snapshots from an embedded etcd on loopback: one binary (docs/adr/0030-etcd-snapshots.md).
ETCD_SNAPSHOT := tools/etcd-snapshot
# The gitops layer's judges (docs/adr/0043-chart-sources.md): the helm CLI (lint, template, and pull for vendoring
# charts) built from helm.sh/helm/v3 as its go.mod pins it, with the version stamps Helm's own Makefile sets; and
# k8s-decode, which decodes every rendered object strictly into its owner's Go API type.
HELM := tools/helm
K8S_DECODE := tools/k8s-decode
# age (filippo.io/age, the implementation siderolabs/talos-backup encrypts with): what `restore-etcd --from s3://…`
# decrypts an offsite backup with, and what the tests encrypt genuine snapshots with (docs/adr/0059).
AGE := tools/age
# The real control plane the day-2 tests run against (docs/adr/0058-real-control-plane-in-tests.md): kube-apiserver and
# kubectl built from k8s.io/kubernetes as tools/kube/go.mod pins it (each staging module replaced by its published
# v0 twin), with the version stamps Kubernetes' own hack/lib/version.sh sets; etcd and etcdutl from go.etcd.io/etcd as
# tools/etcd/go.mod pins it; the Flux and Cilium CRDs it serves, read from the Go module cache at the versions
# tools/crds/go.mod pins (its go.sum checks the module zips; bin/modules.json says where they are). Each go.mod is the
# one place its versions are written.
KUBE := tools/kube
ETCD := tools/etcd
CRDS := tools/crds
tools: $(TALOS_MINORS:%=$(TALOS_VALIDATE)/bin/talos-validate-v%) $(ETCD_SNAPSHOT)/bin/etcd-snapshot $(HELM)/bin/helm \
	$(K8S_DECODE)/bin/k8s-decode $(KUBE)/bin/kube-apiserver $(KUBE)/bin/kubectl $(ETCD)/bin/etcd $(ETCD)/bin/etcdutl \
	$(ETCD)/bin/machined $(CRDS)/bin/modules.json $(AGE)/bin/age

$(TALOS_VALIDATE)/bin/talos-validate-v%: $(TALOS_VALIDATE)/main.go $(TALOS_VALIDATE)/go.v%.mod $(TALOS_VALIDATE)/go.v%.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	@cd $(TALOS_VALIDATE) && GOTOOLCHAIN=local $(STEP) talos-validate-v$* -- go build -mod=readonly -trimpath -buildvcs=false -modfile=go.v$*.mod \
		-o bin/.talos-validate-v$*.tmp . && mv bin/.talos-validate-v$*.tmp bin/talos-validate-v$*

$(ETCD_SNAPSHOT)/bin/etcd-snapshot: $(wildcard $(ETCD_SNAPSHOT)/*.go) $(ETCD_SNAPSHOT)/go.mod $(ETCD_SNAPSHOT)/go.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	@cd $(ETCD_SNAPSHOT) && GOTOOLCHAIN=local $(STEP) etcd-snapshot -- go build -mod=readonly -trimpath -buildvcs=false \
		-o bin/.etcd-snapshot.tmp . && mv bin/.etcd-snapshot.tmp bin/etcd-snapshot

$(HELM)/bin/helm: $(HELM)/go.mod $(HELM)/go.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	cd $(HELM) && version=$$(awk '$$1 == "helm.sh/helm/v3" {print $$2}' go.mod) && \
		kube=$$(awk '$$1 == "k8s.io/client-go" {print $$2}' go.mod | cut -d. -f2) && \
		GOTOOLCHAIN=local go build -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w \
		-X helm.sh/helm/v3/internal/version.version=$$version \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$kube \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$kube" \
		-o bin/.helm.tmp helm.sh/helm/v3/cmd/helm && mv bin/.helm.tmp bin/helm

$(K8S_DECODE)/bin/k8s-decode: $(wildcard $(K8S_DECODE)/*.go) $(K8S_DECODE)/go.mod $(K8S_DECODE)/go.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	cd $(K8S_DECODE) && GOTOOLCHAIN=local go build -mod=readonly -trimpath -buildvcs=false \
		-o bin/.k8s-decode.tmp . && mv bin/.k8s-decode.tmp bin/k8s-decode

$(AGE)/bin/age: $(AGE)/go.mod $(AGE)/go.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	cd $(AGE) && GOTOOLCHAIN=local go build -mod=readonly -trimpath -buildvcs=false -ldflags "-s -w" \
		-o bin/.tmp/ filippo.io/age/cmd/age filippo.io/age/cmd/age-keygen && \
		mv bin/.tmp/age-keygen bin/age-keygen && mv bin/.tmp/age bin/age && rmdir bin/.tmp

# GOGC=400 for the compilers of these large builds: about a fifth less CPU (measured on k8s.io/api, 2-core machine),
# more memory per compile (0.7 GB instead of 0.5), the same binaries (the compiler's output does not depend on it).
KUBE_GOGC := GOGC=400
# No inlining (-l) in the packages of kube-apiserver and kubectl: less compiler work, for issue 28's budget of the cold
# `make setup-test` (ADR 0058: 384 s of CPU down to 319 s for the two at load 3-5, as growth over the other tools).
# `std=` keeps the Go standard library's default build: the other tools have already left it in the build cache, and
# it stays inlined. The start-up of the tests' control plane was not slower (ADR 0058). benchmarks/control_plane.py
# reads it.
KUBE_GCFLAGS := -gcflags=all=-l -gcflags=std=
# kube-apiserver first, kubectl after it (it reuses most of the build cache): one at a time on a small machine. The
# -ldflags are those Kubernetes' own build sets (hack/lib/version.sh), for the version go.mod requires (without them
# both report v0.0.0-master); the build date is the module's release time as the Go module proxy records it. The
# commit is not known from a module zip: gitCommit and gitTreeState stay unset, as upstream leaves them without one.
KUBE_LDFLAGS = set -- $$(GOTOOLCHAIN=local go list -mod=readonly -m \
		-f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes) && \
	ldflags=$$(for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do \
		echo "-X $$pkg.gitVersion=$$1 -X $$pkg.gitMajor=1 -X $$pkg.gitMinor=$$(echo $$1 | cut -d. -f2)" \
			"-X $$pkg.buildDate=$$2"; done)
$(KUBE)/bin/kube-apiserver: $(KUBE)/go.mod $(KUBE)/go.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	@cd $(KUBE) && $(KUBE_LDFLAGS) && $(KUBE_GOGC) GOTOOLCHAIN=local $(STEP) kube-apiserver -- go build -mod=readonly -trimpath \
		-buildvcs=false $(KUBE_GCFLAGS) -ldflags "-s -w $$ldflags" -o bin/.kube-apiserver.tmp k8s.io/kubernetes/cmd/kube-apiserver && \
		mv bin/.kube-apiserver.tmp bin/kube-apiserver

$(KUBE)/bin/kubectl: $(KUBE)/go.mod $(KUBE)/go.sum | $(KUBE)/bin/kube-apiserver
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	@cd $(KUBE) && $(KUBE_LDFLAGS) && $(KUBE_GOGC) GOTOOLCHAIN=local $(STEP) kubectl -- go build -mod=readonly -trimpath \
		-buildvcs=false $(KUBE_GCFLAGS) -ldflags "-s -w $$ldflags" -o bin/.kubectl.tmp k8s.io/kubernetes/cmd/kubectl && \
		mv bin/.kubectl.tmp bin/kubectl

$(ETCD)/bin/etcd: $(wildcard $(ETCD)/etcd/*.go) $(ETCD)/go.mod $(ETCD)/go.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	@cd $(ETCD) && $(KUBE_GOGC) GOTOOLCHAIN=local $(STEP) etcd -- go build -mod=readonly -trimpath -buildvcs=false \
		-o bin/.etcd.tmp ./etcd && mv bin/.etcd.tmp bin/etcd

$(ETCD)/bin/etcdutl: $(ETCD)/go.mod $(ETCD)/go.sum | $(ETCD)/bin/etcd
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	@cd $(ETCD) && $(KUBE_GOGC) GOTOOLCHAIN=local $(STEP) etcdutl -- go build -mod=readonly -trimpath -buildvcs=false \
		-o bin/.etcdutl.tmp go.etcd.io/etcd/etcdutl/v3 && mv bin/.etcdutl.tmp bin/etcdutl

# What Talos' machined asks the node's etcd member when talosctl calls its etcd API (tools/etcd/machined/main.go).
$(ETCD)/bin/machined: $(wildcard $(ETCD)/machined/*.go) $(ETCD)/go.mod $(ETCD)/go.sum | $(ETCD)/bin/etcdutl
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	@cd $(ETCD) && $(KUBE_GOGC) GOTOOLCHAIN=local $(STEP) machined -- go build -mod=readonly -trimpath -buildvcs=false \
		-o bin/.machined.tmp ./machined && mv bin/.machined.tmp bin/machined

$(CRDS)/bin/modules.json: $(CRDS)/go.mod $(CRDS)/go.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to download $@ (https://go.dev/dl/)"; exit 1; }
	cd $(CRDS) && mkdir -p bin && GOTOOLCHAIN=local go mod download -json $$(awk '$$2 ~ /^v[0-9]/ {print $$1}' go.mod) \
		> bin/.modules.json.tmp && mv bin/.modules.json.tmp bin/modules.json

# The offline provider mirror (Go builds of what the Go module proxy serves) and its CLI config, in the cache;
# also refreshes terravixens/schemas/<built>.json. Only the tests and TERRAVIXENS_PROVIDERS=mirror need it.
mirror:
	@$(STEP) mirror -- python3 scripts/providers.py mirror

# OpenTofu at the version pinned in providers.json (>= 1.11), built from the Go module proxy into the cache's bin/
# (on PATH for make); nothing is built when the binary there reports that version already.
tofu:
	python3 scripts/providers.py tofu

providers: mirror $(BINDINGS)/.schema-stamp

# Prints the exports of the selected mode: eval "$$(make -s provider-env TERRAVIXENS_PROVIDERS=mirror)"
provider-env:
	@python3 scripts/providers.py env

# Runtime packages only: synth needs no test tools.
.venv/.installed: Pipfile Pipfile.lock pyproject.toml
	command -v pipenv >/dev/null || python3 -m pip install --quiet --user "pipenv==$(PIPENV_VERSION)"
	@$(STEP) pipenv -- pipenv sync
	touch $@

# Runtime and test packages in one pass (the runtime stamp too).
.venv/.installed-dev: Pipfile Pipfile.lock pyproject.toml
	command -v pipenv >/dev/null || python3 -m pip install --quiet --user "pipenv==$(PIPENV_VERSION)"
	@$(STEP) pipenv -- pipenv sync --dev
	touch .venv/.installed $@

# cdktf's own validation runs `$${TERRAFORM_BINARY_NAME:-terraform} version` during synth (the built-in terraform_data
# resource needs Terraform >= 1.4): synth needs a Terraform CLI, though no provider. Say so before cdktf does.
synth: setup
	@command -v "$${TERRAFORM_BINARY_NAME:-terraform}" >/dev/null || { echo "make synth: no '$${TERRAFORM_BINARY_NAME:-terraform}' on PATH: cdktf runs it to check its version during synth. Install Terraform >= 1.5, or build OpenTofu with 'make mirror' and set TERRAFORM_BINARY_NAME=tofu." >&2; exit 2; }
	@$(STEP) --inherit synth -- cdktf synth --hide-diagnostics=false
	@echo "synthesized: $$(ls cdktf.out/stacks | tr '\n' ' ')"

# One worker per core, each taking whole test files (module fixtures such as the fake Proxmox stay in one worker).
# `make test PYTEST_PARALLEL=` runs in one process.
PYTEST_PARALLEL ?= -n auto --dist loadfile

# Lint and types, as configured in pyproject.toml ([tool.ruff], [tool.mypy]): ruff's rules, ruff's formatting (checked,
# never rewritten here) and mypy over terravixens/. mypy reads the generated bindings (terravixens/_bindings/) for the
# constructs' types. `make test` runs it first, so CI fails on a lint or type error before any test runs.
lint: .venv/.installed-dev $(BINDINGS)/.schema-stamp
	pipenv run ruff check
	pipenv run ruff format --check
	pipenv run mypy

test: setup-test
	@$(MAKE) --no-print-directory lint
	pipenv run pytest $(PYTEST_PARALLEL)

test-unit: TEST_MIRROR := $(ASKED_MIRROR)
test-unit: TEST_TOFU :=
test-unit: setup-test
	pipenv run pytest $(PYTEST_PARALLEL) -m "not integration and not fuzz_nightly"

test-integration: setup-test
	pipenv run pytest $(PYTEST_PARALLEL) -m integration

# Tens of thousands of mutated site files through `terravixens validate` (TERRAVIXENS_FUZZ_EXAMPLES, default 25000),
# and 10x the lifecycle walks of `make test` (TERRAVIXENS_WALK_EXAMPLES, default 200; tests/test_lifecycle_walk.py).
test-fuzz-nightly: setup-test
	pipenv run pytest -m fuzz_nightly tests/test_fuzz_site.py tests/test_lifecycle_walk.py

# Mutation testing of the code that keeps the lifecycle promise and the guard (not in `make test`; nightly): mutmut
# as pyproject.toml [tool.mutmut] configures it; the score per module, every survivor, and the survivors compared with
# tests/mutation_survivors.txt (scripts/mutation.py, docs/adr/0051-mutation-testing-and-size-sweep.md).
mutation: setup-test
	pipenv run python scripts/mutation.py

clean:
	rm -rf cdktf.out .pytest_cache mutants
