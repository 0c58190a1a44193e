#!/usr/bin/env bash
# Releases one package of the monorepo on its own:
#
#   Scripts/release.sh PACKAGE VERSION [--dry-run] [--skip-tests]
#
# 1. Refuses a dirty tree, a version that is not X.Y.Z, a CHANGELOG whose top section is not
#    "## VERSION — <date>" (the CHANGELOG's top heading is the package's one version), a
#    version not greater than the last release (monorepo tag PACKAGE-X.Y.Z), a sibling
#    dependency that was never released or whose sources changed since its last release
#    (release it first, so that the version named below has the code this one was tested with),
#    and failing tests of the package or of any package that depends on it (Integration
#    included). --skip-tests skips the tests: only for a caller that has just run them all on
#    this commit (`make release-check` in CI runs after `make test-all`).
# 2. Splits Packages/PACKAGE with its history (`git subtree split`) and commits on top of it
#    the publishable tree: every manifest in it names its siblings by URL and the version
#    range of their last release ($QUEUEKIT_RELEASE_URL/NAME; `.upToNextMinor(from:)` before
#    1.0, `from:` after) instead of `.package(path:)`. The commit's parents are the package's
#    previous release (so the published `main` only moves forward) and the split history.
# 3. Checks the version against the API: `swift package diagnose-api-breaking-changes` compares
#    the publishable tree with the last release; a breaking change needs a major bump (a minor
#    bump before 1.0), or the release is refused with the changed declarations.
# 4. Unless --dry-run: pushes the tree to $QUEUEKIT_RELEASE_URL/PACKAGE as `main` and tag
#    VERSION, then tags the monorepo PACKAGE-VERSION.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/release-lib.sh

usage() {
    echo "usage: Scripts/release.sh PACKAGE VERSION [--dry-run] [--skip-tests]" >&2
    exit 64
}
refuse() {
    echo "release: refused: $*" >&2
    exit 1
}
say() { echo "release: $*"; }

dry_run=0
skip_tests=0
args=()
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry_run=1 ;;
        --skip-tests) skip_tests=1 ;;
        -h | --help) usage ;;
        -*) echo "release: unknown option $arg" >&2; usage ;;
        *) args+=("$arg") ;;
    esac
done
[ ${#args[@]} -eq 2 ] || usage
pkg="${args[0]}"
version="${args[1]}"

# --- What is being released ----------------------------------------------------------------
[ -f "Packages/$pkg/Package.swift" ] || refuse "no package Packages/$pkg (packages: ${PACKAGES[*]})"
[[ "$version" =~ $SEMVER_RE ]] || refuse "\"$version\" is not a version of the form MAJOR.MINOR.PATCH"

if [ -n "$(git status --porcelain --untracked-files=normal)" ]; then
    git status --short >&2
    refuse "the work tree has uncommitted changes (above); a release is made from a commit: commit or stash them"
fi
head=$(git rev-parse HEAD)

heading=$(changelog_heading "$pkg")
top=$(changelog_version "$pkg")
if [ "$top" != "$version" ]; then
    if grep -qE "^## $version( |$)" "Packages/$pkg/CHANGELOG.md"; then
        refuse "Packages/$pkg/CHANGELOG.md has a section for $version, but its top section is \"$heading\": the top heading is the package's version"
    fi
    refuse "Packages/$pkg/CHANGELOG.md has no section for $version (its top section is \"$heading\"); add \"## $version — $(date +%Y-%m-%d)\" with what changed, and commit it"
fi
if grep -qi 'unreleased' <<<"$heading"; then
    refuse "Packages/$pkg/CHANGELOG.md still says \"$heading\"; date it (\"## $version — $(date +%Y-%m-%d)\") and commit it"
fi

last=$(last_release "$pkg")
if [ -n "$last" ] && ! version_gt "$version" "$last"; then
    refuse "$pkg $version is not greater than its last release $last (tag $pkg-$last)"
fi

# Siblings: each must have been released, and the release must hold the code we build with.
siblings=$(sibling_deps "$pkg")
for dep in $(transitive_deps "$pkg"); do
    dep_last=$(last_release "$dep")
    [ -n "$dep_last" ] || refuse "$pkg depends on $dep, which has never been released; release it first (Scripts/release.sh $dep $(changelog_version "$dep"))"
    if ! git diff --quiet "$dep-$dep_last" HEAD -- "Packages/$dep/Sources" "Packages/$dep/Package.swift"; then
        refuse "$pkg depends on $dep, whose sources changed since its release $dep_last (tag $dep-$dep_last); release $dep first so that the version $pkg names holds the code it was tested with"
    fi
done

say "$pkg $version (last release: ${last:-none}) from $(git log -1 --format='%h %s' HEAD)"
for dep in $siblings; do say "  depends on $dep $(last_release "$dep")"; done

# --- Tests ---------------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/queuekit-release.XXXXXX")
trap 'rm -rf "$work"' EXIT
# SwiftPM leaves its lock files in TMPDIR: keep them in the folder that is removed.
mkdir "$work/tmp"
export TMPDIR="$work/tmp"
if [ $skip_tests = 1 ]; then
    say "tests skipped (--skip-tests): the caller ran every test on this commit"
else
    for tested in $(test_closure "$pkg"); do
        say "swift test: $tested"
        if ! swift test --package-path "$(package_dir "$tested")" >"$work/test.log" 2>&1; then
            tail -40 "$work/test.log" >&2
            refuse "the tests of $tested failed (last lines above); $pkg $version is released only when it and every package depending on it pass"
        fi
    done
fi

# --- The publishable tree ------------------------------------------------------------------
split=$(git subtree split -q --prefix="Packages/$pkg" HEAD)

# Rewrites a manifest of the split tree (MANIFEST relative to the package root, content on
# stdin): a path dependency on a sibling becomes its URL and version range.
rewrite_manifest() { # MANIFEST
    local dir line target dep
    dir=$(dirname "Packages/$pkg/$1")
    while IFS= read -r line || [ -n "$line" ]; do
        if [[ "$line" =~ ^(.*)\.package\([[:space:]]*path:[[:space:]]*\"([^\"]*)\"[[:space:]]*\)(.*)$ ]]; then
            target=$(normalize_path "$dir/${BASH_REMATCH[2]}")
            case "$target" in
                "Packages/$pkg" | "Packages/$pkg/"*) ;;
                Packages/*)
                    dep="${target#Packages/}"
                    line="${BASH_REMATCH[1]}.package(url: \"$RELEASE_URL_BASE/$dep\", $(version_requirement "$(last_release "$dep")"))${BASH_REMATCH[3]}"
                    ;;
            esac
        fi
        printf '%s\n' "$line"
    done
}

export GIT_INDEX_FILE="$work/index"
git read-tree "$split"
for manifest in $(git ls-tree -r --name-only "$split" | grep -E '(^|/)Package\.swift$'); do
    git show "$split:$manifest" | rewrite_manifest "$manifest" >"$work/manifest"
    # Nothing may still point outside the package.
    for path in $(manifest_paths "$work/manifest"); do
        case "$(normalize_path "Packages/$pkg/$(dirname "$manifest")/$path")" in
            "Packages/$pkg" | "Packages/$pkg/"*) ;;
            *) refuse "$manifest: could not rewrite .package(path: \"$path\") (write it on one line)" ;;
        esac
    done
    if ! cmp -s <(git show "$split:$manifest") "$work/manifest"; then
        say "manifest $manifest, as published:"
        diff -u --label "Packages/$pkg/$manifest" --label "$pkg/$manifest (published)" \
            <(git show "$split:$manifest") "$work/manifest" | sed 's/^/    /' || true
    fi
    blob=$(git hash-object -w "$work/manifest")
    git update-index --cacheinfo "100644,$blob,$manifest"
done
tree=$(git write-tree)
unset GIT_INDEX_FILE

repo="$RELEASE_URL_BASE/$pkg"
parents=()
if [ -n "$last" ]; then
    git fetch --quiet --no-tags "$repo" "refs/tags/$last" 2>"$work/fetch.log" ||
        { cat "$work/fetch.log" >&2; refuse "cannot fetch $pkg's last release $last from $repo"; }
    previous=$(git rev-parse "FETCH_HEAD^{commit}")
    parents+=(-p "$previous")
fi
parents+=(-p "$split")
message="$pkg $version

Published from the QueueKit monorepo, commit $head (tag $pkg-$version), folder Packages/$pkg.
Siblings:$(for dep in $siblings; do printf ' %s %s;' "$dep" "$(last_release "$dep")"; done)"
release=$(git commit-tree "$tree" "${parents[@]}" -m "$message")
say "publishable tree: commit $release (split history $(git rev-parse --short "$split"))"

# --- Semantic version against the API ------------------------------------------------------
if [ -z "$last" ]; then
    say "API check: first release, no baseline"
else
    api="$work/api"
    git clone --quiet --shared --no-checkout "$(git rev-parse --path-format=absolute --git-common-dir)" "$api"
    git -C "$api" -c advice.detachedHead=false checkout --quiet "$release"
    git -C "$api" tag "$last" "$previous"
    say "API check: swift package diagnose-api-breaking-changes $last"
    if swift package --package-path "$api" diagnose-api-breaking-changes "$last" >"$work/api.log" 2>&1; then
        say "API check: no breaking change since $last"
    else
        breaks=$(grep -E 'API breakage:' "$work/api.log" | sed -E 's/^.*API breakage: */  /' | sort -u || true)
        if [ -z "$breaks" ]; then
            tail -40 "$work/api.log" >&2
            refuse "swift package diagnose-api-breaking-changes failed (last lines above)"
        fi
        major="${version%%.*}" minor="${version#*.}" last_major="${last%%.*}" last_minor="${last#*.}"
        minor="${minor%%.*}" last_minor="${last_minor%%.*}"
        if [ "$major" -gt "$last_major" ] || { [ "$major" = 0 ] && [ "$minor" -gt "$last_minor" ]; }; then
            say "API check: breaking changes since $last, allowed by the version bump to $version:"
            echo "$breaks"
        else
            echo "$breaks" >&2
            if [ "$last_major" = 0 ]; then need="0.$((last_minor + 1)).0"; else need="$((last_major + 1)).0.0"; fi
            refuse "$pkg $version breaks the API of $last (above); a breaking change needs version $need or later"
        fi
    fi
fi

# --- Publish -------------------------------------------------------------------------------
if [ $dry_run = 1 ]; then
    say "dry run: would push $release to $repo as main and tag $version, and tag the monorepo $pkg-$version"
    exit 0
fi
git push --quiet "$repo" "$release:refs/heads/main" "$release:refs/tags/$version" ||
    refuse "could not push to $repo (does the repository exist, and may you push to it?)"
git tag -a "$pkg-$version" -m "$pkg $version (published as $repo $version, commit $release)" "$head"
say "released $pkg $version: $repo tag $version; monorepo tag $pkg-$version"
