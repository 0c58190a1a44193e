#!/usr/bin/env bash
# Runs every package's benchmark executable in release mode (or only PACKAGE's, if given).
# Each prints our figure, the peer's figure from the same run, and the ratio.
#
# TaskBroker's benchmarks include a PostgreSQL section: it uses the server in QUEUEKIT_PG_URL if
# set, else the throwaway cluster of Scripts/postgres.sh (started here if none runs, and then
# stopped at the end; a cluster that was already running is left alone). Its backlog benchmark
# also builds and measures a baseline revision (TB_BASELINE_REF; `none` skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh
only="${1:-}"
started_postgres=0
stop_postgres() {
    if [ "$started_postgres" = 1 ]; then
        Scripts/postgres.sh down || true
    fi
}
trap stop_postgres EXIT
# Whether the server of a postgres:// URL accepts TCP connections (a state file can outlive it).
answers() {
    local port="${1##*:}"
    port="${port%%/*}"
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
}
for pkg in "${PACKAGES[@]}"; do
    [ -n "$only" ] && [ "$only" != "$pkg" ] && continue
    dir="Packages/$pkg/Benchmarks"
    [ -f "$dir/Package.swift" ] || continue
    if [ "$pkg" = TaskBroker ] && [ -z "${QUEUEKIT_PG_URL:-}" ]; then
        if ! QUEUEKIT_PG_URL="$(Scripts/postgres.sh url 2>/dev/null)" || ! answers "$QUEUEKIT_PG_URL"; then
            started_postgres=1
            QUEUEKIT_PG_URL="$(Scripts/postgres.sh up)"
        fi
        export QUEUEKIT_PG_URL
    fi
    if [ "$pkg" = TaskBroker ] && [ -z "${TB_BASELINE_BINARY:-}" ] && [ "${TB_BASELINE_REF:-}" != none ]; then
        # The backlog benchmark measures a baseline build beside this one: TB_BASELINE_REF (default:
        # the engine that read every queue whole), built once, in release, under .build/.
        ref="${TB_BASELINE_REF:-fb32402}"
        tree=".build/baseline-$ref"
        if [ ! -f "$tree/Packages/TaskBroker/Benchmarks/Package.swift" ]; then
            rm -rf "$tree" && mkdir -p "$tree"
            git archive "$ref" | tar -x -C "$tree"
        fi
        echo "=== building the baseline $ref for the backlog benchmark (release)"
        swift build -c release --package-path "$tree/Packages/TaskBroker/Benchmarks" --product TaskBrokerBenchmarks
        TB_BASELINE_BINARY="$(swift build -c release --package-path "$tree/Packages/TaskBroker/Benchmarks" --show-bin-path)/TaskBrokerBenchmarks"
        export TB_BASELINE_BINARY TB_BASELINE_LABEL="main at $ref"
    fi
    echo "=== $pkg benchmarks (release)"
    swift run -c release --package-path "$dir" "${pkg}Benchmarks"
done
