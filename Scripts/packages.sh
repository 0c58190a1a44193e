# Sourced by the other scripts: the packages in dependency order (each after what it uses).
PACKAGES=(AsyncPrimitives JobChain QueueCore QueueRetry QueuePersistence TaskBroker TaskBrokerConsole)

# The folder of a package name ("Integration" lives at the top level).
package_dir() {
    if [ "$1" = Integration ]; then echo Integration; else echo "Packages/$1"; fi
}

# The build folder of a package's debug builds (lint, tests, docs, soak), for `--scratch-path`:
# one for every package. Each package is still built as a root package of its own (its manifest,
# its resolution, its targets), but a module that several of them use (AsyncPrimitives, QueueCore,
# GRDB, SwiftNIO, swift-crypto, postgres-nio, Hummingbird) is compiled once, not once per package
# that depends on it: every package's debug build takes ~16 minutes cold on 2 cores, where a
# folder per small package took ~19. Each root's checkouts stay in the folder when another root
# that does not use them is built (measured with SwiftPM 6.3: none is removed or compiled again).
shared_build=".build-shared"
build_dir() {
    echo "$shared_build"
}

# The options of every swift build, test or package command on a package's debug build folder
# (word-split by the caller: no path here has a space). In the shared folder the build plan is
# made anew for each root package: with SwiftPM's cached plan, `swift test` of one package ran
# the test bundle of the package built before it.
build_args() {
    echo "--scratch-path $(build_dir "$1") --disable-build-manifest-caching"
}

# Fails when a build log shows a warning in our code or from SwiftPM itself (an unused
# dependency, say). Library targets already turn warnings into errors; this also covers
# test code and manifests. Dependencies' own warnings are suppressed by SwiftPM.
# SwiftPM's warning that a dependency's target has files it does not handle (swift-distributed-
# tracing ships one) is about that package's manifest: it is dropped too, for packages not ours.
check_warnings() { # LOG NAME
    local found ours
    ours=$(printf '%s\n' "${PACKAGES[@]}" Integration Sanitizers Fuzz | tr '[:upper:]' '[:lower:]' | paste -sd'|')
    found=$({
        grep -E '^(/[^ ]*\.swift:[0-9]+:[0-9]+: )?warning:' "$1" | grep -v '/\.build[^/]*/checkouts/' |
            grep -vE "^warning: '([^']+)': found [0-9]+ file\(s\) which are unhandled"
        grep -E "^warning: '($ours)': found [0-9]+ file\(s\) which are unhandled" "$1"
    } || true)
    if [ -n "$found" ]; then
        echo "$found" >&2
        echo "=== $2: the build printed warnings (above); QueueKit keeps zero warnings" >&2
        return 1
    fi
}
