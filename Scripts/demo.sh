#!/usr/bin/env bash
# Builds the queuekit tool in release mode and runs its end-to-end demo from the repository
# root, on ./queuekit-demo.sqlite. Arguments pass through: `Scripts/demo.sh --fresh --seed 7`.
# Run it again after Ctrl-C and the demo resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
# The embedded SQLite demo needs no PostgreSQL: the tool is built without it, so the first build
# compiles no SwiftNIO, swift-crypto or postgres-nio (`make demo-cluster` builds it with them).
bin="$(Scripts/build-queuekit.sh --disable-default-traits)"
echo "=== queuekit demo $*"
exec "$bin" demo "$@"
