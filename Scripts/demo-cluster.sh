#!/usr/bin/env bash
# Builds the queuekit tool in release mode, starts a throwaway PostgreSQL cluster on loopback
# (Scripts/postgres.sh, which installs Debian's postgresql if needed) and runs
# `queuekit demo-cluster` on it: the demo's workload on 3 worker processes, one SIGKILLed
# halfway; the summary shows the takeover. The cluster is stopped and deleted at the end.
# Arguments pass through: `Scripts/demo-cluster.sh --actions 20000 --workers 4`.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
bin="$(Scripts/build-queuekit.sh)"
export QUEUEKIT_PG_STATE="$PWD/.postgres-cluster-demo"
trap 'Scripts/postgres.sh down' EXIT
url="$(Scripts/postgres.sh up)"
# A 2-second lease: a killed worker's queues move to the others within about 2.7 s.
echo "=== queuekit demo-cluster --database ${url%%:*}://…@${url##*@}?lease=2 $*"
"$bin" demo-cluster --database "$url?lease=2" "$@"
