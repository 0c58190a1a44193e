#!/usr/bin/env bash
# Usage: Scripts/watchdog.sh SECONDS LABEL COMMAND [ARGUMENTS...]
#
# Runs COMMAND and fails it once it has run longer than SECONDS: a hung test must turn CI red in
# minutes, with the evidence, instead of holding it until its hard limit. Before killing, it
# prints every thread's backtrace of each test process the command started (through gdb, or lldb
# when gdb is missing), so the hang can be read from the CI log. Exits with COMMAND's status, or
# 124 after a timeout.
set -uo pipefail
limit=$1 label=$2
shift 2

# A process group of its own, so that the kill reaches `swift test` and the test process it runs.
set -m
"$@" &
pid=$!
set +m
# Ctrl-C or a kill of this script reaches the command too (it is not in the terminal's group).
trap 'kill -TERM -- "-$pid" 2>/dev/null; exit 130' INT TERM

waited=0
while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
    sleep 1
    waited=$((waited + 1))
done
if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    exit $?
fi

echo "=== watchdog: $label still running after ${limit}s: the threads of its processes follow" >&2
descendants() { # PID: its descendants, depth first
    local child
    for child in $(pgrep -P "$1"); do
        echo "$child"
        descendants "$child"
    done
}
for p in "$pid" $(descendants "$pid"); do
    command=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-200)
    case "$command" in
    *.xctest* | *-test-runner* | *PackageTests*) ;;
    *) continue ;;
    esac
    echo "=== watchdog: process $p: $command" >&2
    if command -v gdb > /dev/null; then
        timeout 120 gdb -batch -p "$p" -ex "thread apply all bt" >&2 2>&1 || true
    elif command -v lldb > /dev/null; then
        timeout 120 lldb --batch -p "$p" -o "thread backtrace all" >&2 2>&1 || true
    else
        echo "=== watchdog: neither lldb nor gdb is installed: no backtraces" >&2
    fi
done
kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
echo "=== watchdog: $label did not finish within ${limit}s and was killed (backtraces above)" >&2
exit 124
