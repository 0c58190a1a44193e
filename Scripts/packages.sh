# Sourced by the other scripts: the packages in dependency order (each after what it uses).
PACKAGES=(AsyncPrimitives QueueCore QueueRetry QueuePersistence JobChain TaskBroker)

# The folder of a package name ("Integration" lives at the top level).
package_dir() {
    if [ "$1" = Integration ]; then echo Integration; else echo "Packages/$1"; fi
}

# Fails when a build log shows a warning in our code or from SwiftPM itself (an unused
# dependency, say). Library targets already turn warnings into errors; this also covers
# test code and manifests. Dependencies' own warnings are suppressed by SwiftPM.
check_warnings() { # LOG NAME
    local found
    found=$(grep -E '^(/[^ ]*\.swift:[0-9]+:[0-9]+: )?warning:' "$1" | grep -v '/\.build[^/]*/checkouts/' || true)
    if [ -n "$found" ]; then
        echo "$found" >&2
        echo "=== $2: the build printed warnings (above); QueueKit keeps zero warnings" >&2
        return 1
    fi
}
