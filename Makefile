# terravixens: two commands on a fresh machine (see README.md)
#   make synth   set everything up, then synthesize the example site into cdktf.out/
#   make test    set everything up, then run the whole test suite
SHELL := /bin/bash
.DEFAULT_GOAL := synth

PIPENV_VERSION := 2026.0.3
export PATH := $(CURDIR)/node_modules/.bin:$(HOME)/.local/bin:$(PATH)
export PIPENV_VENV_IN_PROJECT := 1
export PIPENV_YES := 1
export PIPENV_NOSPIN := 1
export PIPENV_VERBOSITY := -1
export TERRAVIXENS_CACHE ?= $(HOME)/.cache/terravixens
export TF_CLI_CONFIG_FILE := $(TERRAVIXENS_CACHE)/terraform.rc
export CHECKPOINT_DISABLE := 1
export CDKTF_DISABLE_PLUGIN_CACHE_ENV := 1
# jsii's runtime still calls util.isArray, deprecated in Node 22: this one warning is noise in every synth.
# cdktf get wants a heap limit in NODE_OPTIONS (it warns otherwise); the bindings need far less than 8 GiB.
export NODE_OPTIONS := --disable-warning=DEP0044 --max-old-space-size=8192

.PHONY: setup synth test test-unit test-integration test-fuzz-nightly providers tools clean

# Order matters: `cdktf get` looks up the cdktf Python package in the pipenv environment.
setup: node_modules/.installed .venv/.installed imports/.schema-stamp tools

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	node --version
	touch $@

# Builds the providers the Go module proxy serves into a filesystem mirror, dumps their schemas into terravixens/schemas/,
# and regenerates the bindings in imports/ when terravixens/schemas/ changed (docs/adr/0003-offline-provider-toolchain.md).
providers imports/.schema-stamp: node_modules/.installed .venv/.installed providers.json cdktf.json $(wildcard terravixens/schemas/*.json)
	python3 scripts/providers.py

# Talos' own config generator, patcher and validator, one binary per supported Talos minor (one go.v1.NN.mod and
# go.v1.NN.sum each), built from the Go module proxy; rebuilt only when the source or a module file changes
# (docs/adr/0014-talos-validate.md).
TALOS_VALIDATE := tools/talos-validate
TALOS_MINORS := $(patsubst $(TALOS_VALIDATE)/go.v%.mod,%,$(wildcard $(TALOS_VALIDATE)/go.v*.mod))
tools: $(TALOS_MINORS:%=$(TALOS_VALIDATE)/bin/talos-validate-v%)

$(TALOS_VALIDATE)/bin/talos-validate-v%: $(TALOS_VALIDATE)/main.go $(TALOS_VALIDATE)/go.v%.mod $(TALOS_VALIDATE)/go.v%.sum
	@command -v go >/dev/null || { echo "Go >= 1.26.1 is needed to build $@ (https://go.dev/dl/)"; exit 1; }
	cd $(TALOS_VALIDATE) && GOTOOLCHAIN=local go build -mod=readonly -trimpath -buildvcs=false -modfile=go.v$*.mod \
		-o bin/.talos-validate-v$*.tmp . && mv bin/.talos-validate-v$*.tmp bin/talos-validate-v$*

.venv/.installed: Pipfile Pipfile.lock pyproject.toml
	command -v pipenv >/dev/null || python3 -m pip install --quiet --user "pipenv==$(PIPENV_VERSION)"
	pipenv sync --dev
	touch $@

synth: setup
	cdktf synth --hide-diagnostics=false
	@echo "synthesized: $$(ls cdktf.out/stacks | tr '\n' ' ')"

test: setup
	pipenv run pytest

test-unit: setup
	pipenv run pytest -m "not integration and not fuzz_nightly"

test-integration: setup
	pipenv run pytest -m integration

# Tens of thousands of mutated site files through `terravixens validate` (TERRAVIXENS_FUZZ_EXAMPLES, default 25000).
test-fuzz-nightly: setup
	pipenv run pytest -m fuzz_nightly tests/test_fuzz_site.py

clean:
	rm -rf cdktf.out .pytest_cache
