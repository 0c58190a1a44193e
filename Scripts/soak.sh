#!/usr/bin/env bash
# `make soak DURATION=600`: the demo's workload, kept flowing for DURATION seconds (default 600)
# through `queuekit soak`, on a new SQLite file (or, with SOAK_DATABASE=postgres, on a throwaway
# PostgreSQL cluster with 3 workers). During the first third a random worker is SIGKILLed every
# 0.5-3 s and started again; after that each worker's resident memory and open file
# descriptors are sampled. Fails on any lost, doubled, reordered or overlapping upload, on a
# re-run that no kill explains, or on memory or descriptors that grow (a fitted slope above
# 10 MB/min or 2 fds/min). Extra arguments go to `queuekit soak` (`queuekit soak --help`).
#
# It runs the debug build of queuekit, which `make test-all` has just built in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh
Scripts/setup.sh
duration="${DURATION:-600}"
echo "=== soak: building queuekit (debug)"
swift build --package-path Integration $(build_args Integration) --product queuekit
bin="$(swift build --package-path Integration $(build_args Integration) --show-bin-path)/queuekit"
folder=$(mktemp -d "${TMPDIR:-/tmp}/queuekit-soak.XXXXXX")
cleanup() { rm -rf "$folder"; }
if [ "${SOAK_DATABASE:-sqlite}" = postgres ]; then
    export QUEUEKIT_PG_STATE="$PWD/.postgres-cluster-soak"
    cleanup() { Scripts/postgres.sh down || true; rm -rf "$folder"; }
    trap cleanup EXIT
    database="$(Scripts/postgres.sh up)"
else
    trap cleanup EXIT
    database="sqlite:$folder/soak.sqlite"
fi
echo "=== soak: $duration s on $database"
# The watchdog gives the drain (at most 120 s) and the build some room past DURATION.
Scripts/watchdog.sh $((duration + 300)) "queuekit soak" "$bin" soak --database "$database" --duration "$duration" "$@"
