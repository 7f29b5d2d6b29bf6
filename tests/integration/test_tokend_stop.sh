#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Stopping replicas of an election and their etcd at the same instant
# (docs/cluster.md, "Replicas"): 3 tokend replicas on one real
# etcd-server, elected, then SIGTERM to all four at once, ROUNDS times
# (50). Every replica must exit 0: no abort (status 134), no "double
# free" or other allocator message on stderr, whatever etcd answered
# (or did not) to the lease revoke of the stop. About 1.5 s a round.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh
source tests/lib/etcd.sh

ROUNDS=${ROUNDS:-50}
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
	echo "ok 1 - tokend stop # SKIP etcd is not installed (etcd-server, etcd-client)"
	echo "1..1"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "ok 1 - tokend stop # SKIP needs root (a network namespace)"
	echo "1..1"
	exit 0
fi
netns_setup tdstop 1 || { echo "Bail out! netns setup failed"; exit 1; }
_netns_tmp || { echo "Bail out! no temporary directory"; exit 1; }
T=$NETNS_TMP
ETCD_EP=http://127.0.0.1:2379
cat >"$T/rules.json" <<EOF
{"rules": [{"name": "f", "match": {"proto": "udp", "dport": 9000},
  "grade": "pps", "count": 1000, "cluster": {"namespace": "web",
  "flow_id": 1, "threshold_type": "global"}}]}
EOF

replica() # I
{
	mkdir -p "$T/td$1"
	netns_bg "$NS_RX" "td$1" "$SLUICE" tokend --listen "127.0.0.1:$((7300 + $1))" \
		--advertise "127.0.0.1:$((7300 + $1))" --rules "$T/rules.json" \
		--state-dir "$T/td$1" --etcd "$ETCD_EP" --election /sluice/stop
}

# every replica has said who leads (5 s at most)
elected()
{
	local i

	for ((i = 0; i < 100; i++)); do
		[ "$(grep -lE 'election: (leader|follower)' "$T"/td[123].err |
			wc -l)" = 3 ] && return 0
		sleep 0.05
	done
	return 1
}

aborts=0 bad=0 unelected=0 t0=$SECONDS
for ((round = 1; round <= ROUNDS; round++)); do
	etcd_start || { echo "Bail out! etcd did not start (round $round)"; exit 1; }
	for r in 1 2 3; do replica "$r"; done
	elected || unelected=$((unelected + 1))
	pids="${NETNS_PID[etcd]} ${NETNS_PID[td1]} ${NETNS_PID[td2]} ${NETNS_PID[td3]}"
	kill -TERM $pids
	for r in 1 2 3; do
		wait "${NETNS_PID[td$r]}"
		rc=$?
		unset "NETNS_PID[td$r]"
		if [ "$rc" = 134 ] || grep -qiE 'double free|free\(\)|corrupt|AddressSanitizer' "$T/td$r.err"; then
			aborts=$((aborts + 1))
			echo "# round $round, replica $r: exit $rc"
			show "$T/td$r.err" 4
		elif [ "$rc" != 0 ]; then
			bad=$((bad + 1))
			echo "# round $round, replica $r: exit $rc"
			show "$T/td$r.err" 4
		fi
	done
	wait "${NETNS_PID[etcd]}" 2>/dev/null
	unset "NETNS_PID[etcd]"
done
echo "# $ROUNDS rounds of 3 replicas and etcd stopped together in $((SECONDS - t0)) s"
check $((unelected == 0 ? 0 : 1)) "every round: all 3 replicas knew the leader before the stop ($unelected rounds not)"
check $((aborts == 0 ? 0 : 1)) "no replica aborted: $aborts of $((3 * ROUNDS)) stops with status 134 or an allocator message"
check $((bad == 0 ? 0 : 1)) "every replica exited 0 ($bad did not)"
echo "1..$n"
