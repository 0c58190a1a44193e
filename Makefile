# QueueKit: `make demo` runs the end-to-end demo; `make test-all` runs every test.
.PHONY: all setup demo demo-cluster test-all test lint bench versions release-check docs clean

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
	rm -rf Packages/*/.build Packages/*/Benchmarks/.build Integration/.build
