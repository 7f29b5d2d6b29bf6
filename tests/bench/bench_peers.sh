#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# sluice side by side with what users run today (docs/benchmarks.md,
# "Against nftables, iptables and Redis"), in one invocation on the same
# floods, in namespaces of its own (tests/lib/netns.sh):
#   drop    bare XDP_DROP, a counting XDP_DROP, sluice dropping above a
#           small threshold (as deployed, and with --stats-interval 0 as
#           veth_drop.sh runs it), sluice per_source, nftables `limit` and
#           `meter` at netdev ingress and at prerouting, iptables
#           `hashlimit`: packets/s handled and softirq ns per packet;
#   accuracy  admitted / threshold at 1k, 10k, 100k and 1M pps offered at
#           2x: sluice, nft limit (default burst, and a burst of 50 ms
#           worth), hashlimit;
#   fairness  1000 sources, 10 of them flooding: what the 990 polite ones
#           keep, sluice per_source, nft meter, hashlimit;
#   cluster   tokend against Redis (INCRBY+EXPIRE, and a Lua sliding
#           window) at the same flow updates/s: achieved rate, p50, p99;
#           and at that load, what a fleet admits over time through a
#           kill -9 and a restart of each (bench_failover.c);
#   memory  sluice's map memory per rule slot and per source, agent RSS
#           (1 and 4096 rules), tokend and redis RSS;
#   tables  the kernel's slab memory per tracked source of sluice
#           per_source, an nft meter and an iptables hashlimit table with
#           1000, 10000 and 100000 sources.
# Every figure is the median, min and max over RUNS runs; drop-path
# figures are also given as ratios to the bare XDP_DROP of the same run.
#
# The generator's share of the CPU: veth runs the receiver's NAPI on the
# sending CPU, so generator and receiver cannot be on different cores.
# The flood is pinned to CPU GEN_CPU (0); everything else (agent, tokend,
# Redis, this script) to the other core. The receiver's cost is the
# softirq time of GEN_CPU (/proc/stat), which holds NAPI, XDP, tc,
# netfilter and the stack's receive path; the generator's own work runs in
# process context and is counted as system time, reported beside it.
#
# usage: tests/bench/bench_peers.sh   (root; QUICK=1 fewer, shorter runs;
#        PLOTS=DIR gnuplot PNGs there; OUT=FILE the tables, default
#        build/bench-peers.md, with the raw results in OUT.tsv and the
#        failover runs' bins in OUT.failover/; RUNS and the *_S
#        durations, TOK_AGENTS, FO_*, TABLE_SOURCES override the
#        defaults below; PARTS="memory tables" runs only those of drop
#        accuracy fairness cluster failover memory tables)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
export BUILD
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tokend_bench.sh

QUICK=${QUICK:-}
PARTS=${PARTS:-drop accuracy fairness cluster failover memory tables}
want() { [[ " $PARTS " == *" $1 "* ]]; }
PLOTS=${PLOTS:-}
OUT=${OUT:-$BUILD/bench-peers.md}
GEN_CPU=${GEN_CPU:-0}
OTHER_CPU=$(((GEN_CPU + 1) % $(nproc)))
if [ -n "$QUICK" ]; then
	d=(3 2 3 2 2 200)
else
	d=(5 4 5 5 5 1000)
fi
RUNS=${RUNS:-${d[0]}} DROP_S=${DROP_S:-${d[1]}} ACC_S=${ACC_S:-${d[2]}}
FAIR_S=${FAIR_S:-${d[3]}} TOK_S=${TOK_S:-${d[4]}} TOK_AGENTS=${TOK_AGENTS:-${d[5]}}
TOK_FLOWS=10 TOK_PERIOD_MS=100

die()
{
	echo "bench_peers: $*" >&2
	exit 1
}

for t in nft iptables redis-server bpftool jq python3; do
	command -v "$t" >/dev/null || die "needs $t: run 'make deps'"
done
[ -z "$PLOTS" ] || command -v gnuplot >/dev/null ||
	die "PLOTS needs gnuplot: run 'make deps'"
for b in xdpflood pktsend rxcount xdppass sluice bench_tokend \
	 bench_failover; do
	[ -x "$BUILD/$b" ] || die "$BUILD/$b missing: run 'make all gen bench-bins'"
done
skip_unless_root_and_xdp "bench-peers"
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs (generator and the rest apart)"

# this script and what it starts stay off the flood's CPU
taskset -pc "$OTHER_CPU" $$ >/dev/null
netns_setup peers 2 || die "cannot create the namespaces"
sluice_env_setup || die "cannot mount a bpffs"
RES=$NETNS_TMP/results.tsv
: >"$RES"
RX() { ip netns exec "$NS_RX" "$@"; }
TX() { ip netns exec "$NS_TX" "$@"; }
record() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$RES"; }	# section config key value

rx_packets() { RX cat /sys/class/net/veth-rx/statistics/rx_packets; }
# softirq and system ticks of a CPU
cpu_ticks() { awk -v c="cpu$1" '$1 == c { print $8, $4 }' /proc/stat; }
HZ=$(getconf CLK_TCK)

filters_reset()
{
	RX nft flush ruleset
	RX iptables -t raw -F PREROUTING 2>/dev/null
	RX iptables -t raw -Z 2>/dev/null
}
netns_on_exit filters_reset

rules_file()	# NAME MATCH COUNT [EXTRA]
{
	printf '{"rules":[{"name":"%s","match":%s,"grade":"pps","count":%s%s}]}\n' \
		"$1" "$2" "$3" "${4:-}" >"$NETNS_TMP/$1.json"
	echo "$NETNS_TMP/$1.json"
}

# receiver: "xdp-pass", "xdp-drop", "xdp-count", or "sluice FILE [ARGS]"
receiver_up()
{
	case $1 in
	xdp-pass) netns_bg "$NS_RX" xdp "$BUILD/xdppass" --dev veth-rx ;;
	xdp-drop) netns_bg "$NS_RX" xdp "$BUILD/xdppass" --dev veth-rx --drop ;;
	xdp-count) netns_bg "$NS_RX" xdp "$BUILD/xdppass" --dev veth-rx \
			--drop --count ;;
	sluice)
		shift
		sluice_start agent --rules "$@" >/dev/null ||
			die "the agent did not start"
		taskset -apc "$OTHER_CPU" "${NETNS_PID[agent]}" >/dev/null
		return 0 ;;
	esac
	netns_wait_ready xdp 5 || die "xdppass did not attach"
}

receiver_down()
{
	if [ -n "${NETNS_PID[agent]:-}" ]; then
		netns_stop agent
		RX "$SLUICE" down --iface veth-rx --pin-dir "$SL_PIN" >/dev/null 2>&1
		rm -rf "$SL_STATE"/* 2>/dev/null
	fi
	[ -z "${NETNS_PID[xdp]:-}" ] || netns_stop xdp
	filters_reset
}

# ---- filters --------------------------------------------------------

# nft at netdev ingress (HOOK=ingress) or prerouting (HOOK=pre): RULE
# (nft syntax) on dport, then a counter of what it let through per dport
nft_up()	# HOOK "RULE" DPORT...
{
	local hook=$1 rule=$2 fam chain d

	shift 2
	if [ "$hook" = ingress ]; then
		fam=netdev
		chain="{ type filter hook ingress device veth-rx priority 0; }"
	else
		fam=ip
		chain="{ type filter hook prerouting priority -300; }"
	fi
	RX nft add table $fam peers || return 1
	RX nft add chain $fam peers c "$chain" || return 1
	RX nft add rule $fam peers c $rule || return 1
	# admitted: counted, then dropped so that the stack does no more work
	for d in "$@"; do
		RX nft add rule $fam peers c udp dport "$d" counter drop || return 1
	done
}

# packets counted by the counter rule of DPORT
nft_admitted()	# DPORT
{
	RX nft list ruleset | awk -v d="dport $1 counter" '
		index($0, d) { for (i = 1; i <= NF; i++) if ($i == "packets") print $(i + 1) }' |
		head -1
}

ipt_up()	# "MATCH ARGS" DPORT...
{
	local d

	RX iptables -t raw -A PREROUTING $1 -j DROP || return 1
	shift
	for d in "$@"; do
		RX iptables -t raw -A PREROUTING -p udp --dport "$d" -j DROP ||
			return 1
	done
}

ipt_admitted()	# DPORT
{
	RX iptables -t raw -L PREROUTING -v -x -n |
		awk -v d="dpt:$1" '$3 == "DROP" && $NF == d && !/hashlimit/ { print $1 }' |
		head -1
}

# ---- 1. drop path ----------------------------------------------------

# flood NAME: a live-frame flood for DROP_S s from FLOOD_SOURCES (16)
# sources; records pps handled, softirq and system ns per packet
drop_flood()
{
	local name=$1 p0 p1 s0 y0 s1 y1 out

	p0=$(rx_packets)
	read -r s0 y0 < <(cpu_ticks "$GEN_CPU")
	out=$(TX "$BUILD/$FLOOD_GEN" --dev veth-tx --dst-mac "$RX_MAC" \
		--src 198.18.0.10 --sources "${FLOOD_SOURCES:-16}" --dport 9000 \
		--duration "$DROP_S" --cpu "$GEN_CPU" 2>/dev/null) ||
		{ echo "# $name: $FLOOD_GEN failed" >&2; return 1; }
	read -r s1 y1 < <(cpu_ticks "$GEN_CPU")
	p1=$(rx_packets)
	python3 - "$name" "$out" "$p0" "$p1" "$s0" "$s1" "$y0" "$y1" "$HZ" \
		>>"$RES" <<'PY'
import json, sys
name, out = sys.argv[1], json.loads(sys.argv[2])
p0, p1, s0, s1, y0, y1, hz = map(int, sys.argv[3:])
n = p1 - p0
print(f"drop\t{name}\tpps\t{n / out['seconds']:.0f}")
print(f"drop\t{name}\tsoftirq_ns\t{(s1 - s0) * 1e9 / hz / max(n, 1):.1f}")
print(f"drop\t{name}\tsystem_ns\t{(y1 - y0) * 1e9 / hz / max(n, 1):.1f}")
PY
}

drop_case()	# NAME RECEIVER... -- FILTER-SETUP...
{
	local name=$1 recv=() filt=()

	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do recv+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	filt=("$@")
	receiver_up "${recv[@]}"
	if [ ${#filt[@]} -gt 0 ] && ! "${filt[@]}"; then
		echo "# $name: filter setup failed" >&2
		receiver_down
		return
	fi
	drop_flood "$name"
	receiver_down
}

# live frames, or where the host refuses them pktsend: a thirtieth of
# the rate, which every receiver keeps up with, and 600 ns a packet of
# AF_PACKET and veth that hide an XDP program's cost (docs/benchmarks.md)
pick_flood_gen >&2
[ "$FLOOD_GEN" = xdpflood ] ||
	echo "# with pktsend only the stack's limiters stand out" >&2
echo "# drop path: $RUNS runs x ${DROP_S} s per case, flood on CPU $GEN_CPU ($FLOOD_GEN)" >&2
DROP_RULE=$(rules_file drop '{"proto":"udp","dport":9000}' 1000)
SRC_RULE=$(rules_file persrc '{"proto":"udp","dport":9000}' 10 \
	',"per_source":{"max_sources":1024}')
# a flood of many sources, each over its limit: every limiter looks each
# packet's source up in a table larger than the CPU's caches
MANY=65536
MANY_RULE=$(rules_file persrcmany '{"proto":"udp","dport":9000}' 10 \
	',"per_source":{"max_sources":100000}')
want drop && for ((run = 1; run <= RUNS; run++)); do
	drop_case bare xdp-drop
	drop_case xdp-count xdp-count
	drop_case sluice sluice "$DROP_RULE"
	drop_case sluice-nostats sluice "$DROP_RULE" --stats-interval 0
	drop_case sluice-per-source sluice "$SRC_RULE"
	drop_case nft-limit-ingress xdp-pass -- nft_up ingress \
		"udp dport 9000 limit rate over 1000/second drop"
	drop_case nft-meter-ingress xdp-pass -- nft_up ingress \
		"udp dport 9000 meter m { ip saddr limit rate over 10/second } drop"
	drop_case nft-limit-pre xdp-pass -- nft_up pre \
		"udp dport 9000 limit rate over 1000/second drop"
	drop_case nft-meter-pre xdp-pass -- nft_up pre \
		"udp dport 9000 meter m { ip saddr limit rate over 10/second } drop"
	drop_case hashlimit xdp-pass -- ipt_up \
		"-p udp --dport 9000 -m hashlimit --hashlimit-above 10/sec --hashlimit-mode srcip --hashlimit-name peers"
	FLOOD_SOURCES=$MANY drop_case "sluice-per-source-$MANY" sluice \
		"$MANY_RULE"
	FLOOD_SOURCES=$MANY drop_case "nft-meter-ingress-$MANY" xdp-pass -- \
		nft_up ingress "udp dport 9000 meter m size 131072 { ip saddr limit rate over 10/second } drop"
	FLOOD_SOURCES=$MANY drop_case "hashlimit-$MANY" xdp-pass -- ipt_up \
		"-p udp --dport 9000 -m hashlimit --hashlimit-above 10/sec --hashlimit-mode srcip --hashlimit-name peers --hashlimit-htable-size 65536 --hashlimit-htable-max 131072"
	# the baseline again: ratios are to the mean of both, as the
	# machine's speed drifts over a run
	drop_case bare-end xdp-drop
	echo "# drop path: run $run of $RUNS done" >&2
done

# ---- 2. accuracy -----------------------------------------------------

# admitted per second between 2 s after the flood started and its end:
# the opening burst (a window's worth for sluice, `burst` for nft) and,
# for sluice, the second in which that burst leaves the sliding window,
# are left out for every limiter alike
acc_case()	# LIMITER THRESHOLD
{
	local lim=$1 thr=$2 gen a0 a1 t_start t_rx= rate=$(($2 * 2))

	case $lim in
	sluice) receiver_up sluice "$(rules_file acc '{"proto":"udp","dport":9000}' "$thr")"
		# sluice's own counters trail a flood by up to a stats
		# interval: count what it admitted at tc ingress instead
		netns_bg "$NS_RX" rxacc "$BUILD/rxcount" --dev veth-rx --proto udp \
			--dport 9000 --drop --duration 60 --tick-ms 10 \
			--csv "$NETNS_TMP/rxacc.csv"
		netns_wait_ready rxacc 5 || die "rxcount not ready"
		t_rx=$EPOCHREALTIME ;;
	nft-default) receiver_up xdp-pass
		nft_up ingress "udp dport 9000 limit rate over $thr/second drop" 9000 ;;
	nft-tuned) receiver_up xdp-pass
		nft_up ingress "udp dport 9000 limit rate over $thr/second burst $((thr / 20)) packets drop" 9000 ;;
	hashlimit) receiver_up xdp-pass
		ipt_up "-p udp --dport 9000 -m hashlimit --hashlimit-above $thr/sec --hashlimit-name acc" 9000 ||
			{ receiver_down; return; } ;;
	hashlimit-tuned) receiver_up xdp-pass
		b=$((thr / 20 > 10000 ? 10000 : thr / 20))
		ipt_up "-p udp --dport 9000 -m hashlimit --hashlimit-above $thr/sec --hashlimit-burst $b --hashlimit-name acc" 9000 ||
			{ receiver_down; return; } ;;
	esac
	admitted()
	{
		case $lim in
		sluice) echo 0 ;;	# from rxcount's samples, below
		hashlimit*) ipt_admitted 9000 ;;
		*) nft_admitted 9000 ;;
		esac
	}
	# 1M pps at 2x is past pktsend on one CPU shared with the receiver:
	# live frames from both CPUs, paced on average only (where the host
	# refuses them, pktsend from both, short of 2x)
	local cpus=("$GEN_CPU") pids=() c ta tb
	if [ "$thr" -ge 1000000 ] && [ "$FLOOD_GEN" = pktsend ]; then
		gen=("$BUILD/pktsend" --rate "$thr")
		cpus+=("$OTHER_CPU")
	elif [ "$thr" -ge 1000000 ]; then
		gen=("$BUILD/xdpflood" --rate "$thr")
		cpus+=("$OTHER_CPU")
	else
		gen=("$BUILD/pktsend" --rate "$rate")
	fi
	rm -f "$NETNS_TMP"/acc.*.out
	t_start=$EPOCHREALTIME
	for c in "${cpus[@]}"; do
		TX "${gen[@]}" --dev veth-tx --dst-mac "$RX_MAC" --dport 9000 \
			--duration "$ACC_S" --cpu "$c" >"$NETNS_TMP/acc.$c.out" 2>&1 &
		pids+=($!)
	done
	sleep 2
	# the reading's moment: the middle of the call; the end: when the
	# generators stopped (after that the count does not move)
	ta=$EPOCHREALTIME a0=$(admitted) tb=$EPOCHREALTIME
	wait "${pids[@]}"
	a1=$(admitted)
	if [ "$lim" = sluice ]; then
		sleep 0.2
		netns_stop rxacc
	fi
	python3 - "$lim" "$thr" "${a0:-0}" "${a1:-0}" "$ta" "$tb" "$t_start" \
		"${t_rx:-0}" "$NETNS_TMP/rxacc.csv" "$NETNS_TMP"/acc.*.out \
		>>"$RES" <<'PY'
import json, sys
lim, thr = sys.argv[1], int(sys.argv[2])
a0, a1, ta, tb, ts, trx = map(float, sys.argv[3:9])
gens = [json.load(open(f)) for f in sys.argv[10:]]
t_end = ts + max(g["seconds"] for g in gens)
t0 = (ta + tb) / 2
if lim == "sluice":
    # rxcount's samples: ms since its start (just before "ready"),
    # cumulative packets
    rows = [tuple(int(float(x)) for x in l.split(",")[:2])
            for l in list(open(sys.argv[9]))[1:]]
    at = lambda t: min(rows, key=lambda r: abs(r[0] - (t - trx) * 1000))[1]
    a0, a1 = at(t0), rows[-1][1]
rate = (a1 - a0) / (t_end - t0)
print(f"accuracy\t{lim}\t{thr}\t{rate / thr:.4f}")
print(f"offered\t{lim}\t{thr}\t{sum(g['pps'] for g in gens) / thr:.4f}")
PY
	receiver_down
}

echo "# accuracy: $RUNS runs x ${ACC_S} s per case" >&2
want accuracy && for ((run = 1; run <= RUNS; run++)); do
	for thr in 1000 10000 100000 1000000; do
		for lim in sluice nft-default nft-tuned hashlimit \
			   hashlimit-tuned; do
			acc_case "$lim" "$thr"
		done
	done
	echo "# accuracy: run $run of $RUNS done" >&2
done

# ---- 3. per-source fairness ------------------------------------------

# 990 polite sources at 20 pps each (dport 9001), 10 heavy at 10000 pps
# each (dport 9002); every source may have 50 pps
fair_case()	# LIMITER
{
	local lim=$1 pol=() pp ph sp sh

	case $lim in
	sluice) receiver_up sluice "$(rules_file fair '{"proto":"udp","dport":"9001-9002"}' 50 \
			',"per_source":{"max_sources":4096}')"
		netns_bg "$NS_RX" rxp "$BUILD/rxcount" --dev veth-rx --proto udp \
			--dport 9001 --drop --duration 60
		netns_bg "$NS_RX" rxh "$BUILD/rxcount" --dev veth-rx --proto udp \
			--dport 9002 --drop --duration 60
		netns_wait_ready rxp 5 && netns_wait_ready rxh 5 ||
			die "rxcount not ready" ;;
	nft-meter) receiver_up xdp-pass
		nft_up ingress "udp dport 9001-9002 meter m { ip saddr limit rate over 50/second } drop" 9001 9002 ;;
	hashlimit) receiver_up xdp-pass
		ipt_up "-p udp --dport 9001:9002 -m hashlimit --hashlimit-above 50/sec --hashlimit-mode srcip --hashlimit-name fair --hashlimit-htable-size 4096 --hashlimit-htable-max 4096" 9001 9002 ;;
	esac
	TX "$BUILD/pktsend" --dev veth-tx --dst-mac "$RX_MAC" --src 198.18.4.0 \
		--sources 990 --rate 19800 --dport 9001 --duration "$FAIR_S" \
		--cpu "$OTHER_CPU" >"$NETNS_TMP/polite.out" 2>&1 &
	pol=($!)
	TX "$BUILD/pktsend" --dev veth-tx --dst-mac "$RX_MAC" --src 198.18.8.0 \
		--sources 10 --rate 100000 --dport 9002 --duration "$FAIR_S" \
		--cpu "$GEN_CPU" >"$NETNS_TMP/heavy.out" 2>&1
	wait "${pol[0]}"
	sleep 0.3
	case $lim in
	sluice) netns_stop rxp; netns_stop rxh
		pp=$(jq .packets "$NETNS_TMP/rxp.out")
		ph=$(jq .packets "$NETNS_TMP/rxh.out") ;;
	nft-meter) pp=$(nft_admitted 9001) ph=$(nft_admitted 9002) ;;
	hashlimit) pp=$(ipt_admitted 9001) ph=$(ipt_admitted 9002) ;;
	esac
	sp=$(jq .sent "$NETNS_TMP/polite.out")
	sh=$(jq .sent "$NETNS_TMP/heavy.out")
	python3 -c 'import sys; lim = sys.argv[1]; pp, ph, sp, s = map(float, sys.argv[2:])
print("fairness\t%s\tpolite_kept\t%.4f" % (lim, pp / sp))
print("fairness\t%s\theavy_vs_allowed\t%.4f" % (lim, ph / (10 * 50 * s)))' \
		"$lim" "${pp:-0}" "${ph:-0}" "$sp" "$FAIR_S" >>"$RES"
	receiver_down
}

echo "# fairness: $RUNS runs x ${FAIR_S} s per case" >&2
want fairness && for ((run = 1; run <= RUNS; run++)); do
	for lim in sluice nft-meter hashlimit; do
		fair_case "$lim"
	done
done

# ---- 4. cluster: tokend against Redis ------------------------------

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

TOKDIR=$NETNS_TMP/tokend
mkdir -p "$TOKDIR"
bench_flows "$TOKDIR" "$TOK_FLOWS"
ulimit -n "$(ulimit -Hn)"
echo "# cluster: $RUNS runs, $TOK_AGENTS agents x $TOK_FLOWS flows every ${TOK_PERIOD_MS} ms" >&2
want cluster && for ((run = 1; run <= RUNS; run++)); do
	for mode in tokend redis redis-lua; do
		port=$(free_port)
		if [ "$mode" = tokend ]; then
			taskset -c "$OTHER_CPU" "$SLUICE" tokend --listen "127.0.0.1:$port" \
				--rules "$TOKDIR/rules.json" --state-dir "$TOKDIR/state" \
				--secrets "$TOKDIR/secrets" --learn-ms 0 \
				--max-conns $((TOK_AGENTS + 16)) 2>"$TOKDIR/tokend.log" &
			args=(tokend "$port" bench "$BENCH_SECRET")
		else
			taskset -c "$OTHER_CPU" redis-server --port "$port" \
				--bind 127.0.0.1 --dir "$TOKDIR" --save '' \
				--appendonly no --maxclients $((TOK_AGENTS + 64)) \
				--daemonize no --logfile "$TOKDIR/redis.log" &
			args=("$mode" "$port")
		fi
		spid=$!
		wait_port "$port" || die "$mode does not listen"
		res=$(taskset -c "$GEN_CPU" "$BUILD/bench_tokend" "${args[@]}" \
			"$TOK_AGENTS" "$TOK_FLOWS" "$TOK_PERIOD_MS" "$TOK_S" |
			grep '^RESULT')
		rss=$(rss_kb "$spid")
		kill -TERM "$spid"
		wait "$spid" 2>/dev/null
		read -r _ _ rate p50 p99 _ <<<"$res"
		record cluster "$mode" rate "${rate:-0}"
		record cluster "$mode" p50_us "${p50:-0}"
		record cluster "$mode" p99_us "${p99:-0}"
		record memory "$mode" rss_kb "${rss:-0}"
	done
done

# ---- 4b. cluster through a kill -9 of the server --------------------

# The same load (TOK_AGENTS x TOK_FLOWS every TOK_PERIOD_MS) as simulated
# agents that admit what their limiter allows (tests/bench/bench_failover.c),
# each flow of count 100 x TOK_AGENTS, the fleet offering about twice that.
# FO_KILL_S after the start (and (run - 1) / RUNS s) the server gets
# SIGKILL, FO_DOWN_S later it starts again (empty: tokend learns for a
# TTL, Redis has no persistence).
FO_KILL_S=${FO_KILL_S:-5} FO_DOWN_S=${FO_DOWN_S:-3} FO_S=${FO_S:-16}
FODIR=$NETNS_TMP/failover
mkdir -p "$FODIR/state" "$OUT.failover"
bench_flows "$FODIR" "$TOK_FLOWS" $((TOK_AGENTS * 100))
FO_PID=
fo_server()	# MODE PORT: starts it in the background, its pid in FO_PID
{
	if [ "$1" = tokend ]; then
		taskset -c "$OTHER_CPU" "$SLUICE" tokend \
			--listen "127.0.0.1:$2" --rules "$FODIR/rules.json" \
			--state-dir "$FODIR/state" --secrets "$FODIR/secrets" \
			--max-conns $((TOK_AGENTS + 16)) 2>>"$FODIR/tokend.log" &
	else
		taskset -c "$OTHER_CPU" redis-server --port "$2" \
			--bind 127.0.0.1 --dir "$FODIR" --save '' \
			--appendonly no --maxclients $((TOK_AGENTS + 64)) \
			--daemonize no --logfile "$FODIR/redis.log" &
	fi
	FO_PID=$!
}
fo_server_stop()
{
	[ -n "$FO_PID" ] || return 0
	kill -TERM "$FO_PID" 2>/dev/null
	wait "$FO_PID" 2>/dev/null
	FO_PID=
}
netns_on_exit fo_server_stop
echo "# cluster through a kill -9: $RUNS runs, kill ${FO_KILL_S} s after" \
	"the start, restart ${FO_DOWN_S} s later" >&2
want failover && for ((run = 1; run <= RUNS; run++)); do
	for mode in tokend redis redis-lua; do
		port=$(free_port)
		fo_server "$mode" "$port"
		wait_port "$port" || die "$mode does not listen"
		if [ "$mode" = tokend ]; then
			args=(tokend "$port" "$FODIR/rules.json"
			      "$FODIR/secrets")
		else
			args=("$mode" "$port" "$FODIR/rules.json")
		fi
		out=$OUT.failover/$mode.$run.out
		taskset -c "$GEN_CPU" "$BUILD/bench_failover" "${args[@]}" \
			"$TOK_AGENTS" "$TOK_PERIOD_MS" "$FO_S" >"$out" &
		bpid=$!
		until grep -q '^T0' "$out" 2>/dev/null; do
			kill -0 "$bpid" 2>/dev/null ||
				die "bench_failover failed"
			sleep 0.01
		done
		t0=$(awk '$1 == "T0" { print $2 }' "$out")
		# run k kills (k - 1) / RUNS s later: the fixed windows of
		# the Redis counter meet the kill at a different phase each run
		sleep "$(python3 -c "import time
print(max(0, $t0 / 1000 + $FO_KILL_S + ($run - 1) / $RUNS - time.time()))")"
		kill -KILL "$FO_PID"
		t_kill=$EPOCHREALTIME
		wait "$FO_PID" 2>/dev/null
		FO_PID=
		sleep "$FO_DOWN_S"
		fo_server "$mode" "$port"
		t_restart=$EPOCHREALTIME
		wait "$bpid" || die "bench_failover $mode failed"
		fo_server_stop
		printf 'failover\t%s\trun\t%s %s %s %s\n' "$mode" "$out" "$t0" \
			"$t_kill" "$t_restart" >>"$RES"
	done
	echo "# cluster through a kill -9: run $run of $RUNS done" >&2
done

# ---- 5. memory ---------------------------------------------------------

# the pinned maps of a running agent: name, max_entries, bytes
map_memory()
{
	local f

	find "$SL_PIN" -type f -path '*layout-*' | while read -r f; do
		bpftool -j map show pinned "$f" 2>/dev/null |
			jq -r '"\(.name) \(.max_entries) \(.bytes_memlock // 0)"'
	done
}
# src_table's usage (bpftool's memlock is the map's memory usage on 5.19+)
src_bytes() { map_memory | awk '$1 == "src_table" { print $3 }'; }
python3 - >"$NETNS_TMP/4096.json" <<'PY'
import json
print(json.dumps({"rules": [{"name": "r%d" % i, "match": {"proto": "udp",
    "dport": 20000 + i}, "grade": "pps", "count": 1000 + i}
    for i in range(4096)]}))
PY
want memory && for ((run = 1; run <= RUNS; run++)); do
	receiver_up sluice "$SRC_RULE"
	record memory agent-1-rule rss_kb "$(rss_kb "${NETNS_PID[agent]}")"
	map_memory >"$NETNS_TMP/maps.txt"
	receiver_down
	receiver_up sluice "$NETNS_TMP/4096.json"
	record memory agent-4096-rules rss_kb "$(rss_kb "${NETNS_PID[agent]}")"
	# rule_cpu is sized by the rule slots in force
	record memory rule-cpu-4096-rules bytes \
		"$(map_memory | awk '$1 == "rule_cpu" { print $3 }')"
	receiver_down
done
want memory && python3 - "$NETNS_TMP/maps.txt" "$RES" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 3]
total = sum(int(b) for _, _, b in rows)
with open(sys.argv[2], "a") as out:
    for name, n, b in rows:
        out.write(f"maps\t{name}\t{n}\t{b}\n")
    out.write(f"maps\ttotal\t-\t{total}\n")
PY

# ---- 6. each limiter's own table: kernel memory per tracked source ----

# N sources sending 1 packet/s each, every source allowed 2/s: sluice
# per_source (count 2, so that one packet is the count / 2 that takes an
# entry past the sketch tier), nftables `meter` (a dynamic set with a
# limit per element), iptables `hashlimit` (mode srcip). The kernel's slab
# usage (/proc/slabinfo: active objects x object size) before the sources
# and while all of them send; a cache that holds an object per source
# grows by N objects, so only the caches that grew by N/2 or more are
# counted (the machine's other work moves the rest). Hash bucket arrays
# are allocated per table, not per source, and not from the slab caches.
slab_snapshot() { cat /proc/slabinfo >"$1"; }
slab_per_source()	# BEFORE AFTER N: "bytes-per-source cache+cache"
{
	python3 - "$@" <<'PY'
import sys
def read(f):
    return {p[0]: (int(p[1]), int(p[3])) for p in
            (l.split() for l in open(f)) if len(p) > 3 and p[1].isdigit()}
a, b, n = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
grew = {k: (b[k][0] - a.get(k, (0, 0))[0], b[k][1]) for k in b}
per = {k: d for k, d in grew.items() if d[0] >= n / 2}
total = sum(d * size for d, size in per.values())
print(f"{total / n:.1f}", "+".join(sorted(per)) or "-")
PY
}
table_up()	# LIMITER
{
	case $1 in
	sluice) receiver_up sluice "$(rules_file table '{"proto":"udp","dport":9000}' 2 \
			',"per_source":{"max_sources":262143}')" ;;
	nft-meter) receiver_up xdp-pass
		nft_up ingress "udp dport 9000 meter m size 262144 { ip saddr limit rate over 2/second } drop" 9000 ;;
	hashlimit) receiver_up xdp-pass
		ipt_up "-p udp --dport 9000 -m hashlimit --hashlimit-above 2/sec --hashlimit-mode srcip --hashlimit-name table --hashlimit-htable-max 262144" 9000 ;;
	esac
}
table_entries()	# LIMITER: the sources it tracks, as it says
{
	case $1 in
	sluice) sluice_cli stats -j | jq '.rules[0].sources' ;;
	nft-meter) RX nft list meter netdev peers m |
			grep -oE '198\.1[89]\.[0-9]+\.[0-9]+ limit' | wc -l ;;
	hashlimit) RX cat /proc/net/ipt_hashlimit/table | wc -l ;;
	esac
}
TABLE_SOURCES=${TABLE_SOURCES:-1000 10000 100000}
echo "# tables: $RUNS runs, sources $TABLE_SOURCES" >&2
want tables && for ((run = 1; run <= RUNS; run++)); do
	for n in $TABLE_SOURCES; do
		for lim in sluice nft-meter hashlimit; do
			table_up "$lim"
			[ "$lim" = sluice ] && m0=$(src_bytes)
			sleep 0.5
			slab_snapshot "$NETNS_TMP/slab.0"
			TX "$BUILD/pktsend" --dev veth-tx --dst-mac "$RX_MAC" \
				--src 198.18.16.0 --sources "$n" --rate "$n" \
				--dport 9000 --duration 4 --cpu "$GEN_CPU" \
				>/dev/null 2>&1 &
			gen=$!
			sleep 3
			slab_snapshot "$NETNS_TMP/slab.1"
			[ "$lim" = sluice ] && m1=$(src_bytes)
			entries=$(table_entries "$lim")
			wait "$gen"
			read -r per caches < <(slab_per_source \
				"$NETNS_TMP/slab.0" "$NETNS_TMP/slab.1" "$n")
			record table "$lim-$n" entries "${entries:-0}"
			record table "$lim-$n" slab_bytes "$per"
			printf 'tablecache\t%s\tcaches\t%s\n' "$lim-$n" \
				"$caches" >>"$RES"
			[ "$lim" = sluice ] &&
				record memory per-source bytes $(((m1 - m0) / n))
			receiver_down
		done
	done
	echo "# tables: run $run of $RUNS done" >&2
done

# the raw results beside the tables (bench_peers.py reads them again)
cp "$RES" "$OUT.tsv"
python3 tests/bench/bench_peers.py "$OUT.tsv" "${QUICK:+QUICK}" "$PLOTS" |
	tee "$OUT"
msg="# tables in $OUT, results in $OUT.tsv and $OUT.failover/"
echo "$msg${PLOTS:+, plots in $PLOTS}" >&2
