#!/usr/bin/env bash
# Prints each package's version, read from the one place it is kept: the top "## " heading
# of the package's CHANGELOG.md. Also shows the last release (the newest monorepo tag
# PACKAGE-X.Y.Z) and the sibling packages its manifest names by path.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/release-lib.sh

printf '%-18s %-9s %-14s %-10s %s\n' package version status released "depends on"
for pkg in "${PACKAGES[@]}"; do
    version=$(changelog_version "$pkg")
    [ -n "$version" ] || { echo "versions: Packages/$pkg/CHANGELOG.md has no \"## VERSION\" heading" >&2; exit 1; }
    status=$(changelog_heading "$pkg" | sed -E 's/^## [^ ]+ *(—|-)? *//')
    last=$(last_release "$pkg")
    deps=$(sibling_deps "$pkg" | paste -sd, - | sed 's/,/, /g')
    printf '%-18s %-9s %-14s %-10s %s\n' "$pkg" "$version" "${status:-?}" "${last:-never}" "${deps:--}"
done
