#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# sluice explain, checked against the data plane on real packets:
#   - for each kind of packet (UDP to a port, a TCP SYN and an ACK to a
#     cps port, a VLAN, IPv6, per_source, a port no rule names) the rule
#     explain names is the one whose passed counter moves when that packet
#     is sent through veth (none moves for "no rule");
#   - explain charges nothing: after 50 explains of a fresh rule of 5
#     packets a 5 s window (slow enough for a TCG guest), a burst of 8
#     real packets still gets 5 through (counted by rxcount);
#   - then explain says drop, "the window is full", and the next real
#     packet is dropped; a shadow rule says shadow_drop;
#   - bad input (protocol, address, missing port, mixed families) exits 1
#     with an error naming the field, and the rules in force stay.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/netns.sh
source tests/lib/sluice.sh
source tests/lib/tap.sh

skip_unless_root_and_xdp "explain"
netns_setup explain 2 || { echo "Bail out! netns setup failed"; exit 1; }
sluice_env_setup || { echo "Bail out! bpffs setup failed"; exit 1; }

BIG=100000000
cat >"$NETNS_TMP/rules.json" <<JSON
{"rules": [
 {"name": "dns", "match": {"proto": "udp", "dport": 53}, "grade": "pps", "count": $BIG},
 {"name": "web-syn", "match": {"proto": "tcp", "dport": 8080}, "grade": "cps", "count": $BIG},
 {"name": "web-pkts", "match": {"proto": "tcp", "dport": 8080}, "grade": "pps", "count": $BIG},
 {"name": "v100", "match": {"proto": "udp", "vlan": 100}, "grade": "pps", "count": $BIG},
 {"name": "v6", "match": {"proto": "udp", "dport": 53, "dst": "2001:db8::/64"}, "grade": "pps", "count": $BIG},
 {"name": "per-src", "match": {"proto": "udp", "dport": 7000}, "grade": "pps", "count": $BIG, "per_source": {"max_sources": 1000}},
 {"name": "tight", "match": {"proto": "udp", "dport": 9000}, "grade": "pps", "count": 1, "window": {"interval_ms": 5000}},
 {"name": "shadow", "match": {"proto": "udp", "dport": 9100}, "grade": "pps", "count": 1, "window": {"interval_ms": 5000}, "mode": "shadow"}
]}
JSON
sluice_start agent --rules "$NETNS_TMP/rules.json" ||
	{ echo "Bail out! the agent did not start"; exit 1; }

explain()
{
	sluice_cli explain "$@" -j
}

# every rule's passed packets, "name=N ..." in file order
passed_all()
{
	sluice_cli stats -j | python3 -c '
import json, sys
print(" ".join("%s=%d" % (r["name"], r["passed_pkts"])
               for r in json.load(sys.stdin)["rules"]))'
}

# the rule whose passed counter moved between two passed_all lines
moved()
{
	python3 -c '
import sys
a = dict(kv.split("=") for kv in sys.argv[1].split())
b = dict(kv.split("=") for kv in sys.argv[2].split())
m = [k for k in a if int(b[k]) != int(a[k])]
print(",".join(m) if m else "none")' "$1" "$2"
}

send()	# count, then pktsend options
{
	local n=$1

	shift
	ip netns exec "$NS_TX" "$GEN_BIN/pktsend" --dev veth-tx \
		--dst-mac "$RX_MAC" --count "$n" --rate 1000 "$@" >/dev/null
}

# name: explain's PROTO SRC DST and options | pktsend's options
PROBES=(
	"udp-53|udp 198.18.0.1 198.18.0.2 --dport 53|--proto udp --dport 53"
	"syn-8080|tcp 198.18.0.1 198.18.0.2 --dport 8080 --syn|--proto tcp --dport 8080 --tcp-flags syn"
	"ack-8080|tcp 198.18.0.1 198.18.0.2 --dport 8080|--proto tcp --dport 8080 --tcp-flags ack"
	"vlan-100|udp 198.18.0.1 198.18.0.2 --dport 5353 --vlan 100|--proto udp --dport 5353 --vlan 100"
	"v6-53|udp 2001:db8::1 2001:db8::2 --dport 53|--proto udp --dport 53 --src 2001:db8::1 --dst 2001:db8::2"
	"per-src|udp 198.18.0.1 198.18.0.2 --dport 7000|--proto udp --dport 7000"
	"no-rule|udp 198.18.0.1 198.18.0.2 --dport 5000|--proto udp --dport 5000"
)
for probe in "${PROBES[@]}"; do
	IFS='|' read -r name ex tx <<<"$probe"
	said=$(explain $ex | sluice_json 'd.get("rule", "none")')
	before=$(passed_all)
	# shellcheck disable=SC2086 # options, split on purpose
	send 1 $tx
	sleep 0.2
	got=$(moved "$before" "$(passed_all)")
	check $([ -n "$said" ] && [ "$said" = "$got" ]; echo $?) \
		"$name: explain names '$said', the packet sent moved '$got'"
done

# a fresh rule of 5 packets a 5 s window: explains take nothing from it
for ((i = 0; i < 50; i++)); do
	explain udp 198.18.0.1 198.18.0.2 --dport 9000 >/dev/null
done
ans=$(explain udp 198.18.0.1 198.18.0.2 --dport 9000)
v=$(sluice_json 'd["verdict"], d["used"], d["window"]' <<<"$ans")
check $([ "$v" = "('pass', 0, 5)" ]; echo $?) \
	"tight after 50 explains: pass, used 0 of 5 ($v)"
netns_bg "$NS_RX" rx "$GEN_BIN/rxcount" --dev veth-rx --proto udp \
	--dport 9000 --drop --duration 20
netns_wait_ready rx 5 || { echo "Bail out! rxcount not ready"; exit 1; }
send 8 --proto udp --dport 9000
sleep 0.3
ans=$(explain udp 198.18.0.1 198.18.0.2 --dport 9000)
v=$(sluice_json 'd["verdict"], d["why"], d["used"]' <<<"$ans")
check $([ "$v" = "('drop', 'the window is full', 5)" ]; echo $?) \
	"tight after 8 packets: explain says drop, the window is full ($v)"
human=$(sluice_cli explain udp 198.18.0.1 198.18.0.2 --dport 9000)
check $(grep -q "^rule: *tight (enforce, pps 1)" <<<"$human" &&
	grep -q "^verdict: drop: the window is full" <<<"$human"; echo $?) \
	"the human answer names the rule and the verdict"
echo "$human" | sed 's/^/#   /'
send 1 --proto udp --dport 9000
sleep 0.3
netns_stop rx
rx=$(sluice_json 'd["packets"]' <"$NETNS_TMP/rx.out")
check $(( rx == 5 ? 0 : 1 )) \
	"tight: 5 of 8 passed, then the packet explain said drop was dropped (rxcount $rx)"

send 8 --proto udp --dport 9100
sleep 0.3
v=$(explain udp 198.18.0.1 198.18.0.2 --dport 9100 | sluice_json 'd["verdict"]')
check $([ "$v" = shadow_drop ]; echo $?) "shadow rule over its count: $v"

version=$(sluice_cli status -j | sluice_json 'd["in_force_version"]')
bad()	# what the error must name | explain's arguments
{
	local want=$1 out rc

	shift
	out=$(sluice_cli explain "$@" 2>&1)
	rc=$?
	check $([ $rc -eq 1 ] && grep -q -- "$want" <<<"$out"; echo $?) \
		"explain $*: exit $rc, error names $want"
	[ $rc -eq 1 ] || echo "$out" | sed 's/^/#   /' 
}
bad "'proto'" sctp 198.18.0.1 198.18.0.2 --dport 1
bad "'src'" udp 198.18.0.300 198.18.0.2 --dport 1
bad "'dport'" udp 198.18.0.1 198.18.0.2
bad "one family" udp 198.18.0.1 2001:db8::2 --dport 1
out=$(sluice_cli explain udp 198.18.0.1 198.18.0.2 --vlan 5000 2>&1)
check $(( $? == 2 ? 0 : 1 )) "--vlan 5000: a usage error (exit 2)"
now=$(sluice_cli status -j | sluice_json 'd["in_force_version"]')
nrules=$(sluice_cli rule list -j | sluice_json 'len(d["rules"])')
check $([ "$now" = "$version" ] && [ "$nrules" = 8 ]; echo $?) \
	"after bad requests the rules stay (version $version -> $now, $nrules rules)"
echo "1..$n"
