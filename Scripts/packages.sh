# Sourced by the other scripts: the packages in dependency order (each after what it uses).
PACKAGES=(AsyncPrimitives QueueCore QueueRetry QueuePersistence JobChain TaskBroker TaskBrokerConsole)

# The folder of a package name ("Integration" lives at the top level).
package_dir() {
    if [ "$1" = Integration ]; then echo Integration; else echo "Packages/$1"; fi
}

# The build folder of a package's debug builds (lint, tests, docs), for `--scratch-path`.
# TaskBroker, TaskBrokerConsole and Integration share one: each is still built as a root package of
# its own (its manifest, its resolution, its targets), but SwiftNIO, swift-crypto, postgres-nio and
# the rest that all three depend on are compiled once, not three times (~12 minutes each on 2
# cores). Each graph holds the one before it (Integration depends on TaskBrokerConsole, which
# depends on TaskBroker), so building them in that order prunes no checkout. The others keep
# their own `.build`.
shared_build=".build-shared"
build_dir() {
    case "$1" in
        TaskBroker | TaskBrokerConsole | Integration) echo "$shared_build" ;;
        *) echo "$(package_dir "$1")/.build" ;;
    esac
}

# The options of every swift build, test or package command on a package's debug build folder
# (word-split by the caller: no path here has a space). In the shared folder the build plan is
# made anew for each root package: with SwiftPM's cached plan, `swift test` of one package ran
# the test bundle of the package built before it.
build_args() {
    echo "--scratch-path $(build_dir "$1")"
    [ "$(build_dir "$1")" = "$shared_build" ] && echo "--disable-build-manifest-caching"
    return 0
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
