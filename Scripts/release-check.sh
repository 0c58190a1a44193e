#!/usr/bin/env bash
# `make release-check`: the release flow end to end, on this machine, with no network.
#
# In a temporary clone of HEAD (uncommitted changes are not part of it; release tags that the
# clone inherits are deleted, so it starts from "nothing released"), with every package
# published to a local bare repository (QUEUEKIT_RELEASE_URL=file://…/repos), it:
#   1. asserts each refusal of Scripts/release.sh: unknown package, malformed version, dirty
#      tree, CHANGELOG without the version's section, CHANGELOG still "unreleased", sibling never
#      released, version not greater than the last release, sibling changed since its release,
#      failing tests, and a breaking API change without a minor (before 1.0) or major bump;
#   2. releases every package at its CHANGELOG's version, in dependency order, and checks each
#      published tree (tags on both sides, no path dependency left, siblings by URL + version);
#   3. releases a breaking AsyncPrimitives (next minor) that the API check allows;
#   4. builds two consumer packages that name QueueKit by URL and version only: one that depends
#      on AsyncPrimitives alone and must resolve no database or NIO package, and one that
#      depends on TaskBroker and must get exactly the sibling versions its release named (not
#      the newer, breaking AsyncPrimitives that now exists).
# Tests of the released packages are skipped (--skip-tests) in 2 and 3: CI has just run
# `make test-all` on the same commit. Step 1 does run the tests of one small package, whose
# failing test must stop its release. RELEASE_CHECK_KEEP=1 keeps the temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh

start=$(date +%s)
step() { echo "=== release-check: $* ($(($(date +%s) - start))s)"; }
fail() { echo "release-check: FAILED: $*" >&2; exit 1; }

root=$(mktemp -d "${TMPDIR:-/tmp}/queuekit-release-check.XXXXXX")
if [ "${RELEASE_CHECK_KEEP:-0}" = 1 ]; then
    trap 'echo "release-check: kept $root"' EXIT
else
    trap 'rm -rf "$root"' EXIT
fi
# SwiftPM leaves its lock files in TMPDIR: keep them in the folder that is removed.
mkdir "$root/tmp"
export TMPDIR="$root/tmp"
[ -z "$(git status --porcelain --untracked-files=normal)" ] ||
    echo "release-check: note: uncommitted changes are not part of the check (it clones HEAD)"

step "cloning HEAD into $root/monorepo; publishing to $root/repos"
git clone --quiet "$PWD" "$root/monorepo"
mono="$root/monorepo"
cd "$mono"
git config user.name >/dev/null || git config user.name "QueueKit release-check"
git config user.email >/dev/null || git config user.email "release-check@queuekit.invalid"
{ git tag --list | grep -E '^[A-Za-z]+-[0-9]+\.[0-9]+\.[0-9]+$' || true; } | xargs -r git tag -d >/dev/null
for pkg in "${PACKAGES[@]}"; do git init --quiet --bare "$root/repos/$pkg"; done
export QUEUEKIT_RELEASE_URL="file://$root/repos"
release=(Scripts/release.sh)
today=$(date +%Y-%m-%d)
log="$root/last.log"

# Runs a release that must be refused with a message matching PATTERN.
expect_refusal() { # WHAT PATTERN ARGS…
    local what="$1" pattern="$2"
    shift 2
    if "${release[@]}" "$@" >"$log" 2>&1; then
        cat "$log"; fail "release.sh $* was not refused ($what)"
    fi
    grep -qE "$pattern" "$log" || { cat "$log"; fail "release.sh $* failed, but not with /$pattern/ ($what)"; }
    echo "  refused as expected ($what): $(grep -m1 'refused:' "$log" | sed 's/^release: refused: //')"
}
expect_release() { # ARGS…
    "${release[@]}" "$@" >"$log" 2>&1 || { cat "$log"; fail "release.sh $* was refused"; }
    grep -E '^(release: (released|dry run|API check)|  )' "$log" | sed 's/^/  /'
}
# Puts a new top section "## VERSION — today" in a package's CHANGELOG and commits.
new_section() { # PACKAGE VERSION WHAT
    local file="Packages/$1/CHANGELOG.md"
    awk -v head="## $2 — $today" -v what="- $3" '
        !done && /^## / { print head; print ""; print what; print ""; done = 1 }
        { print }' "$file" >"$file.new" && mv "$file.new" "$file"
    git commit --quiet -am "release-check: $1 $2 ($3)"
}
published() { git -C "$root/repos/$1" "${@:2}"; }

# --- 1. Refusals before anything is released --------------------------------------------
step "refusals"
ap_version=$(source Scripts/release-lib.sh && changelog_version AsyncPrimitives)
expect_refusal "unknown package" 'no package Packages/NoSuchPackage' NoSuchPackage 0.1.0
expect_refusal "malformed version" 'is not a version' AsyncPrimitives 1.0
echo "probe" >>Packages/AsyncPrimitives/README.md
expect_refusal "dirty tree" 'uncommitted changes' AsyncPrimitives "$ap_version" --skip-tests
git checkout --quiet -- Packages/AsyncPrimitives/README.md
expect_refusal "no CHANGELOG section" 'has no section for 9\.9\.9' AsyncPrimitives 9.9.9 --skip-tests
if grep -m1 '^## ' Packages/AsyncPrimitives/CHANGELOG.md | grep -i unreleased >/dev/null; then
    expect_refusal "CHANGELOG says unreleased" 'still says' AsyncPrimitives "$ap_version" --skip-tests
fi

# Date every CHANGELOG's top section, as a maintainer does before releasing, and add a public
# declaration to AsyncPrimitives that step 3 removes (a breaking change independent of what
# the package's sources hold today).
for pkg in "${PACKAGES[@]}"; do
    sed -i -E "0,/^## /s/^## ([^ ]+).*/## \1 — $today/" "Packages/$pkg/CHANGELOG.md"
done
cat >Packages/AsyncPrimitives/Sources/AsyncPrimitives/ReleaseCheckProbe.swift <<'EOF'
/// A declaration that `make release-check` publishes and then removes, to prove the API check.
public func releaseCheckProbe() {}
EOF
git add -A && git commit --quiet -m "release-check: date every CHANGELOG; add an API probe"
expect_refusal "sibling never released" 'AsyncPrimitives, which has never been released' \
    QueueCore "$(source Scripts/release-lib.sh && changelog_version QueueCore)" --skip-tests

step "dry run of AsyncPrimitives $ap_version"
expect_release AsyncPrimitives "$ap_version" --dry-run --skip-tests
[ -z "$(git tag --list 'AsyncPrimitives-*')" ] || fail "the dry run tagged the monorepo"
[ -z "$(published AsyncPrimitives for-each-ref)" ] || fail "the dry run pushed"

# --- 2. Every package, in dependency order ----------------------------------------------
declare -A released
for pkg in "${PACKAGES[@]}"; do
    version=$(source Scripts/release-lib.sh && changelog_version "$pkg")
    step "releasing $pkg $version"
    expect_release "$pkg" "$version" --skip-tests
    released[$pkg]=$version
    git rev-parse --quiet --verify "refs/tags/$pkg-$version" >/dev/null || fail "no monorepo tag $pkg-$version"
    published "$pkg" rev-parse --quiet --verify "refs/tags/$version" >/dev/null || fail "$pkg: no tag $version in its repository"
    manifest=$(published "$pkg" show "$version:Package.swift")
    if grep -q '\.package(path:' <<<"$manifest"; then fail "$pkg $version still has a path dependency"; fi
    for dep in $(source Scripts/release-lib.sh && sibling_deps "$pkg"); do
        grep -qF ".package(url: \"$QUEUEKIT_RELEASE_URL/$dep\", .upToNextMinor(from: \"${released[$dep]}\"))" <<<"$manifest" ||
            grep -qF ".package(url: \"$QUEUEKIT_RELEASE_URL/$dep\", from: \"${released[$dep]}\")" <<<"$manifest" ||
            fail "$pkg $version does not name $dep ${released[$dep]} by URL"
    done
    # History preserved: the published commit has the package's own commits behind it.
    [ "$(published "$pkg" rev-list --count "$version")" -gt 2 ] || fail "$pkg $version has no history"
done
# Nested manifests are rewritten too: QueuePersistence's benchmark package keeps its "../"
# and names QueueCore by URL instead of "../../QueueCore".
if published QueuePersistence cat-file -e "${released[QueuePersistence]}:Benchmarks/Package.swift" 2>/dev/null; then
    bench=$(published QueuePersistence show "${released[QueuePersistence]}:Benchmarks/Package.swift")
    grep -qF '.package(path: "../")' <<<"$bench" || fail "QueuePersistence's Benchmarks lost its \"../\" dependency"
    if grep -qF '../../' <<<"$bench"; then fail "QueuePersistence's Benchmarks still names a sibling by path"; fi
fi
# The packages whose tests a release runs: the package and every package depending on it.
closure() { (source Scripts/release-lib.sh && test_closure "$1" | paste -sd' ' -); }
[ "$(closure AsyncPrimitives)" = "${PACKAGES[*]} Integration" ] || fail "AsyncPrimitives' release would test only: $(closure AsyncPrimitives)"
[ "$(closure JobChain)" = "JobChain Integration" ] || fail "JobChain's release would test: $(closure JobChain)"
echo "  a release of QueueCore runs the tests of: $(closure QueueCore)"
expect_refusal "version not greater than the last release" 'not greater than its last release' \
    AsyncPrimitives "$ap_version" --skip-tests

# A sibling whose sources changed after its release must be released first.
qc_next=$(echo "${released[QueueCore]}" | awk -F. '{ print $1 "." $2 "." $3 + 1 }')
echo "// changed after the release" >>Packages/AsyncPrimitives/Sources/AsyncPrimitives/ReleaseCheckProbe.swift
git commit --quiet -am "release-check: change AsyncPrimitives after its release"
new_section QueueCore "$qc_next" "a patch"
expect_refusal "sibling changed since its release" 'AsyncPrimitives, whose sources changed since its release' \
    QueueCore "$qc_next" --skip-tests
git reset --quiet --hard HEAD~2

# A failing test stops the release (this one runs the tests: AsyncPrimitives alone, the
# failure stops before the packages depending on it).
ap_patch=$(echo "$ap_version" | awk -F. '{ print $1 "." $2 "." $3 + 1 }')
cat >Packages/AsyncPrimitives/Tests/AsyncPrimitivesTests/ReleaseCheckFailingTests.swift <<'EOF'
import Testing

@Suite struct ReleaseCheckFailingTests {
    @Test func failsOnPurposeSoThatTheReleaseIsRefused() {
        #expect(1 + 1 == 3)
    }
}
EOF
git add -A && git commit --quiet -m "release-check: a failing test"
new_section AsyncPrimitives "$ap_patch" "a patch with a failing test"
step "a failing test (swift test of AsyncPrimitives in the clone)"
expect_refusal "failing tests" 'the tests of AsyncPrimitives failed' AsyncPrimitives "$ap_patch"
git reset --quiet --hard HEAD~2

# --- 3. The API check ---------------------------------------------------------------------
git rm --quiet Packages/AsyncPrimitives/Sources/AsyncPrimitives/ReleaseCheckProbe.swift
git commit --quiet -m "release-check: remove releaseCheckProbe() (a breaking change)"
new_section AsyncPrimitives "$ap_patch" "removes releaseCheckProbe()"
step "a breaking change released as a patch ($ap_patch)"
expect_refusal "breaking change without a minor/major bump" 'breaks the API' AsyncPrimitives "$ap_patch" --skip-tests
grep -q 'releaseCheckProbe' "$log" || { cat "$log"; fail "the refusal does not name releaseCheckProbe()"; }
grep -E '^  .*releaseCheckProbe' "$log" | sed 's/^/  named: /'
if [ "${ap_version%%.*}" = 0 ]; then
    ap_break=$(echo "$ap_version" | awk -F. '{ print "0." $2 + 1 ".0" }')
else
    ap_break=$(echo "$ap_version" | awk -F. '{ print $1 + 1 ".0.0" }')
fi
sed -i -E "0,/^## /s/^## [^ ]+/## $ap_break/" Packages/AsyncPrimitives/CHANGELOG.md
git commit --quiet -am "release-check: AsyncPrimitives $ap_break"
step "the same change released as $ap_break"
expect_release AsyncPrimitives "$ap_break" --skip-tests
grep -q 'allowed by the version bump' "$log" || { cat "$log"; fail "the API check did not see the breaking change"; }

# --- 4. Consumers, by URL and version only ----------------------------------------------
# Prints "identity version" for every package pinned in a consumer's Package.resolved: every
# package that resolution fetched, plugins' and tests' dependencies included.
resolved() { # DIR
    python3 -c '
import json, sys
for pin in json.load(open(sys.argv[1]))["pins"]:
    print(pin["identity"], pin["state"].get("version") or pin["state"].get("revision"))' "$1/Package.resolved" | sort
}
consumer() { # NAME DEPENDENCY PRODUCT SOURCE
    local dir="$root/$1"
    mkdir -p "$dir/Sources/$1"
    cat >"$dir/Package.swift" <<EOF
// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "$1",
    dependencies: [$2],
    targets: [
        .executableTarget(name: "$1", dependencies: [.product(name: "$3", package: "$3")]),
    ]
)
EOF
    printf '%s\n' "$4" >"$dir/Sources/$1/main.swift"
    swift build --package-path "$dir" >"$log" 2>&1 || { cat "$log"; fail "consumer $1 does not build"; }
    "$(swift build --package-path "$dir" --show-bin-path)/$1" | sed 's/^/  /'
}

step "consumer of AsyncPrimitives $ap_break alone"
consumer FuturesApp ".package(url: \"$QUEUEKIT_RELEASE_URL/AsyncPrimitives\", from: \"$ap_break\")" AsyncPrimitives '
import AsyncPrimitives
import Dispatch

CallbackQueue.default = DispatchQueue.global()
let deferred = DeferredResult<Int>()
DispatchQueue.global().async { deferred.success(value: 42) }
print("FuturesApp: the answer is", try await deferred.value)'
resolved "$root/FuturesApp" | tee "$root/futures.resolved" | sed 's/^/  resolved: /'
grep -q "^asyncprimitives $ap_break\$" "$root/futures.resolved" || fail "FuturesApp did not get AsyncPrimitives $ap_break"
if grep -iE 'grdb|nio|sqlite|postgres|crypto' "$root/futures.resolved"; then
    fail "FuturesApp resolved a database or NIO package (above)"
fi
# The docs plugin that every QueueKit manifest names is linked into no target: consumers do
# not even fetch it (what the CHANGELOGs say).
if grep -i 'docc' "$root/futures.resolved"; then
    fail "FuturesApp resolved swift-docc-plugin (above)"
fi

tb=${released[TaskBroker]}
step "consumer of TaskBroker $tb"
consumer BrokerApp ".package(url: \"$QUEUEKIT_RELEASE_URL/TaskBroker\", from: \"$tb\")" TaskBroker '
import TaskBroker

print("BrokerApp: built against", String(describing: TaskDatabase.self))'
resolved "$root/BrokerApp" | tee "$root/broker.resolved" | sed 's/^/  resolved: /'
# The web console is a package of its own: a TaskBroker user does not even fetch Hummingbird.
if grep -iE 'hummingbird|taskbrokerconsole' "$root/broker.resolved"; then
    fail "BrokerApp resolved the console or Hummingbird (above)"
fi
# Exactly the versions the releases named: TaskBroker's siblings, and theirs, all as released
# in step 2 — not the breaking AsyncPrimitives of step 3, which the ranges exclude.
for pkg in TaskBroker $(source Scripts/release-lib.sh && transitive_deps TaskBroker); do
    identity=$(echo "$pkg" | tr '[:upper:]' '[:lower:]')
    grep -qx "$identity ${released[$pkg]}" "$root/broker.resolved" ||
        fail "BrokerApp did not get $pkg ${released[$pkg]} (the version TaskBroker $tb's release named)"
done

step "passed: every package released, every refusal seen, both consumers built"
