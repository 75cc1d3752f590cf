# Targets: test (the gate CI runs), lint, demo, bench, bench-quick, scale, diagrams.
# See docs/TESTING.md. PGDCB_TEST_DATABASE_URL and PGDCB_DATABASE_URL, set in
# the environment or on the command line (make test PGDCB_TEST_DATABASE_URL=...),
# reach the tests and programs; make passes both through without help, and an
# unset variable stays unset (not exported empty).

GO          ?= go
# Pinned tools live in the repository's own bin/ (git-ignored), made here:
# nothing is written to $(go env GOPATH)/bin, which a fresh Go install does
# not have.
TOOLBIN     := $(CURDIR)/bin
# staticcheck 2026.2.2 is module version v0.8.2 of honnef.co/go/tools.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TOOLBIN)/staticcheck-$(STATICCHECK_VERSION)
# golangci-lint runs depguard alone (.golangci.yml): the observability
# boundary, only pgdcbprom imports Prometheus and only pgdcbotel OpenTelemetry.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(TOOLBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
TESTFLAGS   ?= -race -count=1 -timeout 15m
# The modules: the core and the nested modules of the optional parts, each
# with a go.mod of its own (replace => this checkout), so that the core's
# go.mod requires none of their libraries. vet, staticcheck, depguard, the
# tidy check and the tests run in each; gofmt runs over the tree.
MODULES     := . pgdcbprom pgdcbotel outbox/jspublisher pgdcbtest/docker

.DEFAULT_GOAL := test
# The steps of test and lint run in order, even under make -j.
.NOTPARALLEL:
.PHONY: test lint fmt-check tidy-check migrations-check vet staticcheck depguard pg-check gotest gotest-modules faults soak-standby demo bench bench-quick bench-go explain schema

## test: gofmt check, go vet, staticcheck, a PostgreSQL found, then the race-enabled tests of every module (and the store's again with group commit off)
test: lint gotest

## lint: gofmt check, tidy modules, go vet, staticcheck and depguard (golangci-lint) in every module, no tests
lint: fmt-check tidy-check migrations-check vet staticcheck depguard

migrations-check:
	@echo "==> migrations unchanged (sql/checksums.txt)"
	@$(GO) test -count=1 -run '^(TestMigrationTextsNeverChange|TestFunctionChangesAddAStep)$$' ./sql/ >/dev/null || $(GO) test -count=1 -run '^(TestMigrationTextsNeverChange|TestFunctionChangesAddAStep)$$' ./sql/

## schema: rewrite sql/schema.sql from freshly migrated schemas (TestSchemaSQLIsCurrent, in test, fails when it is stale)
schema:
	@echo "==> go generate ./sql (writes sql/schema.sql)"
	@$(GO) generate ./sql

tidy-check:
	@for m in $(MODULES); do \
		echo "==> go mod tidy -diff (in $$m)"; \
		(cd $$m && $(GO) mod tidy -diff >/dev/null) || { echo "$$m: go.mod/go.sum are not tidy: run 'go mod tidy' there"; (cd $$m && $(GO) mod tidy -diff); exit 1; }; \
	done

fmt-check:
	@echo "==> gofmt -l ."
	@out="$$(gofmt -l .)"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi

vet:
	@for m in $(MODULES); do echo "==> go vet ./... (in $$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done

# go install into a scratch directory inside bin/, then one rename: an
# interrupted install leaves no half-written binary under the final name, and
# the scratch directory is removed whatever happens (trap).
$(STATICCHECK):
	@echo "==> installing staticcheck $(STATICCHECK_VERSION) into $(TOOLBIN)"
	@mkdir -p "$(TOOLBIN)" && tmp="$$(mktemp -d "$(TOOLBIN)/.install.XXXXXX")" && \
	trap 'rm -rf "$$tmp"' EXIT INT TERM && \
	GOBIN="$$tmp" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) && \
	mv "$$tmp/staticcheck" "$(STATICCHECK)"

staticcheck: | $(STATICCHECK)
	@for m in $(MODULES); do echo "==> staticcheck ./... (in $$m)"; (cd $$m && $(STATICCHECK) ./...) || exit 1; done

# Installed like staticcheck: go install of the pinned module version through
# the module proxy, into a scratch directory, then renamed.
$(GOLANGCI_LINT):
	@echo "==> installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(TOOLBIN)"
	@mkdir -p "$(TOOLBIN)" && tmp="$$(mktemp -d "$(TOOLBIN)/.install.XXXXXX")" && \
	trap 'rm -rf "$$tmp"' EXIT INT TERM && \
	GOBIN="$$tmp" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) && \
	mv "$$tmp/golangci-lint" "$(GOLANGCI_LINT)"

depguard: | $(GOLANGCI_LINT)
	@for m in $(MODULES); do \
		echo "==> golangci-lint run ./... (in $$m; depguard: the observability boundary, .golangci.yml)"; \
		(cd $$m && $(GOLANGCI_LINT) run --config "$(CURDIR)/.golangci.yml" ./...) || exit 1; \
	done

# pg-check finds the tests' PostgreSQL once, as gotest does (.ci/with-test-server:
# PGDCB_TEST_DATABASE_URL, else a server on 127.0.0.1:5432 or the unix
# socket, else a throwaway cluster from local binaries, else a container
# through the module pgdcbtest/docker where Docker answers) and, when there
# is none, stops with what was tried and what is missing.
pg-check:
	@GO="$(GO)" ./.ci/with-test-server true

# Every module's tests, run with the server .ci/with-test-server found (a
# container lives until they end). Group commit is on by default; the store
# and the executor are also tested on the per-call path
# (PGDCB_TEST_GROUP_COMMIT=0 sets GroupCommitDisabled).
gotest:
	@GO="$(GO)" ./.ci/with-test-server $(MAKE) --no-print-directory gotest-modules

gotest-modules:
	@for m in $(MODULES); do echo "==> go test $(TESTFLAGS) ./... (in $$m)"; (cd $$m && $(GO) test $(TESTFLAGS) ./...) || exit 1; done
	@echo "==> PGDCB_TEST_GROUP_COMMIT=0 go test $(TESTFLAGS) ./eventstore/ ./commands/ (group commit off)"
	@PGDCB_TEST_GROUP_COMMIT=0 $(GO) test $(TESTFLAGS) ./eventstore/ ./commands/

## fuzz: each fuzz test for FUZZTIME (default 10s; plain go test runs their seed corpora)
FUZZTIME ?= 10s
FUZZ_TARGETS := \
	./cursor:FuzzParse \
	./cursor:FuzzParseSnapshot \
	./tags:FuzzParse \
	./query:FuzzQueryJSON \
	./eventstore:FuzzModelUnmarshalState \
	./runstore:FuzzRunSnapshotJSON
.PHONY: fuzz
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; \
		echo "==> go test -run '^$$' -fuzz '^$$fn$$' -fuzztime $(FUZZTIME) $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## faults: the fault suite alone (it also runs in test), printing its figures
faults:
	@echo "==> go test -race -count=1 -v ./internal/testing/faults/ (crashes a throwaway cluster it starts)"
	@$(GO) test -race -count=1 -v ./internal/testing/faults/ 2>&1 | grep -E '^(---|ok|FAIL|PASS)|figures|^\||^  [0-9]'

## soak-standby: decision reads on a standby at 0, 50 and 500 ms of lag (and the primary), 8 writers, SOAK (30s) each, replayed from the log; not part of test
SOAK ?= 30s
soak-standby:
	@echo "==> PGDCB_STANDBY_SOAK=$(SOAK) go test -run TestStandbyDecisionsExactUnderLag ./eventstore/ (a throwaway primary and standby)"
	@PGDCB_STANDBY_SOAK=$(SOAK) $(GO) test -count=1 -timeout 30m -v -run '^TestStandbyDecisionsExactUnderLag$$' ./eventstore/

## demo: run the wallet demo against PGDCB_DATABASE_URL or a found server
demo:
	@echo "==> go run ./examples/demo"
	@$(GO) run ./examples/demo

## bench: the full benchmark
bench:
	@echo "==> go run ./bench (writes bench/PERFORMANCE.md, bench/results.json, bench/throughput.svg)"
	@$(GO) run ./bench --json bench/results.json --svg bench/throughput.svg --markdown bench/PERFORMANCE.md

## bench-quick: a short benchmark run
bench-quick:
	@echo "==> go run ./bench --quick"
	@$(GO) run ./bench --quick

## bench-go: the go test benchmarks of the store against their INSERT floors
bench-go:
	@echo "==> go test -bench ./eventstore"
	@$(GO) test ./eventstore -run '^$$' -bench . -benchtime 3s -timeout 30m

.PHONY: scale
## scale: the log-size study (#39 §2): one schema grown to 1M, 10M, 100M events, measured at each size (writes bench/scale/results.json, docs/SCALE.md, bench/scale/scale.svg). About half an hour and ~60 GB of disk (checked first); not part of test. SCALE_FLAGS: --dsn of a database of its own (docs/SCALE.md says on what server the committed study ran)
SCALE_SIZES ?= 1000000,10000000,100000000
SCALE_FLAGS ?= --rebuild-indexes
scale:
	@echo "==> go run ./bench/scale --sizes $(SCALE_SIZES) $(SCALE_FLAGS) (writes bench/scale/results.json, docs/SCALE.md, bench/scale/scale.svg)"
	@$(GO) run ./bench/scale --sizes $(SCALE_SIZES) --json bench/scale/results.json --markdown docs/SCALE.md --svg bench/scale/scale.svg $(SCALE_FLAGS)

.PHONY: bench-tagindex
## bench-tagindex: GIN vs a B-tree tag table at 1M and 10M events (writes bench/tagindex/TAGINDEX.md; ~25 minutes)
bench-tagindex:
	@echo "==> go run ./bench/tagindex --markdown bench/tagindex/TAGINDEX.md"
	@$(GO) run ./bench/tagindex --markdown bench/tagindex/TAGINDEX.md

## explain: the append checks' plans at 1M events (auto_explain), failing on a sequential scan
explain:
	@echo "==> PGDCB_EXPLAIN=1 go test ./eventstore -run CheckPlans -v"
	@PGDCB_EXPLAIN=1 $(GO) test ./eventstore -run CheckPlans -count=1 -v -timeout 20m

.PHONY: diagrams
## diagrams: render docs/diagrams/*.dot to the SVG files committed beside them (needs Graphviz: apt-get install graphviz)
diagrams:
	@command -v dot >/dev/null || { echo "dot not found: apt-get install graphviz"; exit 1; }
	@for f in docs/diagrams/*.dot; do echo "==> dot -Tsvg $$f"; dot -Tsvg "$$f" -o "$${f%.dot}.svg" || exit 1; done
