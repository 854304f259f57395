#!/usr/bin/env bash
# A private RabbitMQ node for the rabbitmq adapter: start | stop | status | crash.
#
# start   installs rabbitmq-server from the distribution's packages if it is missing (Debian: apt-get, as root,
#         with the system service kept from starting), starts a node of its own on 127.0.0.1 with its own ports,
#         data, logs, Erlang cookie and epmd, the consistent-hash exchange plugin enabled, and prints its AMQP URL
#         once the node answers AMQP. Starting a running node prints its URL again. Never uses the system service.
# stop    stops the node (SIGTERM, then SIGKILL after 30 s), its epmd, and removes the state folder.
# status  prints the AMQP URL and exits 0 when the node runs, exits 1 otherwise.
# crash   SIGKILLs the node's Erlang VM (a real crash: nothing is written on the way down), then starts it again on
#         the same data folder and ports, and prints the URL: the adapter's `restart` op.
#
# The state folder is $KS_RMQ_STATE, or /tmp/ks-rabbitmq-$(id -u). $KS_RMQ_START_TIMEOUT (seconds, default 120)
# bounds the wait for the node to answer.
set -euo pipefail

STATE="${KS_RMQ_STATE:-/tmp/ks-rabbitmq-$(id -u)}"
RMQ_BIN="/usr/lib/rabbitmq/bin"
TIMEOUT="${KS_RMQ_START_TIMEOUT:-120}"

die() {
	echo "broker.sh: $*" >&2
	exit 1
}

installed() {
	[ -x "$RMQ_BIN/rabbitmq-server" ] && command -v erl >/dev/null 2>&1
}

# Install rabbitmq-server with apt-get. Debian's postinst asks invoke-rc.d to start the system service (on port 5672);
# a policy-rc.d that answers 101 ("action forbidden") keeps it stopped. One is put in place only for the install, and
# only when none exists (a container usually has one already); ours is removed again whatever happens.
install_rabbitmq() {
	[ "$(id -u)" = 0 ] || die "rabbitmq-server is not installed and installing it needs root (Debian: apt-get install rabbitmq-server)"
	command -v apt-get >/dev/null 2>&1 || die "rabbitmq-server is not installed and there is no apt-get to install it with"
	echo "broker.sh: installing rabbitmq-server from the distribution's packages" >&2
	local log="${STATE%/}.install.log" policy=/usr/sbin/policy-rc.d ours=""
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# keyshared broker.sh: keep rabbitmq-server from starting during its install\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		ours=1
	fi
	local status=0
	{
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >"$log" 2>&1 && apt-get install -y -qq rabbitmq-server >>"$log" 2>&1
	} || status=$?
	[ -z "$ours" ] || rm -f "$policy"
	[ "$status" = 0 ] || die "apt-get install rabbitmq-server failed (see $log)"
	installed || die "rabbitmq-server was installed but $RMQ_BIN/rabbitmq-server or erl cannot be found"
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# The node's environment: everything private to the state folder. Ports and the node name are chosen once, at the
# first start, and kept in $STATE/ports so that `crash` starts the node again where it was.
node_env() {
	# shellcheck disable=SC1091
	. "$STATE/ports"
	export HOME="$STATE" # the Erlang cookie ($HOME/.erlang.cookie) is the node's own
	export RABBITMQ_NODENAME="$NODENAME" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$AMQP_PORT"
	export RABBITMQ_DIST_PORT="$DIST_PORT" ERL_EPMD_PORT="$EPMD_PORT" ERL_EPMD_ADDRESS=127.0.0.1
	export RABBITMQ_CONF_ENV_FILE="$STATE/rabbitmq-env.conf" RABBITMQ_CONFIG_FILE="$STATE/rabbitmq.conf"
	export RABBITMQ_ADVANCED_CONFIG_FILE="$STATE/advanced.config"
	export RABBITMQ_ENABLED_PLUGINS_FILE="$STATE/enabled_plugins" RABBITMQ_PLUGINS_EXPAND_DIR="$STATE/plugins-expand"
	export RABBITMQ_MNESIA_BASE="$STATE/mnesia" RABBITMQ_LOG_BASE="$STATE/log" RABBITMQ_PID_FILE="$STATE/beam.pid"
	export RABBITMQ_LOGS="$STATE/log/node.log"
	# no scheduler busy-waiting: the node shares two cores with the kit and other work
	export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+sbwt none +sbwtdcpu none +sbwtdio none"
	URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2F"
}

beam_pid() {
	[ -f "$STATE/beam.pid" ] || return 1
	local pid
	pid="$(tr -dc '0-9' <"$STATE/beam.pid")"
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# True when the node answers the AMQP protocol header with a connection.start frame.
answers() {
	python3 - "$AMQP_PORT" <<-'EOF' >/dev/null 2>&1
		import socket, sys
		with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
		    s.sendall(b"AMQP\x00\x00\x09\x01")
		    sys.exit(0 if s.recv(1) == b"\x01" else 1)
	EOF
}

running() {
	[ -f "$STATE/ports" ] || return 1
	node_env
	beam_pid >/dev/null && answers
}

first_setup() {
	mkdir -p "$STATE/log" "$STATE/mnesia"
	chmod 700 "$STATE"
	{
		echo "NODENAME=ks-$(id -u)-$$@localhost"
		echo "AMQP_PORT=$(free_port)"
		echo "DIST_PORT=$(free_port)"
		echo "EPMD_PORT=$(free_port)"
	} >"$STATE/ports"
	: >"$STATE/rabbitmq-env.conf" # not /etc/rabbitmq/rabbitmq-env.conf
	echo '[rabbitmq_consistent_hash_exchange].' >"$STATE/enabled_plugins"
	# A throwaway fixture: a low disk alarm threshold (a full /tmp must not block publishers), warnings only in the log.
	cat >"$STATE/rabbitmq.conf" <<-EOF
		disk_free_limit.absolute = 10MB
		log.console = false
		log.file.level = warning
	EOF
}

boot() {
	node_env
	rm -f "$STATE/beam.pid"
	(
		cd "$STATE"
		exec setsid "$RMQ_BIN/rabbitmq-server" >>"$STATE/startup.log" 2>&1 </dev/null
	) &
	local waited=0
	while ! answers; do
		if ! kill -0 $! 2>/dev/null; then
			die "the node exited while starting: $(grep -v '^\s*$' "$STATE/startup.log" | tail -n 1)"
		fi
		[ "$waited" -lt $((TIMEOUT * 4)) ] || die "the node did not answer on 127.0.0.1:$AMQP_PORT within ${TIMEOUT}s (logs in $STATE/log)"
		sleep 0.25
		waited=$((waited + 1))
	done
	echo "$URL" >"$STATE/url"
	echo "$URL"
}

start() {
	if running; then
		cat "$STATE/url"
		return
	fi
	if [ -d "$STATE" ]; then # left over from a crash of ours: start again from nothing
		stop
	fi
	first_setup
	boot
}

kill_node() { # $1: the signal; waits up to $2 seconds for the VM to go
	local pid
	pid="$(beam_pid)" || return 0
	kill "-$1" "$pid" 2>/dev/null || true
	for _ in $(seq $(($2 * 10))); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.2
}

stop() {
	if [ -f "$STATE/ports" ]; then
		node_env
		kill_node TERM 30
		epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || true
	fi
	rm -rf "$STATE"
}

crash() {
	[ -f "$STATE/ports" ] || die "no node to crash (state folder $STATE)"
	node_env
	beam_pid >/dev/null || die "the node is not running (state folder $STATE)"
	kill_node KILL 10
	boot
}

command="${1:-}"
case "$command" in
start | stop | status | crash) ;;
*) die "usage: broker.sh start|stop|status|crash" ;;
esac

if ! installed; then
	case "$command" in
	start) install_rabbitmq ;;
	stop)
		rm -rf "$STATE"
		exit 0
		;;
	*) die "not running (rabbitmq-server is not installed)" ;;
	esac
fi

case "$command" in
start) start ;;
stop) stop ;;
crash) crash ;;
status)
	if running; then
		cat "$STATE/url"
	else
		die "not running (state folder $STATE)"
	fi
	;;
esac
