# plait — the two commands a fresh machine needs are `make demo` and `make test`.

GO        ?= go
BUILD     := build
CORE_WASM := $(BUILD)/core.wasm
# wazero's compilation cache for the suites that run core modules (conformance, fuzz): only
# the first run after a change compiles them (about 6 s per module).
WAZERO_CACHE := $(BUILD)/wazero-cache
FUZZTIME  ?= 30s
SEEDS     ?= 1000
SEED_BASE ?=
NODES     ?= 0
LEAVES    ?= 0
# The exact release build of the WASM core (docs/design.md §8, conformance/RELEASES.md).
WASM_BUILD := GOFLAGS= CGO_ENABLED=0 GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -buildvcs=false -buildmode=c-shared

.PHONY: all deps test-deps alerts page page-check demo test check purity wasip1 generate vet fmt-check unit multiprocess scale releases releases-check freeze conformance wasm fuzz fuzz-ci sim bench clean

all: test

## demo: four nodes in one process replicate, fail over and compare digests (exit 0 iff equal, nothing re-delivered)
demo: deps
	$(GO) run ./cmd/plait demo

## deps: what the build needs beyond Go, when missing (librocksdb-dev, for the RocksDB store)
deps:
	@scripts/deps.sh

## test-deps: what make test needs beyond the build, when missing (promtool, from Debian's prometheus)
test-deps:
	@scripts/deps.sh test

## test: everything CI runs
test: deps test-deps fmt-check vet purity wasip1 alerts page-check wasm unit releases-check fuzz-ci multiprocess

## page: the status page rebuilt from web/statuspage and its lockfile into shells/native/statuspage/dist (commit the result)
page:
	cd web/statuspage && npm ci --no-audit --no-fund --loglevel=error && npx vite build

## page-check: the page built again from the lockfile must equal the committed build (docs/testing.md §14)
page-check:
	scripts/page-check.sh

## alerts: the alert rules are valid, and their unit tests pass (promtool; docs/testing.md §14)
alerts: test-deps
	promtool check rules deploy/prometheus/alerts.yml
	cd deploy/prometheus && promtool test rules alerts_test.yml

## purity: protocol/ imports nothing of docs/design.md §2's list, reads no clock, starts no goroutine
purity:
	$(GO) run ./tools/purity ./protocol/...

## wasip1: the core builds for GOOS=wasip1 GOARCH=wasm without cgo
wasip1:
	GOFLAGS= CGO_ENABLED=0 GOOS=wasip1 GOARCH=wasm $(GO) build ./protocol/...

## generate: protocol/abi's compact codec (compact_gen.go) written again from its message structs (tools/abigen); unit's go test ./tools/abigen fails when it is not current
generate:
	$(GO) generate ./protocol/abi

vet:
	$(GO) vet ./...
	$(GO) vet -tags multiprocess ./tests/...
	$(GO) vet -tags scale ./tests/...
	GOFLAGS= CGO_ENABLED=0 GOOS=wasip1 GOARCH=wasm $(GO) vet ./protocol/... ./shells/wasm/guest

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## unit: the Go tests (fuzz corpora are replayed; frozen releases' hashes verified)
unit: wasm
	PLAIT_CORE_WASM=$(abspath $(CORE_WASM)) PLAIT_WAZERO_CACHE=$(abspath $(WAZERO_CACHE)) $(GO) test ./...

## multiprocess: the real binary as separate processes on 127.0.0.1 (after every other package, alone)
multiprocess: unit page-check
	PLAIT_REQUIRE_BROWSER=1 $(GO) test -tags multiprocess -count=1 -p 1 ./tests/multiprocess

## scale: the clusters at scale (docs/testing.md §13): 64 processes as hubs and spokes and as a tree, 2 fan-in hubs of 100 leaves each, a cluster in network namespaces (as root), then the simulator: 300 fresh seeds at 16 nodes and 300 at 32 (each run's first seed the Unix time it starts, unless SEED_BASE is given), 2 seeds at 100, and seeds 2 and 3 with fan-in hubs and 1,000 leaves (their cost printed); CI does not run it
scale: deps
	$(GO) test -tags scale -count=1 -p 1 -timeout 60m -v -run '^(TestScale|TestNamespace)' ./tests/multiprocess
	$(MAKE) sim SEEDS=300 NODES=16
	$(MAKE) sim SEEDS=300 NODES=32
	$(MAKE) sim SEEDS=2 SEED_BASE=1 NODES=100
	$(MAKE) sim SEEDS=2 SEED_BASE=2 LEAVES=1000

## wasm: the protocol core as a WASM reactor module
wasm:
	@mkdir -p $(BUILD)
	$(WASM_BUILD) -o $(CORE_WASM) ./shells/wasm/guest

## conformance: the version matrix (every frozen release and the current build, native and WASM, against the current build), native/WASM identity, the releases' checks
conformance: wasm
	PLAIT_CORE_WASM=$(abspath $(CORE_WASM)) PLAIT_WAZERO_CACHE=$(abspath $(WAZERO_CACHE)) $(GO) test -count=1 -v ./conformance -run 'TestVersionMatrix|TestSimIdentityNativeWasm|TestScenariosUnderWasm|TestRelease'

## freeze: freeze release RELEASE from COMMIT (a temporary worktree, the pinned command; conformance/RELEASES.md gains its row)
freeze:
	@test -n "$(RELEASE)" -a -n "$(COMMIT)" || { echo "usage: make freeze RELEASE=0.3 COMMIT=<sha>"; exit 2; }
	scripts/freeze.sh $(RELEASE) $(COMMIT)

## releases-check: rebuild every frozen release at its recorded commit; the SHA-256 must reproduce
releases-check:
	@if [ "$$(git rev-parse --is-shallow-repository)" = true ]; then \
		echo "releases-check: skipped in a shallow clone (the releases' commits are not here)"; \
	else scripts/freeze.sh --check; fi

## fuzz-ci: every fuzz target for 10 s, the corpus and fuzz/TOTALS.md left as they are (make test; unit replays the corpus)
fuzz-ci: wasm
	PLAIT_CORE_WASM=$(abspath $(CORE_WASM)) MAX_NEW=0 FUZZTIME=10s scripts/fuzz.sh

## fuzz: every fuzz target in turn for FUZZTIME; new interesting inputs join the corpus, each run's figures fuzz/TOTALS.md
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## sim: SEEDS random simulator seeds from SEED_BASE (default: now); prints every failing seed
sim:
	SEEDS=$(SEEDS) SEED_BASE=$(SEED_BASE) NODES=$(NODES) LEAVES=$(LEAVES) scripts/sim.sh

## bench: the benchmarks of BENCHMARKS.md: the protocol core's, then plait bench (SYNC=origin)
SYNC ?= origin
bench: deps
	$(GO) test -run='^$$' -bench=. -benchmem ./protocol/...
	$(GO) build -o $(BUILD)/plait ./cmd/plait
	$(BUILD)/plait bench --sync $(SYNC)

## bench-compare: plait bench of BASE (any commit: a release's, main's) and of HEAD, alternated ROUNDS times on this machine; each measure's medians, ratio and per-round range (docs/testing.md §11)
BASE   ?=
ROUNDS ?= 5
bench-compare: deps
	BASE=$(BASE) ROUNDS=$(ROUNDS) scripts/bench-compare.sh

clean:
	rm -rf $(BUILD)
