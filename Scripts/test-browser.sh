#!/usr/bin/env bash
# `make test-browser`: the web console in a real headless Chromium against a live `queuekit work`
# (Integration/BrowserTests/console_test.py). Installs Debian's chromium and websocket-client
# (PyPI) when missing; builds the debug queuekit with its default traits (the build `make
# test-all` has made). SCREENSHOT=PATH keeps the screenshot of the queues page.
set -euo pipefail
cd "$(dirname "$0")/.."
source Scripts/packages.sh
Scripts/setup.sh

if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "test-browser: chromium is missing and there is no root or sudo; install it with: apt-get install chromium" >&2
        exit 1
    fi
    echo "test-browser: installing chromium"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
python3 -c 'import websocket' 2>/dev/null || python3 -m pip install --quiet 'websocket-client==1.8.0'

swift build --package-path Integration $(build_args Integration) --product queuekit >&2
bin="$(swift build --package-path Integration $(build_args Integration) --show-bin-path)/queuekit"
shot="${SCREENSHOT:-}"
if [ -z "$shot" ]; then
    shot=$(mktemp --suffix=.png)
    trap 'rm -f "$shot"' EXIT
fi
python3 Integration/BrowserTests/console_test.py "$bin" "$shot"
