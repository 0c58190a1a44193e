#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for TaskBrokerPostgres's tests, benchmarks and demo.
#
#   Scripts/postgres.sh up        installs Debian's postgresql if no server binaries exist (never
#                                 upgrades one that does), starts a cluster on 127.0.0.1 in a new
#                                 temporary folder on a free port, and prints its URL
#   Scripts/postgres.sh url       prints the URL of the running cluster
#   Scripts/postgres.sh restart   restarts it (`pg_ctl restart -m fast`), for the fault tests
#   Scripts/postgres.sh down      stops it and deletes its folder
#
# The cluster uses password authentication (user and password `queuekit`, database `queuekit`),
# `fsync` and `synchronous_commit` on: what a real deployment has. The state (folder and port)
# lives in `.postgres-cluster` at the repository root, so that `down` finds what `up` started;
# QUEUEKIT_PG_STATE names another state file (`make test-all` keeps its own cluster that way).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
state="${QUEUEKIT_PG_STATE:-$root/.postgres-cluster}"
user=queuekit
password=queuekit
database=queuekit

die() { echo "postgres.sh: $*" >&2; exit 1; }

# The folder of the server binaries (initdb, pg_ctl, postgres), newest major version first.
server_bin() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -rn); do
        [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
    done
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return 0
    fi
    return 1
}

install_server() {
    echo "postgres.sh: no PostgreSQL server binaries; installing Debian's postgresql" >&2
    command -v apt-get >/dev/null 2>&1 || die "no apt-get: install a PostgreSQL server (initdb, pg_ctl) by hand"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "postgresql is missing and there is no root or sudo; install it with: apt-get install postgresql"
        sudo=sudo
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || die "apt-get update failed; install postgresql by hand"
    # --no-upgrade: a server that is there already is never touched.
    $sudo apt-get install -y -qq --no-install-recommends --no-upgrade postgresql >/dev/null \
        || die "apt-get install postgresql failed"
    # Debian's package starts its own cluster on port 5432; the tests never use it.
}

# initdb and postgres refuse to run as root: as root, run them as the `postgres` user (Debian's
# package creates it), or a system user made for the purpose.
as_owner() {
    if [ "$(id -u)" -ne 0 ]; then
        "$@"
        return
    fi
    local owner=postgres
    if ! id "$owner" >/dev/null 2>&1; then
        owner=queuekit-pg
        id "$owner" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$owner"
    fi
    runuser -u "$owner" -- "$@"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

read_state() {
    [ -f "$state" ] || return 1
    # shellcheck disable=SC1090
    source "$state"
    [ -n "${PG_DIR:-}" ] && [ -n "${PG_PORT:-}" ] && [ -n "${PG_BIN:-}" ]
}

url() {
    echo "postgres://$user:$password@127.0.0.1:$PG_PORT/$database"
}

running() {
    read_state && as_owner "$PG_BIN/pg_ctl" status -D "$PG_DIR/data" >/dev/null 2>&1
}

up() {
    if running; then
        url
        return 0
    fi
    [ -f "$state" ] && down >/dev/null 2>&1 || true
    local bin
    bin="$(server_bin)" || { install_server; bin="$(server_bin)" || die "postgresql installed, but no initdb/pg_ctl found"; }
    local dir port
    dir="$(mktemp -d "${TMPDIR:-/tmp}/queuekit-pg.XXXXXX")"
    chmod 755 "$dir"
    port="$(free_port)"
    printf '%s\n' "$password" >"$dir/pwfile"
    if [ "$(id -u)" -eq 0 ]; then
        local owner=postgres
        id postgres >/dev/null 2>&1 || owner=queuekit-pg
        chown -R "$owner" "$dir"
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U "$user" --pwfile="$dir/pwfile" \
        --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    # 800 connections: Swift Testing runs TaskBroker's suites side by side, each PostgreSQL test
    # database with up to 9 (three pools and a listener); the suite peaked at 395 of 400.
    cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 800
fsync = on
synchronous_commit = on
shared_buffers = 128MB
log_min_messages = warning
EOF
    cat >"$state" <<EOF
PG_DIR=$dir
PG_PORT=$port
PG_BIN=$bin
EOF
    as_owner "$bin/pg_ctl" start -D "$dir/data" -l "$dir/server.log" -w -t 60 >/dev/null \
        || { cat "$dir/server.log" >&2; die "the server did not start"; }
    PGPASSWORD="$password" "$bin/psql" -h 127.0.0.1 -p "$port" -U "$user" -d postgres -qAt \
        -c "CREATE DATABASE $database" >/dev/null || die "could not create database $database"
    read_state
    url
}

down() {
    read_state || return 0
    as_owner "$PG_BIN/pg_ctl" stop -D "$PG_DIR/data" -m immediate >/dev/null 2>&1 || true
    case "$PG_DIR" in
        */queuekit-pg.*) rm -rf "$PG_DIR" ;;
    esac
    rm -f "$state"
}

restart() {
    read_state || die "no cluster is running; start one with: Scripts/postgres.sh up"
    as_owner "$PG_BIN/pg_ctl" restart -D "$PG_DIR/data" -m fast -l "$PG_DIR/server.log" -w -t 60 >/dev/null \
        || die "the server did not restart"
}

case "${1:-}" in
    up) up ;;
    url) read_state || die "no cluster is running; start one with: Scripts/postgres.sh up"; url ;;
    restart) restart ;;
    down) down ;;
    *) die "usage: Scripts/postgres.sh up|url|restart|down" ;;
esac
