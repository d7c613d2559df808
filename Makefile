# payout: the first two commands a newcomer runs are `make demo` and `make test`.
GO        ?= go
BIN       := bin
PKGS      := ./...
FUZZTIME  ?= 30s
# The fuzz engine's minimizing of new interesting inputs (several KB over
# FuzzWorkbook's arguments) took nearly all of a 20s run: 20-300 execs
# against 6,032 with 1x. A crasher is still written whole; raise it to shrink one.
FUZZMINIMIZE ?= 1x
TEST_FLAGS ?= -count=1
INTEGRATION_TIMEOUT ?= 30m
# deploy/ is a module of its own (its tests need k8s.io/*, the product does not).
DEPLOY    := deploy

# The build tags lint checks besides the default build: the integration tests
# (The deliberately unsafe workers and the skewed-clock worker are commands
# of the harness, internal/proof/cmd/payout-skipcheck and payout-replay and
# internal/proof/chaos/payoutclock, built by the default build.)
LINT_TAGS := integration

.PHONY: all help build demo test test-race test-deploy test-integration test-alerts lint fuzz bench bench-sim chaos chaos-short clean corpus

## all: lint, test and build.
all: lint test build

## help: this list of targets.
help:
	@awk '/^## [a-z][a-z-]*: / { sub(/^## /, ""); i = index($$0, ": "); \
		printf "%-18s%s\n", substr($$0, 1, i - 1), substr($$0, i + 2); next } \
		/^##( |$$)/ { sub(/^## ?/, ""); printf "%-18s%s\n", "", $$0 }' $(MAKEFILE_LIST)

## build: bin/payout and bin/psp-sandbox, static.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/payout ./cmd/payout
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/psp-sandbox ./cmd/psp-sandbox

## demo: the main job on an embedded Redis and the in-process PSP simulator,
## with faults switched on so ambiguous answers get resolved before your eyes,
## and every created order followed to its outcome: the simulator settles each
## one 2s after creation (10% of them fail), and the rows end paid or failed.
## --max-creates 5 (default 3): on a busy machine the 1s PSP timeout also cuts
## answers that were on their way, and 3 creates all confirmed absent sent one
## demo row of 20 to needs_review (exit 1) in about 1 run of 3 at load 30.
demo:
	@mkdir -p $(BIN)
	@echo "== make demo: building bin/payout (the first build compiles every dependency: 1 to 2 minutes on 2 cores; later ones take seconds)"
	$(GO) build -o $(BIN)/payout ./cmd/payout
	@echo "== make demo: 20 payouts through the PSP simulator (about 20 s)"
	$(BIN)/payout run --sandbox --seed 42 \
		--p-ambiguous 0.3 --p-refuse 0.1 --status-lag 1s --latency 20ms --latency-jitter 30ms --hang-for 3s \
		--settle-after 2s --p-fail 0.1 --outcome-intervals 500ms,1s \
		--psp-timeout 1s --status-delay 500ms --absent-spacing 1500ms --max-creates 5 --log-level error \
		--out $(BIN)/demo.result.csv samples/payouts-good.csv

## test: the unit tests of every product package and the fuzzers' seed
## corpora, without the race detector; needs only Go, no module fetch
## (deploy/'s tests need k8s modules: make test-deploy). About 3 minutes
## on a 2-core machine (README). test-integration runs them all again with -race.
test:
	@echo "== make test: go test ./... (unit tests, fuzz seed corpora, goldens; no -race: make test-race)"
	$(GO) test $(TEST_FLAGS) $(PKGS)

## test-race: the same unit tests with the race detector (about twice as long);
## the hostile-workbook tests, which bound time and memory, skip under -race
## and run in make test.
test-race:
	@echo "== make test-race: go test -race ./..."
	$(GO) test -race $(TEST_FLAGS) $(PKGS)

## test-deploy: the deploy/ module's tests (compose, k8s, systemd, crontab
## files); a module of its own because its tests need k8s.io/* (fetched once).
test-deploy:
	@echo "== make test-deploy: the deploy/ module (fetches k8s.io modules the first time)"
	cd $(DEPLOY) && $(GO) test -race $(TEST_FLAGS) ./...

## test-integration: everything, plus tests against a real redis-server
## (PAYOUT_TEST_REDIS_URL, else one started per test), browsers and processes.
test-integration: test-alerts
	$(GO) test -race $(TEST_FLAGS) -tags integration -timeout $(INTEGRATION_TIMEOUT) $(PKGS)
	cd e2e && $(GO) test -race $(TEST_FLAGS) -tags integration -timeout $(INTEGRATION_TIMEOUT) ./...
	cd $(DEPLOY) && $(GO) test -race $(TEST_FLAGS) -tags integration -timeout $(INTEGRATION_TIMEOUT) ./...

## test-alerts: promtool check rules and promtool test rules on the alert
## rules of deploy/prometheus (needs promtool: apt-get install prometheus).
test-alerts:
	@command -v promtool >/dev/null || { echo "promtool not found: apt-get install -y prometheus" >&2; exit 1; }
	promtool check rules $(DEPLOY)/prometheus/payout-rules.yml
	promtool test rules $(DEPLOY)/prometheus/payout-rules.test.yml

## lint: gofmt, go.mod and go.sum tidy, then go vet and staticcheck (the
## version pinned in go.mod, checks in staticcheck.conf) on the default build
## and on each of LINT_TAGS, and likewise for the deploy module; needs only Go.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	@set -e; for tags in "" $(LINT_TAGS); do \
		echo "== go vet, staticcheck: tags $${tags:-(none)}"; \
		$(GO) vet -tags "$$tags" $(PKGS); \
		$(GO) tool staticcheck -tags "$$tags" $(PKGS); \
	done
	@echo "== e2e module: go mod tidy, go vet, staticcheck"
	cd e2e && $(GO) mod tidy -diff && $(GO) vet -tags integration ./... && $(GO) tool staticcheck -tags integration ./...
	cd $(DEPLOY) && $(GO) mod tidy -diff
	@set -e; sc=$$($(GO) tool -n staticcheck); cd $(DEPLOY); for tags in "" integration; do \
		echo "== $(DEPLOY) module: go vet, staticcheck: tags $${tags:-(none)}"; \
		$(GO) vet -tags "$$tags" ./...; \
		$$sc -tags "$$tags" ./...; \
	done

## corpus: write again the workbooks and CSVs of internal/payfile/testdata/corpus
## with LibreOffice Calc (soffice); the files are committed, the tests need no soffice.
corpus:
	internal/payfile/testdata/corpus/gen.sh

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for spec in \
		./internal/payfile:FuzzCheck \
		./internal/payfile:FuzzWorkbook \
		./internal/payfile:FuzzNumberFormat \
		./internal/money:FuzzParse \
		./internal/money:FuzzParseComma \
		./internal/card:FuzzMaskNeverShowsTheWhole \
		./internal/psp:FuzzClassify \
		./internal/extid:FuzzPathSegment \
		./internal/vault:FuzzOpen \
		./internal/ui:FuzzScrubText \
		./internal/redisconn:FuzzParseOptions; do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; \
		echo "== $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; \
	done

## bench: performance figures against a private redis-server (needs redis-server),
## each beside its bare baseline; prints one table, writes bench/results/<time>.json;
## then `bench watch`: the Redis bytes and commands of the watch of 100,000 paid
## payouts (3.5 minutes on the loaded 2-core machine), its own table and JSON.
## `go run ./internal/proof/cmd/bench profile` writes CPU/heap profiles of in-process equivalents.
bench:
	@mkdir -p bench/results
	$(GO) run ./internal/proof/cmd/bench --go $(GO) --out bench/results
	$(GO) run ./internal/proof/cmd/bench watch --out bench/results

## bench-sim: the Redis memory measurement with the simulation at full size,
## 100,000 rows a day for 125 days (make bench simulates 5,000 a day for 90):
## past day 121, when the archived claims of a whole 90-day id window are
## held; the fast path, checked first against the real worker; needs
## redis-server and about 4 GB of memory; 46 minutes on the shared 2-core
## test machine (bench/README.md).
bench-sim:
	$(GO) run ./internal/proof/cmd/bench memory --sim-rows 100000 --sim-days 125

## chaos: the proof of safety: 10,000 rows through real Redis (AOF), the PSP
## sandbox with faults behind HTTP/2 stream resets and three workers (one
## with its clock off), with workers SIGKILLed, Redis restarted, Redis
## replies lost, tasks deleted in the web UI and the PSP token rotated; every
## order settles paid or failed, with callbacks duplicated, reordered and
## forged; fails on any duplicate, lost payout, outcome that differs from the
## simulator's, leak or mismatch. BROKEN=1 runs a small run on the unsafe
## worker of internal/proof/cmd/payout-skipcheck (POSTs again on redelivery),
## BROKEN=2 one on that of internal/proof/cmd/payout-replay, whose HTTP/2
## transport may replay a create after a stream reset; each passes only if
## the duplicates it makes are caught (both without the order lifecycle:
## their orders stay Created and created is final).
CHAOS_BROKEN = $(if $(filter 2,$(BROKEN)),--broken-replay,$(if $(BROKEN),--broken))

chaos:
	$(GO) run ./internal/proof/cmd/chaos $(CHAOS_BROKEN)

## chaos-short: the same with 1,000 rows, in about three to four and a half minutes.
chaos-short:
	$(GO) run ./internal/proof/cmd/chaos --short $(CHAOS_BROKEN)

## clean: remove bin/.
clean:
	rm -rf $(BIN)
