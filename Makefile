# payout: the first two commands a newcomer runs are `make demo` and `make test`.
GO        ?= go
BIN       := bin
PKGS      := ./...
FUZZTIME  ?= 30s
TEST_FLAGS ?= -race -count=1
INTEGRATION_TIMEOUT ?= 30m

.PHONY: all build demo test test-integration lint fuzz bench chaos chaos-short clean

all: lint test build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/payout ./cmd/payout
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/psp-sandbox ./cmd/psp-sandbox

## demo: the main job on an embedded Redis and the in-process PSP simulator,
## with faults switched on so ambiguous answers get resolved before your eyes.
demo:
	@mkdir -p $(BIN)
	$(GO) run ./cmd/payout run --sandbox --seed 42 \
		--p-ambiguous 0.3 --p-refuse 0.1 --status-lag 1s --latency 20ms --latency-jitter 30ms --hang-for 3s \
		--psp-timeout 1s --status-delay 500ms --absent-spacing 1500ms --log-level error \
		--out $(BIN)/demo.result.csv samples/payouts-good.csv

## test: unit tests, seed corpora of the fuzzers; needs only Go.
test:
	$(GO) test $(TEST_FLAGS) $(PKGS)

## test-integration: everything, plus tests against a real redis-server
## (PAYOUT_TEST_REDIS_URL, else one started per test), browsers and processes.
test-integration:
	$(GO) test $(TEST_FLAGS) -tags integration -timeout $(INTEGRATION_TIMEOUT) $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags integration $(PKGS)

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for spec in \
		./internal/payfile:FuzzCheck \
		./internal/money:FuzzParse \
		./internal/card:FuzzMaskNeverShowsTheWhole \
		./internal/psp:FuzzClassify \
		./internal/vault:FuzzOpen; do \
		pkg=$${spec%%:*}; fn=$${spec##*:}; \
		echo "== $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

clean:
	rm -rf $(BIN)
