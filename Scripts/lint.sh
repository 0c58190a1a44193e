#!/usr/bin/env bash
# House rules that the compiler does not check. Exits non-zero with one line per finding.
set -uo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh
status=0
fail() { echo "lint: $*"; status=1; }

# Build output, lock files and the throwaway PostgreSQL clusters' state never enter git.
bad=$(git ls-files | grep -E '(^|/)(\.build[^/]*|\.swiftpm)/|(^|/)Package\.resolved$|^\.postgres-cluster' || true)
[ -n "$bad" ] && fail "build output, Package.resolved or a test cluster's state is committed:
$bad"

# Every manifest turns warnings into errors and uses the Swift 6 language mode.
for manifest in Packages/*/Package.swift Integration/Package.swift Packages/*/Benchmarks/Package.swift Sanitizers/Package.swift Fuzz/Package.swift; do
    [ -f "$manifest" ] || continue
    grep -q 'treatAllWarnings(as: .error)' "$manifest" || fail "$manifest does not treat warnings as errors"
    grep -q 'swiftLanguageModes: \[.v6\]' "$manifest" || fail "$manifest is not in the Swift 6 language mode"
    grep -q 'unsafeFlags' "$manifest" && fail "$manifest uses unsafeFlags"
done

# Each package carries its README and CHANGELOG.
for pkg in "${PACKAGES[@]}"; do
    for file in README.md CHANGELOG.md; do
        [ -f "Packages/$pkg/$file" ] || fail "Packages/$pkg has no $file"
    done
done

# Tests use Swift Testing, and every test function carries @Test: a function in a test file
# that is neither @Test nor private/fileprivate would silently never run. Shared helpers go
# in files under a Support/ folder.
tests=$(git ls-files -co --exclude-standard -- 'Packages/*/Tests/*.swift' 'Integration/Tests/*.swift' | grep -v '/Support/' || true)
for file in $tests; do
    [ -f "$file" ] || continue
    grep -q '^import XCTest' "$file" && fail "$file imports XCTest; use Swift Testing"
    awk -v file="$file" '
        /^[[:space:]]*\/\// { next }
        /^[[:space:]]*$/ { next }
        /^[[:space:]]*@Test/ { pending = 1 }
        # Only top-level and member-level functions: local functions inside a test are fine.
        /^(    )?([a-z@][A-Za-z]* )*func[[:space:]]/ {
            if (!pending && $0 !~ /(private|fileprivate|static|override|mutating)[[:space:]]/) {
                printf "lint: %s:%d: function without @Test (make it private or move it to Support/): %s\n", file, NR, $0
                bad = 1
            }
            pending = 0
            next
        }
        END { exit bad }
    ' "$file" || status=1
done

# Library code: no try!, no fatalError, no @unchecked Sendable without a comment saying why.
sources=$(git ls-files -co --exclude-standard -- 'Packages/*/Sources/*.swift' 'Integration/Sources/*.swift')
for file in $sources; do
    [ -f "$file" ] || continue
    grep -nE 'try!|fatalError\(' "$file" | sed "s|^|lint: $file:|" | grep . && status=1
    awk -v file="$file" '
        /@unchecked Sendable/ && prev !~ /\/\// && $0 !~ /\/\// {
            printf "lint: %s:%d: @unchecked Sendable without a comment proving it safe\n", file, NR; bad = 1
        }
        { prev = $0 }
        END { exit bad }
    ' "$file" || status=1
done

# Integration compiles each package's benchmarks (targets under Integration/Benchmarks/) with that
# package's benchmark manifest: every benchmark folder has its symlink there, and each target names
# the same dependencies in both.
for bench in Packages/*/Benchmarks; do
    [ -f "$bench/Package.swift" ] || continue
    pkg=$(basename "$(dirname "$bench")")
    [ "$(readlink "Integration/Benchmarks/${pkg}Benchmarks")" = "../../$bench/Sources/${pkg}Benchmarks" ] ||
        fail "Integration/Benchmarks/${pkg}Benchmarks is not a symlink to $bench/Sources/${pkg}Benchmarks"
    dependencies() { # MANIFEST_DIR TARGET: the target's dependencies, one per line, sorted
        swift package dump-package --package-path "$1" | python3 -c '
import json, sys
target = next(t for t in json.load(sys.stdin)["targets"] if t["name"] == sys.argv[1])
for d in target["dependencies"]:
    print(json.dumps(d.get("product", d)[:2]))' "$2" | sort
    }
    [ "$(dependencies "$bench" "${pkg}Benchmarks")" = "$(dependencies Integration "${pkg}Benchmarks")" ] ||
        fail "Integration/Package.swift: the dependencies of ${pkg}Benchmarks differ from $bench/Package.swift's"
done

# Zero warnings: build every package with its tests and read the log. Integration's build includes
# every package's benchmarks (see its manifest): CI does not run them, but they keep compiling.
# (Skip with LINT_BUILD=0 for the quick static checks alone.)
if [ "${LINT_BUILD:-1}" != 0 ]; then
    Scripts/setup.sh
    log=$(mktemp)
    for pkg in "${PACKAGES[@]}" Integration; do
        echo "lint: building $pkg with its tests"
        # An import of a module that the target does not name as a dependency fails: in the shared
        # build folder (build_dir) another package's modules sit beside this one's.
        if ! swift build --package-path "$(package_dir "$pkg")" $(build_args "$pkg") --build-tests \
            --explicit-target-dependency-import-check error >"$log" 2>&1; then
            cat "$log"; fail "$pkg does not build"; continue
        fi
        check_warnings "$log" "$pkg" || status=1
    done
    rm -f "$log"
fi

[ $status -eq 0 ] && echo "lint: clean"
exit $status
