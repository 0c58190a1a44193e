#!/usr/bin/env bash
# Builds the queuekit tool in release mode (progress on stderr) and prints the binary's path.
# Arguments pass to `swift build`: `--disable-default-traits` builds it for SQLite only (no
# PostgreSQL, so no SwiftNIO, swift-crypto or postgres-nio), as `make demo` does.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "=== building queuekit (release)" >&2
swift build -c release --package-path Integration --product queuekit "$@" >&2
echo "$(swift build -c release --package-path Integration --show-bin-path)/queuekit"
