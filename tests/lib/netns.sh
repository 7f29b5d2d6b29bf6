# SPDX-License-Identifier: GPL-2.0
# Network namespace world for tests, sourced by bash test scripts.
#
#   source tests/lib/netns.sh
#   skip_unless_root_and_xdp "suite name"   # TAP skip + exit 0 if unusable
#   netns_setup PREFIX [RXQUEUES]            # two namespaces, one veth pair
#   netns_on_exit CMD...                     # run CMD at exit (LIFO)
#   netns_bg NS NAME CMD...                  # start CMD in NS in background
#   netns_wait_ready NAME [SECONDS]          # wait for "ready" on its stderr
#   netns_stop NAME                          # SIGTERM, wait, return its status
#                                            # (call it outside $(...))
#
# After netns_setup: NS_TX, NS_RX (namespace names, unique per run),
# TX_MAC, RX_MAC, TX_IFINDEX, RX_IFINDEX. veth-tx in NS_TX has 198.18.0.1/24
# and 2001:db8::1/64, veth-rx in NS_RX 198.18.0.2/24 and 2001:db8::2/64.
# A background command's output is in $NETNS_TMP/NAME.out and NAME.err.
#
# Cleanup runs on EXIT, INT and TERM, also when a test fails half way;
# running it twice is harmless. Register your own with netns_on_exit
# rather than with trap, which would replace ours. Bash runs a trap only
# once the foreground command returns: wait for long commands with
# `cmd & wait $!` if a signal must act at once.

NETNS_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GEN_BIN=${GEN_BIN:-${BUILD:-$NETNS_LIB_DIR/../../build}}
NETNS_CLEANUP=()
NETNS_TRAPS=0
NETNS_TMP=
declare -gA NETNS_PID=()

netns_cleanup()
{
	local i

	for ((i = ${#NETNS_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${NETNS_CLEANUP[i]}" >/dev/null 2>&1 || true
	done
	NETNS_CLEANUP=()
}

netns_on_exit()
{
	NETNS_CLEANUP+=("$*")
	if [ "$NETNS_TRAPS" -eq 0 ]; then
		NETNS_TRAPS=1
		trap netns_cleanup EXIT
		trap 'netns_cleanup; exit 130' INT
		trap 'netns_cleanup; exit 143' TERM
	fi
}

# Processes still inside a namespace keep it (and its veth) alive after
# "ip netns del", so end them first: all of them were started by the test.
_netns_del()
{
	local ns=$1 pids i

	[ -e "/run/netns/$ns" ] || return 0
	pids=$(ip netns pids "$ns" 2>/dev/null)
	if [ -n "$pids" ]; then
		kill -TERM $pids 2>/dev/null
		for i in 1 2 3 4 5 6 7 8 9 10; do
			pids=$(ip netns pids "$ns" 2>/dev/null)
			[ -z "$pids" ] && break
			sleep 0.1
		done
		[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
	fi
	ip netns del "$ns"
}

_netns_tmp()
{
	if [ -z "$NETNS_TMP" ]; then
		NETNS_TMP=$(mktemp -d /tmp/netns.XXXXXX) || return 1
		netns_on_exit "rm -rf '$NETNS_TMP'"
	fi
}

_netns_link_field()
{
	# $1 ns, $2 dev, $3 "mac" or "ifindex"
	local line

	line=$(ip -n "$1" -o link show dev "$2") || return 1
	case $3 in
	mac) sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p' <<<"$line" ;;
	ifindex) echo "${line%%:*}" ;;
	esac
}

netns_setup()
{
	local prefix=${1:?netns_setup PREFIX [RXQUEUES]} q=${2:-2}

	NS_TX="$prefix-$$-tx"
	NS_RX="$prefix-$$-rx"
	netns_on_exit "_netns_del '$NS_TX'"
	netns_on_exit "_netns_del '$NS_RX'"
	ip netns add "$NS_TX" && ip netns add "$NS_RX" || return 1
	ip -n "$NS_TX" link add veth-tx numtxqueues "$q" numrxqueues "$q" \
		type veth peer name veth-rx netns "$NS_RX" \
		numtxqueues "$q" numrxqueues "$q" || return 1
	ip -n "$NS_TX" addr add 198.18.0.1/24 dev veth-tx &&
	ip -n "$NS_RX" addr add 198.18.0.2/24 dev veth-rx &&
	ip -n "$NS_TX" addr add 2001:db8::1/64 dev veth-tx nodad &&
	ip -n "$NS_RX" addr add 2001:db8::2/64 dev veth-rx nodad &&
	ip -n "$NS_TX" link set lo up && ip -n "$NS_RX" link set lo up &&
	ip -n "$NS_TX" link set veth-tx up &&
	ip -n "$NS_RX" link set veth-rx up || return 1
	TX_MAC=$(_netns_link_field "$NS_TX" veth-tx mac) &&
	RX_MAC=$(_netns_link_field "$NS_RX" veth-rx mac) &&
	TX_IFINDEX=$(_netns_link_field "$NS_TX" veth-tx ifindex) &&
	RX_IFINDEX=$(_netns_link_field "$NS_RX" veth-rx ifindex) || return 1
	export NS_TX NS_RX TX_MAC RX_MAC TX_IFINDEX RX_IFINDEX
}

_netns_bg_kill()
{
	local pid=${NETNS_PID[$1]:-}

	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	unset "NETNS_PID[$1]"
}

netns_bg()
{
	local ns=$1 name=$2

	shift 2
	_netns_tmp || return 1
	# emptied here, not in the child: netns_wait_ready must not find the
	# "ready" of an earlier run under the same name
	: >"$NETNS_TMP/$name.out"
	: >"$NETNS_TMP/$name.err"
	ip netns exec "$ns" "$@" >>"$NETNS_TMP/$name.out" \
		2>>"$NETNS_TMP/$name.err" &
	NETNS_PID[$name]=$!
	netns_on_exit "_netns_bg_kill '$name'"
}

# Deliver to NS packets from sources outside its veths' /24 (test
# senders spoof them): no reverse-path check.
netns_no_rp_filter()
{
	ip netns exec "$1" sysctl -qw net.ipv4.conf.all.rp_filter=0 \
		net.ipv4.conf.veth-rx.rp_filter=0
}

netns_wait_ready()
{
	local name=$1 secs=${2:-5} pid=${NETNS_PID[$1]:-} i

	for ((i = 0; i < secs * 20; i++)); do
		grep -qx ready "$NETNS_TMP/$name.err" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

netns_stop()
{
	local pid=${NETNS_PID[$1]:-} rc i

	[ -n "$pid" ] || return 1
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rc=$?
	if [ "$rc" -eq 127 ]; then
		# called from a subshell, $(...): not our child to wait for
		rc=0
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
	fi
	unset "NETNS_PID[$1]"
	return $rc
}

# Whether xdpflood cannot send here: 0 with LIVE_WHY set to why (a kernel
# before 5.18, or a host that refuses BPF_F_TEST_XDP_LIVE_FRAMES even to
# root), else 1. One frame out of veth-tx; call after netns_setup.
live_frames_refused()
{
	local err rc

	err=$(ip netns exec "$NS_TX" "$GEN_BIN/xdpflood" --dev veth-tx \
		--dst-mac "$RX_MAC" --duration 0.01 --repeat 1 2>&1 >/dev/null)
	rc=$?
	LIVE_WHY=
	[ "$rc" = 77 ] || return 1
	LIVE_WHY=$(grep -v '^ready$' <<<"$err" | tail -n1)
	LIVE_WHY=${LIVE_WHY#xdpflood: }
	return 0
}

# FLOOD_GEN: xdpflood, or pktsend where live frames are refused (said as
# a TAP comment). Call after netns_setup.
pick_flood_gen()
{
	FLOOD_GEN=xdpflood
	live_frames_refused || return 0
	echo "# xdpflood cannot send here ($LIVE_WHY): floods from pktsend"
	FLOOD_GEN=pktsend
}

# Prints "ok 1 - NAME # SKIP reason" and exits 0 unless we are root and
# native XDP attaches to a veth (probed with xdppass in a scratch netns).
skip_unless_root_and_xdp()
{
	local name=${1:-$(basename "$0")} ns="xdpprobe-$$" err rc

	if [ "$(id -u)" -ne 0 ]; then
		echo "ok 1 - $name # SKIP needs root"
		exit 0
	fi
	if [ ! -x "$GEN_BIN/xdppass" ]; then
		echo "Bail out! $GEN_BIN/xdppass is missing: run 'make gen'"
		exit 1
	fi
	netns_on_exit "_netns_del '$ns'"
	if ! ip netns add "$ns" 2>/dev/null ||
	   ! ip -n "$ns" link add p0 type veth peer name p1 2>/dev/null; then
		echo "ok 1 - $name # SKIP cannot create a netns with a veth pair"
		exit 0
	fi
	ip -n "$ns" link set p0 up && ip -n "$ns" link set p1 up
	err=$(ip netns exec "$ns" "$GEN_BIN/xdppass" --dev p0 --duration 0 \
		2>&1 >/dev/null)
	rc=$?
	_netns_del "$ns"
	if [ "$rc" -ne 0 ]; then
		err=$(grep -v '^ready$' <<<"$err" | head -n1)
		echo "ok 1 - $name # SKIP no native XDP on veth: ${err:-rc $rc}"
		exit 0
	fi
}
