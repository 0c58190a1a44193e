#!/usr/bin/env bash
# Builds the queuekit tool in release mode and runs its end-to-end demo from the repository
# root, on ./queuekit-demo.sqlite. Arguments pass through: `Scripts/demo.sh --fresh --seed 7`.
# Run it again after Ctrl-C and the demo resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
bin="$(Scripts/build-queuekit.sh)"
echo "=== queuekit demo $*"
exec "$bin" demo "$@"
