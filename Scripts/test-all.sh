#!/usr/bin/env bash
# Builds and tests every package on its own (a user depends on one package, so each must
# build alone), then the cross-package Integration package. Stops at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh

Scripts/setup.sh

only="${1:-}"
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in "${PACKAGES[@]}" Integration; do
    [ -n "$only" ] && [ "$only" != "$pkg" ] && continue
    dir=$(package_dir "$pkg")
    echo "=== $pkg: swift test ($(( $(date +%s) - start ))s elapsed)"
    swift test --package-path "$dir" 2>&1 | tee "$log"
    check_warnings "$log" "$pkg"
done
echo "=== test-all: every package passed in $(( $(date +%s) - start ))s"
