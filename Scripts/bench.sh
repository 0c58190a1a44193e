#!/usr/bin/env bash
# Runs every package's benchmark executable in release mode (or only PACKAGE's, if given).
# Each prints our figure, the peer's figure from the same run, and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh
only="${1:-}"
for pkg in "${PACKAGES[@]}"; do
    [ -n "$only" ] && [ "$only" != "$pkg" ] && continue
    dir="Packages/$pkg/Benchmarks"
    [ -f "$dir/Package.swift" ] || continue
    echo "=== $pkg benchmarks (release)"
    swift run -c release --package-path "$dir" "${pkg}Benchmarks"
done
