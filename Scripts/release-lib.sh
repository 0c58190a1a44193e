# Sourced by versions.sh, release.sh and release-check.sh: versions, releases and the sibling
# dependencies that the manifests name. Everything is read from the files (CHANGELOG.md,
# Package.swift) and from git tags, never from a list kept here.
source "$(dirname "${BASH_SOURCE[0]}")/packages.sh"

# Where published packages live: package P is the git repository "$RELEASE_URL_BASE/P", and
# a published manifest names its siblings by those URLs. The organisation is a placeholder
# until QueueKit has one; `make release-check` points it at local bare repositories.
RELEASE_URL_BASE="${QUEUEKIT_RELEASE_URL:-https://github.com/queuekit}"

SEMVER_RE='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$'

# The top "## " heading of a package's CHANGELOG, e.g. "## 0.1.0 — unreleased".
changelog_heading() { # PACKAGE
    grep -m1 '^## ' "Packages/$1/CHANGELOG.md" || true
}

# The package's version: the first word of its CHANGELOG's top heading (the one source of truth).
changelog_version() { # PACKAGE
    changelog_heading "$1" | awk '{ print $2 }'
}

# The newest released version of a package: the highest monorepo tag PACKAGE-X.Y.Z, or nothing.
last_release() { # PACKAGE
    git tag --list "$1-*" | sed "s/^$1-//" | grep -E "$SEMVER_RE" | sort -V | tail -1 || true
}

# True when version A is greater than version B (both X.Y.Z).
version_gt() { # A B
    [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$1" ]
}

# The version requirement a published manifest writes for a sibling released as VERSION.
# Before 1.0 a minor bump may break the API (that is what release.sh enforces), so the range
# stops at the next minor version; from 1.0 on, `from:` (up to the next major version).
version_requirement() { # VERSION
    if [ "${1%%.*}" = 0 ]; then
        echo ".upToNextMinor(from: \"$1\")"
    else
        echo "from: \"$1\""
    fi
}

# Normalizes a relative path ("Packages/X/Benchmarks/../../QueueCore" -> "Packages/QueueCore").
normalize_path() { # PATH
    local part out=()
    local IFS=/
    for part in $1; do
        case "$part" in
            '' | .) ;;
            ..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
            *) out+=("$part") ;;
        esac
    done
    echo "${out[*]}"
}

# The `.package(path: "…")` entries of a manifest, one per line, as written.
manifest_paths() { # MANIFEST
    sed -nE 's/.*\.package\([[:space:]]*path:[[:space:]]*"([^"]*)".*/\1/p' "$1"
}

# The sibling packages that a package's manifests (its own and nested ones, such as
# Benchmarks/) name by path, one per line, sorted. A path outside Packages/ is an error.
sibling_deps() { # PACKAGE
    local pkg="$1" manifest dir path target
    while IFS= read -r manifest; do
        dir=$(dirname "$manifest")
        while IFS= read -r path; do
            [ -n "$path" ] || continue
            target=$(normalize_path "$dir/$path")
            case "$target" in
                "Packages/$pkg" | "Packages/$pkg/"*) ;; # the package itself (a nested package's "../")
                Packages/*/*) echo "release: $manifest: path \"$path\" is inside another package" >&2; return 1 ;;
                Packages/*) echo "${target#Packages/}" ;;
                *) echo "release: $manifest: path \"$path\" leads outside Packages/" >&2; return 1 ;;
            esac
        done < <(manifest_paths "$manifest")
    done < <(git ls-files -- "Packages/$pkg/Package.swift" "Packages/$pkg/*/Package.swift" | sort -u) | sort -u
}

# The sibling packages a package uses directly and through its siblings, one per line.
transitive_deps() { # PACKAGE
    local seen=" " queue=("$1") next dep
    while [ ${#queue[@]} -gt 0 ]; do
        next="${queue[0]}"
        queue=("${queue[@]:1}")
        for dep in $(sibling_deps "$next"); do
            case "$seen" in *" $dep "*) continue ;; esac
            seen+="$dep "
            queue+=("$dep")
        done
    done
    for dep in $seen; do echo "$dep"; done
}

# The packages whose tests a release of PACKAGE must pass: the package, then every package
# that depends on it directly or not, then Integration if it does, in dependency order.
test_closure() { # PACKAGE
    local candidate dep
    echo "$1"
    for candidate in "${PACKAGES[@]}"; do
        [ "$candidate" = "$1" ] && continue
        # (grep without -q reads all its input: with -q, pipefail could see the writer's SIGPIPE)
        transitive_deps "$candidate" | grep -x "$1" >/dev/null && echo "$candidate"
    done
    for dep in $(manifest_paths Integration/Package.swift | xargs -n1 basename); do
        if [ "$dep" = "$1" ] || transitive_deps "$dep" | grep -x "$1" >/dev/null; then
            echo Integration
            break
        fi
    done
}
