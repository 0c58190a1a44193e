#!/usr/bin/env bash
# Builds and tests every package on its own (a user depends on one package, so each must
# build alone), then the cross-package Integration package. Stops at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh

Scripts/setup.sh

only="${1:-}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# TaskBroker's PostgreSQL tests run against a throwaway cluster that this script starts (installing
# Debian's postgresql if needed) and stops at the end, also on failure. A machine that cannot run
# it fails here, loudly: the tests are never skipped.
if [ -z "$only" ] || [ "$only" = TaskBroker ] || [ "$only" = Integration ]; then
    export QUEUEKIT_PG_STATE="$PWD/.postgres-cluster-test-all"
    trap 'Scripts/postgres.sh down; rm -f "$log"' EXIT
    QUEUEKIT_PG_URL="$(Scripts/postgres.sh up)" || { echo "test-all: could not start PostgreSQL (Scripts/postgres.sh up)" >&2; exit 1; }
    export QUEUEKIT_PG_URL QUEUEKIT_PG_RESTART="$PWD/Scripts/postgres.sh restart"
    echo "=== PostgreSQL for the tests: $QUEUEKIT_PG_URL"
fi
# Each `swift test` runs under a watchdog: a hung test fails CI within minutes, with every thread's
# backtrace in the log, instead of holding CI until its hard limit. Output is line-buffered so the
# log shows which tests had started and not finished when it fired. TEST_MINUTES raises the limit
# (a cold build is inside it: the slowest package builds in ~6 minutes on 2 cores).
minutes="${TEST_MINUTES:-20}"
# Swift Testing starts every test of a run at once unless told a width: TaskBroker's 287 tests then
# share 2 cores with the PostgreSQL server, connecting took over 10 s, and transactions stalled for
# seconds, past the lease-based limits the tests check. TEST_WIDTH (default 8) tests run at a
# time; the suite is faster so than with every test at once.
width="${TEST_WIDTH:-8}"
swift_test() { # NAME ARGUMENTS...
    local name=$1
    shift
    SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$width" \
        Scripts/watchdog.sh $((minutes * 60)) "swift test of $name" stdbuf -oL -eL swift test "$@"
}
start=$(date +%s)
for pkg in "${PACKAGES[@]}" Integration; do
    [ -n "$only" ] && [ "$only" != "$pkg" ] && continue
    dir=$(package_dir "$pkg")
    echo "=== $pkg: swift test ($(( $(date +%s) - start ))s elapsed)"
    if [ "$pkg" = TaskBroker ]; then
        # The server-restart test drops every connection to the server: it runs on its own. So does
        # the PostgreSQL crash test, whose takeover bound (lease + renewal + 2 s of slack) counts
        # scheduling delay: run beside the other tests on 2 cores, a takeover once took 5.2 s.
        swift_test "$pkg" --package-path "$dir" $(build_args "$pkg") --skip PostgresRestartTests --skip PostgresCrashTests 2>&1 | tee "$log"
        check_warnings "$log" "$pkg"
        swift_test "$pkg" --package-path "$dir" $(build_args "$pkg") --filter PostgresCrashTests 2>&1 | tee "$log"
        check_warnings "$log" "$pkg"
        swift_test "$pkg" --package-path "$dir" $(build_args "$pkg") --filter PostgresRestartTests 2>&1 | tee "$log"
    else
        swift_test "$pkg" --package-path "$dir" $(build_args "$pkg") 2>&1 | tee "$log"
    fi
    check_warnings "$log" "$pkg"
done
echo "=== test-all: every package passed in $(( $(date +%s) - start ))s"
