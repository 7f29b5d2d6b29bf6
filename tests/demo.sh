#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: sluice limiting real packets, in about 20 s, as root.
#
# Two network namespaces (tests/lib/netns.sh). The sluice agent runs in the
# receiving one with rules/demo.json. Our paced sender (build/pktsend)
# offers UDP to port 9000 at 60000 packets/s and TCP SYNs to port 80 at
# 5000/s. Once a second a table shows, per rule, what was offered, admitted
# and dropped: sluice's own counters, as a user reads them (`sluice stats
# -j`), and the admitted packets counted independently behind XDP at tc
# ingress (build/rxcount). Halfway the agent is killed with SIGKILL: the
# data plane stays pinned and keeps limiting with no agent (only tc's count
# is shown then: nobody answers `sluice stats`). Then the agent is started
# again; it adopts the running data plane and the rules kept counting. A
# summary checks that the limits held and that the two counts agree.
#
# Each flow has a veth pair of its own (veth-tx -> veth-rx for UDP,
# veth-tx2 -> veth-rx2 for the SYNs), with one agent on both receiving
# ends: rxcount answers TC_ACT_OK for the packets it does not count, which
# ends the tc filter chain, so two rxcounts cannot share one device.
#
# Everything lives in the namespaces and a private bpffs, removed on exit
# and on Ctrl-C; what a killed run left behind is removed by the next one.
#
# usage: tests/demo.sh
# Exit 0 when the demo ran and showed what it claims; 1 when it could not
# run; 2 when a check failed (a limit not held within 5 %, with or without
# the agent; sluice's total admitted not equal to tc's; the restarted agent
# not adopting the data plane is 1, as it stops the show).

set -u
cd "$(dirname "$0")/.." || exit 1

BUILD=${BUILD:-build}
export BUILD
RULES=rules/demo.json
UDP_RULE=demo-udp-9000 UDP_PORT=9000 UDP_RATE=60000 UDP_LIMIT=20000
SYN_RULE=demo-syn-80 SYN_PORT=80 SYN_RATE=5000 SYN_LIMIT=1000
TICKS=13	# table rows, one per second
KILL_AT=6	# kill -9 the agent after this row
RESTART_AT=8	# and start it again after this one
PREFIX=sluicedemo

die()
{
	echo "demo: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] ||
	die "needs root (network namespaces, XDP): sudo make demo"
for t in sluice pktsend rxcount xdppass; do
	[ -x "$BUILD/$t" ] || die "$BUILD/$t is missing: run 'make all gen'"
done
for c in ip tc bpftool jq; do
	command -v "$c" >/dev/null || die "needs $c: run 'make deps'"
done

# shellcheck source=tests/lib/netns.sh
source tests/lib/netns.sh
# shellcheck source=tests/lib/sluice.sh
source tests/lib/sluice.sh

# Leftovers of earlier runs that could not clean up (kill -9, power cut):
# their namespaces (and so the processes and veths in them) and their
# bpffs. A run is known by its pid in the names; one still alive is left
# alone.
_demo_stale()
{
	local ns pid d

	for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
		[[ $ns =~ ^$PREFIX-([0-9]+)-(tx|rx)$ ]] || continue
		pid=${BASH_REMATCH[1]}
		[ "$pid" != $$ ] && ! kill -0 "$pid" 2>/dev/null &&
			_netns_del "$ns"
	done
	for d in /tmp/"$PREFIX".*; do
		[ -d "$d" ] || continue
		pid=${d##*.}
		[[ $pid =~ ^[0-9]+$ ]] || continue
		if [ "$pid" = $$ ] || kill -0 "$pid" 2>/dev/null; then
			continue
		fi
		mountpoint -q "$d/bpffs" && umount -l "$d/bpffs"
		rm -rf "$d"
	done
}
_demo_stale

probe=$(skip_unless_root_and_xdp "sluice demo")
[ -z "$probe" ] || die "cannot run: ${probe#*# SKIP }"

# ---- the world --------------------------------------------------------------

# our own temporary directory, named after us for _demo_stale
NETNS_TMP=/tmp/$PREFIX.$$
mkdir -p "$NETNS_TMP" || die "cannot create $NETNS_TMP"
netns_on_exit "rm -rf '$NETNS_TMP'"
# netns.sh's traps, with a word for the user
trap 'echo; echo "demo: interrupted, cleaning up" >&2; netns_cleanup; exit 130' INT
trap 'echo "demo: terminated, cleaning up" >&2; netns_cleanup; exit 143' TERM
netns_setup "$PREFIX" 2 || die "cannot create the namespaces"
# the second pair, for the SYNs
{ ip -n "$NS_TX" link add veth-tx2 type veth peer name veth-rx2 \
	netns "$NS_RX" &&
  ip -n "$NS_TX" addr add 198.18.1.1/24 dev veth-tx2 &&
  ip -n "$NS_RX" addr add 198.18.1.2/24 dev veth-rx2 &&
  ip -n "$NS_TX" link set veth-tx2 up &&
  ip -n "$NS_RX" link set veth-rx2 up; } ||
	die "cannot create the second veth pair"
RX2_MAC=$(_netns_link_field "$NS_RX" veth-rx2 mac) || die "no veth-rx2"
sluice_env_setup || die "cannot mount a bpffs for sluice's pins"
# runs before sluice_env_setup's `down --iface veth-rx`, which then also
# removes the pinned maps
netns_on_exit "ip netns exec '$NS_RX' '$SLUICE' down --iface veth-rx2 \
	--pin-dir '$SL_PIN'"

# The agent on both receiving devices; waits until it is ready and sets
# READY_MS to the time that took.
start_agent()
{
	local t0=${EPOCHREALTIME//[.,]/} i

	netns_bg "$NS_RX" agent "$SLUICE" agent --iface veth-rx,veth-rx2 \
		--rules "$RULES" --state-dir "$SL_STATE" --pin-dir "$SL_PIN"
	for ((i = 0; i < 400; i++)); do
		if sluice_cli status --ready >/dev/null 2>&1; then
			READY_MS=$(((${EPOCHREALTIME//[.,]/} - t0) / 1000))
			return 0
		fi
		kill -0 "${NETNS_PID[agent]}" 2>/dev/null || break
		sleep 0.02
	done
	sed 's/^/  /' "$NETNS_TMP/agent.err" >&2
	return 1
}
start_agent || die "the agent did not start"

# ---- reading the counters ---------------------------------------------------

# The packet counter map of the rxcount on device $1 in NS_RX.
counts_map()
{
	local p m

	p=$(tc -n "$NS_RX" -j filter show dev "$1" ingress |
		jq -r '.[].options.prog.id // empty' | head -n1)
	[ -n "$p" ] || return 1
	for m in $(bpftool -j prog show id "$p" | jq '.map_ids[]'); do
		[ "$(bpftool -j map show id "$m" | jq -r .name)" = counts ] &&
			{ echo "$m"; return 0; }
	done
	return 1
}

# start_counter NAME DEV PROTO PORT: rxcount for one port on DEV, dropping
# what it counts (the stack would only answer with ICMP errors and RSTs)
start_counter()
{
	netns_bg "$NS_RX" "$1" "$GEN_BIN/rxcount" --dev "$2" --proto "$3" \
		--dport "$4" --drop --duration 30
	netns_wait_ready "$1" 5 || die "rxcount on $2 did not start"
}
start_counter rx_udp veth-rx udp "$UDP_PORT"
start_counter rx_syn veth-rx2 tcp "$SYN_PORT"
UDP_MAP=$(counts_map veth-rx) || die "cannot find rxcount's map on veth-rx"
SYN_MAP=$(counts_map veth-rx2) || die "cannot find rxcount's map on veth-rx2"
printf '%s\n' "map lookup id $UDP_MAP key 0 0 0 0" \
	"map lookup id $SYN_MAP key 0 0 0 0" >"$NETNS_TMP/batch"

agent_alive()
{
	kill -0 "${NETNS_PID[agent]:-0}" 2>/dev/null
}

# tc's two counts now, into TC_U TC_S
read_tc()
{
	local out

	# Ctrl-C must not cut a reading short: the trap cleans up after it
	out=$(trap '' INT; bpftool -j batch file "$NETNS_TMP/batch" |
		jq -r '[.[].output.formatted.values | map(.value.packets) |
			add] | @tsv') || die "cannot read rxcount's counters"
	read -r TC_U TC_S <<<"$out"
}

# Sets S_T (us), S_UTC S_STC (counted at tc) and, when an agent answers,
# S_UP S_UB S_SP S_SB (the two rules' passed and blocked packets, from
# `sluice stats -j`); with no agent S_AGENT=0 and those four are empty.
# tc is read before and after sluice and the two averaged, so both counts
# are of (nearly) the same moment though `sluice stats` takes ~20 ms.
sample()
{
	local out u0 s0

	read_tc
	S_T=${EPOCHREALTIME//[.,]/} S_UTC=$TC_U S_STC=$TC_S
	S_UP='' S_UB='' S_SP='' S_SB='' S_AGENT=0
	agent_alive || return 0
	u0=$TC_U s0=$TC_S
	out=$(trap '' INT; sluice_cli stats -j | jq -r --arg u "$UDP_RULE" \
		--arg s "$SYN_RULE" '
		def rule($n): [.rules[] | select(.name == $n)][0] //
			error("rule \($n) is not in force");
		[(rule($u), rule($s)) | .passed_pkts, .blocked_pkts] | @tsv') ||
		die "cannot read sluice's counters (sluice stats -j)"
	read -r S_UP S_UB S_SP S_SB <<<"$out"
	read_tc
	S_T=$(((S_T + ${EPOCHREALTIME//[.,]/}) / 2))
	S_UTC=$(((u0 + TC_U) / 2)) S_STC=$(((s0 + TC_S) / 2))
	S_AGENT=1
}

# ---- the show ---------------------------------------------------------------

cat <<EOF
sluice demo: an XDP rate limiter, on real packets between two network namespaces

  sender    $NS_TX, build/pktsend (paced):
              UDP to port $UDP_PORT at $UDP_RATE packets/s  over veth-tx  -> veth-rx
              TCP SYNs to port $SYN_PORT at $SYN_RATE/s         over veth-tx2 -> veth-rx2
  receiver  $NS_RX: one sluice agent on veth-rx and veth-rx2, $RULES:
              $UDP_RULE  udp dport $UDP_PORT  pps $UDP_LIMIT  (packets per second)
              $SYN_RULE    tcp dport $SYN_PORT    cps $SYN_LIMIT   (new connections, SYNs per second)

  offered, admitted "sluice", dropped: sluice's own counters (sluice stats -j)
  admitted "tc": counted independently behind XDP at tc ingress (build/rxcount)

EOF

# one sender per CPU when there are two
CPU2=$(($(nproc) > 1 ? 1 : 0))
for f in udp syn; do
	if [ $f = udp ]; then
		args=(--dev veth-tx --dst-mac "$RX_MAC" --proto udp
		      --dport "$UDP_PORT" --rate "$UDP_RATE" --cpu 0)
	else
		args=(--dev veth-tx2 --dst-mac "$RX2_MAC" --src 198.18.1.1
		      --dst 198.18.1.2 --proto tcp --tcp-flags syn
		      --dport "$SYN_PORT" --rate "$SYN_RATE" --cpu "$CPU2")
	fi
	netns_bg "$NS_TX" "tx_$f" "$GEN_BIN/pktsend" "${args[@]}" \
		--duration $((TICKS + 2))
done

printf '%-6s %-35s   %s\n' "" "$UDP_RULE, limit $UDP_LIMIT/s" \
	"$SYN_RULE, limit $SYN_LIMIT/s"
printf '%-6s %8s %17s %8s   %8s %17s %8s\n' "" offered "admitted/s" \
	dropped offered "admitted/s" dropped
printf '%6s %8s %8s %8s %8s   %8s %8s %8s %8s   %s\n' time "/s" sluice tc \
	"/s" "/s" sluice tc "/s" agent

# growth of a counter over the last interval, per second
per_s()
{
	echo $((($1 - $2) * 1000000 / DT))
}

UDP_ROWS=() SYN_ROWS=() UDP_DOWN=() SYN_DOWN=()
sample
[ "$S_AGENT" = 1 ] || die "the agent stopped"
T0=$S_T
for ((k = 1; k <= TICKS; k++)); do
	P_T=$S_T P_UP=$S_UP P_UB=$S_UB P_SP=$S_SP P_SB=$S_SB
	P_UTC=$S_UTC P_STC=$S_STC P_AGENT=$S_AGENT
	# on the k-th second after the start, whatever the last row cost
	wait_us=$((T0 + k * 1000000 - ${EPOCHREALTIME//[.,]/}))
	if [ "$wait_us" -gt 0 ]; then
		sleep "$(printf '%d.%06d' $((wait_us / 1000000)) \
			$((wait_us % 1000000)))"
	fi
	sample
	DT=$((S_T - P_T))
	u_tc=$(per_s "$S_UTC" "$P_UTC") s_tc=$(per_s "$S_STC" "$P_STC")
	UDP_ROWS+=("$u_tc") SYN_ROWS+=("$s_tc")
	if [ "$S_AGENT" = 1 ] && [ "$P_AGENT" = 1 ]; then
		u_adm=$(per_s "$S_UP" "$P_UP") u_drop=$(per_s "$S_UB" "$P_UB")
		s_adm=$(per_s "$S_SP" "$P_SP") s_drop=$(per_s "$S_SB" "$P_SB")
		u_off=$((u_adm + u_drop)) s_off=$((s_adm + s_drop))
	else
		# nobody to ask: tc's count alone shows the limit holding
		u_adm=- u_drop=- s_adm=- s_drop=- u_off=- s_off=-
	fi
	if [ "$S_AGENT" = 1 ]; then
		state="running (pid ${NETNS_PID[agent]})"
	else
		state="NONE"
		UDP_DOWN+=("$u_tc") SYN_DOWN+=("$s_tc")
	fi
	printf '%4d s %8s %8s %8d %8s   %8s %8s %8d %8s   %s\n' "$k" \
		"$u_off" "$u_adm" "$u_tc" "$u_drop" \
		"$s_off" "$s_adm" "$s_tc" "$s_drop" "$state"
	if [ "$k" -eq "$KILL_AT" ]; then
		# the last counts before the kill, to compare after the restart
		K_UP=$S_UP K_SP=$S_SP K_UTC=$S_UTC K_STC=$S_STC K_T=$S_T
		pid=${NETNS_PID[agent]}
		kill -KILL "$pid"
		wait "$pid" 2>/dev/null
		echo ">>> kill -9 the agent (pid $pid). No agent runs now; the" \
			"XDP program and its maps stay pinned."
	elif [ "$k" -eq "$RESTART_AT" ]; then
		start_agent || die "the agent did not start again"
		[ "$(sluice_cli status -j | jq -r .adopted)" = true ] ||
			die "the new agent did not adopt the running data plane"
		sample
		[ "$S_AGENT" = 1 ] || die "the new agent stopped"
		R_UP=$S_UP R_SP=$S_SP R_UTC=$S_UTC R_STC=$S_STC R_T=$S_T
		echo ">>> start the agent again (pid ${NETNS_PID[agent]}):" \
			"ready in $READY_MS ms, it adopted the running data" \
			"plane; the rules kept their counters."
	fi
done
[ "$S_AGENT" = 1 ] || die "the agent stopped"

# With the senders stopped, sluice's totals and tc's must be equal: every
# packet sluice admitted since its rules were made, the kill included, and
# nothing else, reached tc.
netns_stop tx_udp
netns_stop tx_syn
sleep 0.2
sample
[ "$S_AGENT" = 1 ] || die "the agent stopped"
netns_stop rx_udp
netns_stop rx_syn

# What the demo shows must be so; each failed check is said and counted.
FAILED=0
check()	# CONDITION (awk) MESSAGE
{
	awk "BEGIN { exit !($1) }" && return 0
	echo "  FAILED: $2"
	FAILED=$((FAILED + 1))
}

# summary RULE LIMIT SENT_JSON RXCOUNT_JSON "ROWS" "ROWS WITHOUT AGENT"
#         SLUICE_PASSED TC_COUNTED (totals once the senders stopped)
#         SLUICE_GAP TC_GAP (from the last reading before the kill to the
#         first after the restart; GAP_US long)
summary()
{
	local sent max1 top ratio mean down gap

	sent=$(jq '.pps | round' "$3")
	# rxcount: the largest count in any 1 s window, from arrival times
	max1=$(jq '.max_1s_pkt // .max_1s' "$4")
	top=$(tr ' ' '\n' <<<"$5" | sort -n | tail -n1)
	ratio=$(awk -v m="$max1" -v l="$2" 'BEGIN { printf "%.3f", m / l }')
	# the first row holds the senders' start
	mean=$(awk -v r="$5" \
		'BEGIN { n = split(r, a, " "); for (i = 2; i <= n; i++) s += a[i]
			 printf "%d", s / (n - 1) }')
	printf '  %-14s offered %5d/s, limit %5d/s: largest 1 s admitted %5d' \
		"$1" "$sent" "$2" "$max1"
	printf ' (%s x the limit), mean %d/s from the second second\n' "$ratio" "$mean"
	printf '  %-14s per second: largest row %s; with no agent: %s\n' "" \
		"$top" "${6// /, }"
	printf '  %-14s admitted in all: %d by sluice'"'"'s count, %d at tc;' \
		"" "$7" "$8"
	gap=$(awk -v n="${10}" -v us="$GAP_US" 'BEGIN { printf "%d", n * 1e6 / us }')
	printf ' while no agent ran: %d and %d (%d/s at tc)\n' "$9" "${10}" \
		"$gap"
	check "$max1 <= 1.05 * $2" \
		"$1: a 1 s window admitted $max1, above 1.05 x the limit $2"
	check "$mean >= 0.95 * $2" \
		"$1: admitted $mean/s on average, under 0.95 x the limit $2"
	# no second over the limit; the rate over the whole gap within 5 %
	# (a single second at 1000/s is off by up to a tenth where its edges
	# cut through the admitted chunks, docs/architecture.md)
	for down in $6; do
		check "$down <= 1.05 * $2" \
			"$1: $down/s in a second with no agent, above 1.05 x $2"
	done
	check "$gap <= 1.05 * $2 && $gap >= 0.95 * $2" \
		"$1: $gap/s while no agent ran, not within 0.95-1.05 x $2"
	check "$7 == $8" "$1: sluice counted $7 admitted in all, tc $8"
}

echo
echo "summary: admitted = counted at tc ingress, over the whole run," \
	"the kill and the restart included"
GAP_US=$((R_T - K_T))
summary "$UDP_RULE" "$UDP_LIMIT" "$NETNS_TMP/tx_udp.out" \
	"$NETNS_TMP/rx_udp.out" "${UDP_ROWS[*]}" "${UDP_DOWN[*]}" \
	"$S_UP" "$S_UTC" $((R_UP - K_UP)) $((R_UTC - K_UTC))
summary "$SYN_RULE" "$SYN_LIMIT" "$NETNS_TMP/tx_syn.out" \
	"$NETNS_TMP/rx_syn.out" "${SYN_ROWS[*]}" "${SYN_DOWN[*]}" \
	"$S_SP" "$S_STC" $((R_SP - K_SP)) $((R_STC - K_STC))
if [ "$FAILED" -gt 0 ]; then
	echo "demo: $FAILED check(s) failed: what the table shows is not what" \
		"sluice promises" >&2
	echo "cleaning up: the agent, \`sluice down\`, the namespaces"
	exit 2
fi
echo "  the limits held (within 5%) while the agent was killed and" \
	"started again; sluice's counts equal tc's."
echo "cleaning up: the agent, \`sluice down\`, the namespaces"
exit 0
