#!/usr/bin/env bash
# Installs what QueueKit needs beyond the Swift toolchain: SQLite's headers for GRDB.
# Safe to run again: it installs only what is missing and never upgrades what is there.
set -euo pipefail

if [ "$(uname -s)" != "Linux" ]; then
    exit 0 # macOS ships SQLite in the SDK.
fi

missing=()
for pkg in libsqlite3-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "setup: ${missing[*]} missing and no root or sudo; install it with: apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
