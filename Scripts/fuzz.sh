#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets of Fuzz/ (with AddressSanitizer) and runs each for
# FUZZ_SECONDS (default 30; `make fuzz FUZZ_SECONDS=600` for a long run), as many at a time as the
# machine has cores, starting from the committed seed corpus Fuzz/Corpus/<target>/ and the
# regression inputs Fuzz/Regressions/<target>/.
# `make fuzz FUZZER=TaskRowFuzzer` runs one target.
#
# Each input must give a value or a typed error: a crash, a failed contract check, an input that
# runs longer than FUZZ_TIMEOUT seconds (default 10) or a process above FUZZ_RSS_MB (default 2048)
# fails the run and leaves the input in Fuzz/.artifacts/<target>/. Commit it under
# Fuzz/Regressions/<target>/, fix the defect, and let a Swift Testing test replay it.
# New inputs the fuzzer finds go to Fuzz/.corpus/<target>/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh
Scripts/setup.sh

seconds="${FUZZ_SECONDS:-30}"
timeout="${FUZZ_TIMEOUT:-10}"
rss="${FUZZ_RSS_MB:-2048}"
targets=(FileJobFuzzer BinaryRowFuzzer TaskRowFuzzer QueuekitArgumentsFuzzer)
[ -n "${FUZZER:-}" ] && targets=("$FUZZER")
# Release mode: about 20 times the executions per second of a debug build (swift-argument-parser
# checks its command definitions on every parse in debug). -enable-testing: the targets reach
# the decoders with `@testable import`. lld: gold fails on these links (an internal error in its
# DWARF reader).
flags=(-c release --package-path Fuzz --scratch-path Fuzz/.build
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing -Xswiftc -use-ld=lld)

# A crash is reported by libFuzzer (which saves the input), not by Swift's backtracer (which
# would wait on the dead process). No allocation stacks and no quarantine: the decoders are Swift
# and bounds-checked; ASan is here for the C code below them (SQLite) and for libFuzzer's
# malloc limit, and the stacks cost more than half of each run.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS="malloc_context_size=0:quarantine_size_mb=0:detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
echo "=== fuzz: building ${targets[*]}"
swift build "${flags[@]}" 2>&1 | tee "$log"
check_warnings "$log" Fuzz
echo "=== fuzz: built in $(( $(date +%s) - start ))s"
bin=$(swift build "${flags[@]}" --show-bin-path)

# The targets run side by side, FUZZ_JOBS at a time (default: one per core; libFuzzer runs one
# thread), each on its own corpus and log.
jobs="${FUZZ_JOBS:-$(nproc)}"
logs=$(mktemp -d)
trap 'rm -f "$log"; rm -rf "$logs"' EXIT
fuzz_one() { # TARGET: runs it, leaves its output in $logs/TARGET.log and its status in $logs/TARGET.status
    local target=$1 corpus="Fuzz/.corpus/$1" artifacts="Fuzz/.artifacts/$1" status=0
    mkdir -p "$corpus" "$artifacts" "Fuzz/Corpus/$target"
    local inputs=("$corpus" "Fuzz/Corpus/$target") options=()
    [ -d "Fuzz/Regressions/$target" ] && inputs+=("Fuzz/Regressions/$target")
    [ -f "Fuzz/Dictionaries/$target.dict" ] && options+=(-dict="Fuzz/Dictionaries/$target.dict")
    "$bin/$target" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb="$rss" \
        -malloc_limit_mb="$rss" -artifact_prefix="$artifacts/" -print_final_stats=1 \
        ${options[@]+"${options[@]}"} "${inputs[@]}" >"$logs/$target.log" 2>&1 || status=$?
    echo "$status" >"$logs/$target.status"
}
running=0
for target in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    echo "=== fuzz: $target for ${seconds}s"
    fuzz_one "$target" &
    running=$((running + 1))
done
wait || true

passed=0
failed=0
summary=()
for target in "${targets[@]}"; do
    out="$logs/$target.log"
    if [ "$(cat "$logs/$target.status" 2>/dev/null)" = 0 ]; then
        passed=$((passed + 1))
        result=passed
    else
        failed=$((failed + 1))
        result=FAILED
        tail -n 60 "$out"
        echo "=== fuzz: $target failed; the input is in Fuzz/.artifacts/$target/ (commit it under Fuzz/Regressions/$target/)" >&2
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$out" | tail -1 | sed 's/cov: //')
    summary+=("$(printf '%-26s %-7s %10s runs %8s/s  coverage %s' "$target" "$result" "${runs:-?}" "${speed:-?}" "${cov:-?}")")
done
echo "=== fuzz: results"
printf '%s\n' "${summary[@]}"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
