#!/usr/bin/env bash
# A private PostgreSQL cluster for the procrastinate adapter: start | stop | status.
#
# start   installs PostgreSQL from the distribution's packages if it is missing (Debian: apt-get, as root),
#         creates a cluster in the state folder, starts it on 127.0.0.1 and a free port, and prints its DSN.
#         Never touches the system service. Starting a running cluster prints its DSN again.
# stop    stops the cluster and removes the state folder (nothing to do when it is not there).
# status  prints the DSN and exits 0 when the cluster runs, exits 1 otherwise.
#
# The state folder is $KS_PG_STATE, or /tmp/ks-procrastinate-pg-$(id -u). PostgreSQL refuses to run as root,
# so as root the server runs as the `postgres` system user (created by the distribution's package).
set -euo pipefail

STATE="${KS_PG_STATE:-/tmp/ks-procrastinate-pg-$(id -u)}"
DATA="$STATE/data"
DATABASE="keyshared"

die() {
	echo "postgres.sh: $*" >&2
	exit 1
}

bindir() {
	local found
	if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
		pg_config --bindir
		return
	fi
	found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
	if [ -n "$found" ] && [ -x "$found/initdb" ]; then
		echo "$found"
		return
	fi
	found="$(command -v initdb 2>/dev/null || true)"
	[ -n "$found" ] && dirname "$(readlink -f "$found")"
}

install_postgres() {
	[ "$(id -u)" = 0 ] || die "PostgreSQL is not installed and installing it needs root (Debian: apt-get install postgresql)"
	command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is not installed and there is no apt-get to install it with"
	echo "postgres.sh: installing PostgreSQL from the distribution's packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >"$STATE.install.log" 2>&1 || die "apt-get update failed (see $STATE.install.log)"
	apt-get install -y -qq postgresql >>"$STATE.install.log" 2>&1 || die "apt-get install postgresql failed (see $STATE.install.log)"
}

# Run a PostgreSQL program as the cluster's owner: `postgres` when we are root, ourselves otherwise.
as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

running() {
	[ -f "$STATE/dsn" ] && [ -d "$DATA" ] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
	if running; then
		cat "$STATE/dsn"
		return
	fi
	if [ -d "$STATE" ]; then # left over from a crash: start again from nothing
		as_owner "$BIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
		rm -rf "$STATE"
	fi
	mkdir -p "$STATE"
	chmod 700 "$STATE"
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || die "there is no 'postgres' system user to run the server as"
		chown postgres: "$STATE"
	fi
	as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C >"$STATE/initdb.log" 2>&1 ||
		die "initdb failed: $(tail -n 1 "$STATE/initdb.log")"
	local port
	port="$(free_port)"
	# fsync off: the cluster is a throwaway test fixture; the adapter never crashes PostgreSQL itself.
	as_owner "$BIN/pg_ctl" -D "$DATA" -l "$STATE/server.log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $STATE -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
		start >/dev/null 2>&1 || die "the server did not start: $(tail -n 1 "$STATE/server.log" 2>/dev/null)"
	as_owner "$BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres "$DATABASE" >/dev/null 2>&1 ||
		die "createdb $DATABASE failed on port $port"
	echo "postgresql://postgres@127.0.0.1:$port/$DATABASE" >"$STATE/dsn"
	cat "$STATE/dsn"
}

stop() {
	if [ -d "$DATA" ]; then
		as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$STATE"
}

command="${1:-}"
case "$command" in
start | stop | status) ;;
*) die "usage: postgres.sh start|stop|status" ;;
esac

BIN="$(bindir || true)"
if [ -z "$BIN" ]; then
	if [ "$command" = start ]; then
		install_postgres
		BIN="$(bindir || true)"
		[ -n "$BIN" ] || die "PostgreSQL was installed but initdb cannot be found"
	elif [ "$command" = stop ]; then
		rm -rf "$STATE"
		exit 0
	else
		die "not running (PostgreSQL is not installed)"
	fi
fi

case "$command" in
start) start ;;
stop) stop ;;
status)
	if running; then
		cat "$STATE/dsn"
	else
		die "not running (state folder $STATE)"
	fi
	;;
esac
