#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Rule pushes to a fleet (docs/fleet.md, "Pushes to a large fleet"): N
# simulated agents (build/bench_push: the agent's etcd source, one thread
# each, in one process) against a real etcd and, for manifests, a static
# body server (in bench_push). Puts: the whole set, PUTS of one rule
# changed, one of every rule changed. nftables counts the bytes etcd
# (port 2379) and the body server (port 8080) send; bench_push reads the
# CPU that it and etcd spend on each put. Runs the manifest design, then (with --old) the rule file as
# the key's value, as `sluice push` published it before manifests.
#
# usage: tests/bench/bench_push.sh [--agents N] [--rules N] [--puts N]
#                                   [--parse-every K] [--gzip 0|1]
#                                   [--warm-mb MB] [--old | --old-only]
# Every agent fetches and checks each value; one in K (20) parses it too:
# a thousand parses of 4,096 rules are seconds of CPU that a fleet spends
# on a thousand hosts, not on the two cores that etcd and the body server
# share here with the simulation (--parse-every 1 measures that too).
# --warm-mb (600; 0: off) faults the simulation's heap in before the
# puts: each agent of a fleet grows its own by one body, but a thousand
# in one process would grow this one by a thousand at once, about 100,000
# page faults that here cost 2 s of CPU in one put.
# Exits 0 whatever the figures, 1 when it cannot measure; a TAP skip
# (exit 0) without root, etcd or nft.

set -u
AGENTS=1000
RULES=4096
PUTS=5
OLD=0
PARSE_EVERY=20
GZIP=1
WARM_MB=600
while [ $# -gt 0 ]; do
	case $1 in
	--agents) AGENTS=$2; shift 2 ;;
	--rules) RULES=$2; shift 2 ;;
	--puts) PUTS=$2; shift 2 ;;
	--old) OLD=1; shift ;;
	--old-only) OLD=only; shift ;;
	--parse-every) PARSE_EVERY=$2; shift 2 ;;
	--gzip) GZIP=$2; shift 2 ;;
	--warm-mb) WARM_MB=$2; shift 2 ;;
	*) echo "usage: $0 [--agents N] [--rules N] [--puts N] [--parse-every K] [--gzip 0|1] [--warm-mb MB] [--old | --old-only]" >&2; exit 2 ;;
	esac
done

cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
source tests/lib/netns.sh
source tests/lib/etcd.sh

for t in etcd nft; do
	command -v $t >/dev/null ||
		{ echo "ok 1 - rule pushes # SKIP $t is not installed"; exit 0; }
done
[ "$(id -u)" = 0 ] || { echo "ok 1 - rule pushes # SKIP needs root"; exit 0; }
[ -x "$BUILD/bench_push" ] || { echo "$BUILD/bench_push: make $BUILD/bench_push" >&2; exit 1; }
netns_setup bpush 1 || { echo "netns setup failed" >&2; exit 1; }
T=$(mktemp -d /tmp/bench_push.XXXXXX)
netns_on_exit "rm -rf '$T'"
ETCD_EP=http://127.0.0.1:2379


etcd_start >&2 || exit 1
ip netns exec "$NS_RX" nft -f - <<'NFT' || { echo "nft failed" >&2; exit 1; }
table inet bench {
	counter etcd_out { }
	counter body_out { }
	chain out {
		type filter hook output priority 0;
		tcp sport 2379 counter name etcd_out
		tcp sport 8080 counter name body_out
	}
}
NFT
count() { echo "ip netns exec $NS_RX nft list counter inet bench $1 | awk '{ for (i = 1; i < NF; i++) if (\$i == \"bytes\") print \$(i + 1) }'"; }

run() # MODE KEY
{
	ip netns exec "$NS_RX" "$BUILD/bench_push" --etcd "$ETCD_EP" --key "$2" \
		--mode "$1" --agents "$AGENTS" --rules "$RULES" --puts "$PUTS" \
		--parse-every "$PARSE_EVERY" --gzip "$GZIP" --warm-mb "$WARM_MB" \
		--body-port 8080 \
		--etcd-bytes "$(count etcd_out)" --body-bytes "$(count body_out)" \
		--etcd-pid "${NETNS_PID[etcd]}"
}
[ "$OLD" = only ] || run manifest /sluice/bench-manifest || exit 1
if [ "$OLD" != 0 ]; then
	run value /sluice/bench-value || exit 1
fi
