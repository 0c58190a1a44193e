#!/usr/bin/env bash
# `make docs [PACKAGE=X]`: builds each package's documentation with swift-docc-plugin, for every
# library target (its DocC catalog is Sources/<Name>/<Name>.docc), with DocC's warnings as
# errors (a broken symbol link, an unknown topic), and fails on a public symbol without a
# documentation comment. DocC itself does not warn about those (it shows a page without an
# abstract), so this script reads the symbol graphs that the plugin extracted and names each
# undocumented declaration with its file and line. The archives are left in the shared build
# folder's plugins/Swift-DocC/outputs/ (Scripts/packages.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh

only="${1:-}"
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for pkg in "${PACKAGES[@]}"; do
    [ -n "$only" ] && [ "$only" != "$pkg" ] && continue
    dir=$(package_dir "$pkg")
    # Library targets, read from the manifest: regular targets that are not executables,
    # tests, macros or plugins.
    scratch=$(build_dir "$pkg")
    targets=$(swift package --package-path "$dir" $(build_args "$pkg") describe --type json 2>/dev/null | python3 -c '
import json, sys
for target in json.load(sys.stdin)["targets"]:
    if target.get("type") == "library" and target.get("module_type") == "SwiftTarget":
        print(target["name"])')
    [ -n "$targets" ] || { echo "docs: $pkg has no library target" >&2; status=1; continue; }
    echo "=== $pkg: documentation of $(echo $targets | sed 's/ /, /g') ($(( $(date +%s) - start ))s elapsed)"
    args=()
    for target in $targets; do args+=(--target "$target"); done
    if ! swift package --package-path "$dir" $(build_args "$pkg") generate-documentation "${args[@]}" --warnings-as-errors >"$log" 2>&1; then
        grep -vE '^\[[0-9]+/[0-9]+\]' "$log" >&2
        echo "=== docs: $pkg: DocC failed (above)" >&2
        status=1
    else
        check_warnings "$log" "$pkg" || status=1
    fi
    # Every public declaration written in our sources carries a documentation comment.
    identity=$(basename "$dir" | tr '[:upper:]' '[:lower:]')
    for target in $targets; do
        found=("$scratch"/*/extracted-symbols/"$identity/$target")
        graphs="${found[0]}"
        [ -d "$graphs" ] || { echo "docs: $pkg: no symbol graph for $target" >&2; status=1; continue; }
        python3 - "$graphs" "$target" <<'EOF' || status=1
import glob, json, os, sys
from urllib.parse import unquote, urlparse
folder, target = sys.argv[1], sys.argv[2]
missing = set()
for path in glob.glob(os.path.join(folder, "*.symbols.json")):
    for symbol in json.load(open(path))["symbols"]:
        if symbol.get("accessLevel") not in ("public", "open"):
            continue
        location = symbol.get("location")
        if not location:
            continue  # synthesized (an Equatable `!=`, a default implementation from elsewhere)
        if symbol["kind"]["identifier"] == "swift.extension":
            continue  # an extension block of another module's type: its members are checked
        comment = symbol.get("docComment") or {}
        if any(line.get("text", "").strip() for line in comment.get("lines", [])):
            continue
        file = os.path.relpath(unquote(urlparse(location["uri"]).path))
        line = location.get("position", {}).get("line", 0) + 1
        missing.add((file, line, ".".join(symbol["pathComponents"])))
for file, line, name in sorted(missing):
    print(f"{file}:{line}: error: public symbol {name} has no documentation comment (///)")
if missing:
    print(f"=== docs: {target}: {len(missing)} public symbols without documentation", file=sys.stderr)
    sys.exit(1)
EOF
    done
done
if [ $status -ne 0 ]; then
    echo "=== docs: failed ($(( $(date +%s) - start ))s)" >&2
    exit $status
fi
echo "=== docs: every package documented in $(( $(date +%s) - start ))s"
