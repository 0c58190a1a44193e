# QueueKit: `make demo` runs the end-to-end demo; `make test-all` runs every test.
FUZZ_SECONDS ?= 30
FUZZER ?=
DURATION ?= 600
.PHONY: all setup demo demo-cluster test-all test test-browser test-tsan test-asan fuzz soak lint bench versions release-check docs clean

all: test-all

setup:
	@Scripts/setup.sh

# Build in release mode and run the end-to-end demo on an embedded SQLite file.
demo: setup
	@Scripts/demo.sh

# The demo's workload on a throwaway PostgreSQL with 3 worker processes; one is SIGKILLed
# halfway and the summary shows the others taking its queues over.
demo-cluster: setup
	@Scripts/demo-cluster.sh

# Build and test every package on its own, then the cross-package Integration package.
# `make test PACKAGE=QueueCore` tests one package.
test-all:
	@Scripts/test-all.sh

test:
	@Scripts/test-all.sh $(PACKAGE)

# The web console in a real headless Chromium (Debian's chromium, installed if missing) against a
# live `queuekit work`: counts change through server-sent events, Pause stops a queue.
# SCREENSHOT=PATH keeps the screenshot it takes.
test-browser:
	@SCREENSHOT=$(SCREENSHOT) Scripts/test-browser.sh

# The tests under ThreadSanitizer (AsyncPrimitives, QueueCore, JobChain, TaskBroker, Integration)
# and AddressSanitizer (AsyncPrimitives, QueueCore, QueuePersistence, TaskBroker on SQLite), built
# once each through Sanitizers/.
test-tsan:
	@Scripts/sanitize.sh thread

test-asan:
	@Scripts/sanitize.sh address

# libFuzzer over every decoder of stored or outside input, each target FUZZ_SECONDS (default 30):
# `make fuzz FUZZ_SECONDS=600` runs long, `make fuzz FUZZER=TaskRowFuzzer` runs one target.
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZER=$(FUZZER) Scripts/fuzz.sh

# The demo's workload for DURATION seconds (default 600) with random SIGKILLs of the worker, then
# checks that nothing was lost, doubled or reordered and that memory and descriptors did not grow.
# `make soak SOAK_DATABASE=postgres` runs it on a throwaway PostgreSQL with 3 workers.
soak: setup
	@DURATION=$(DURATION) Scripts/soak.sh

lint:
	@Scripts/lint.sh

# Release-mode benchmarks: ours against the peers, measured in the same run.
bench: setup
	@Scripts/bench.sh $(PACKAGE)

# DocC archives of every package (`make docs PACKAGE=QueueCore` for one), through
# swift-docc-plugin, with warnings as errors and every public symbol documented.
docs: setup
	@Scripts/docs.sh $(PACKAGE)

# Each package's version (the top heading of its CHANGELOG) and last release.
versions:
	@Scripts/versions.sh

# The release flow end to end on local bare repositories, with two consumer packages that
# depend on QueueKit by URL. `Scripts/release.sh PACKAGE VERSION` makes a real release.
release-check: setup
	@Scripts/release-check.sh

clean:
	rm -rf .build-shared Packages/*/.build Packages/*/Benchmarks/.build Integration/.build Sanitizers/.build* Fuzz/.build Fuzz/.corpus Fuzz/.artifacts
