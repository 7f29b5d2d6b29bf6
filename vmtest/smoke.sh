#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# vmtest smoke suite (TAP): checks that a kernel can do what sluice's tests
# need: bpffs, loading an XDP program, BPF_PROG_TEST_RUN on it, a netns with
# a veth pair, attaching XDP with ip(8), XDP seeing real frames, and loading
# sluice's own BPF object. Anything the kernel or the machine lacks is a
# SKIP with the reason, never a silent pass.
# Runs in the vmtest guest (SLUICE_VM=1) and on the host alike; needs root.
# Env: BUILD (default build): where smoke.bpf.o (BUILD/vmtest/) and
#      sluice.bpf.o are.
set -u
BUILD=${BUILD:-build}
OBJ=${SMOKE_BPF_OBJ:-$BUILD/vmtest/smoke.bpf.o}
SLUICE_OBJ=${SLUICE_BPF_OBJ:-$BUILD/sluice.bpf.o}
BPFFS=/sys/fs/bpf
tag=vmsk$$
pin=$BPFFS/$tag
nsa=${tag}a nsb=${tag}b
tmp=$(mktemp -d "${TMPDIR:-/tmp}/smoke.XXXXXX")

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/#   /'; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
# check NAME CMD...: ok if CMD succeeds, else not ok with its output
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$name"; return 0; fi
	notok "$name" "$out"
	return 1
}

cleanup() {
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
	rm -rf "$pin" "${pin}_maps" "${pin}_sluice" "$tmp"
}
trap cleanup EXIT

echo "TAP version 13"
echo "# kernel $(uname -r)${SLUICE_VM:+ (vm)}"

# 1. bpffs
if [ "$(stat -f -c %T "$BPFFS" 2>/dev/null)" = bpf_fs ]; then
	ok "bpffs is mounted at $BPFFS"
	have_bpffs=1
else
	notok "bpffs is mounted at $BPFFS" "$(stat -f -c %T "$BPFFS" 2>&1)"
	have_bpffs=0
fi

# 2. bpftool
have_bpftool=0
if ! command -v bpftool >/dev/null; then
	skip "bpftool runs" "bpftool not installed"
elif check "bpftool runs" bpftool version; then
	have_bpftool=1
fi
have_obj=1
[ -f "$OBJ" ] || have_obj=0

# 3. load + pin
loaded=0
if [ $have_bpftool = 0 ] || [ $have_bpffs = 0 ] || [ $have_obj = 0 ]; then
	skip "load minimal XDP program with bpftool" \
		"needs bpftool, bpffs and $OBJ (make $OBJ)"
elif check "load minimal XDP program with bpftool" \
	bpftool prog load "$OBJ" "$pin" type xdp pinmaps "${pin}_maps"; then
	loaded=1
fi

# 4. BPF_PROG_TEST_RUN on XDP
if [ $loaded = 0 ]; then
	skip "BPF_PROG_TEST_RUN runs the XDP program" "program not loaded"
else
	head -c 64 /dev/zero >"$tmp/frame"
	out=$(bpftool prog run pinned "$pin" data_in "$tmp/frame" repeat 1 2>&1)
	if printf '%s\n' "$out" | grep -qE 'Return value: 2\b'; then
		ok "BPF_PROG_TEST_RUN runs the XDP program (XDP_PASS)"
	else
		notok "BPF_PROG_TEST_RUN runs the XDP program (XDP_PASS)" "$out"
	fi
fi

# 5. netns + veth
have_veth=0
if ! command -v ip >/dev/null; then
	skip "veth pair across two network namespaces" "ip (iproute2) not installed"
elif ! ip netns add "$nsa" 2>"$tmp/err" || ! ip netns add "$nsb" 2>>"$tmp/err"; then
	skip "veth pair across two network namespaces" \
		"cannot create netns: $(head -n1 "$tmp/err")"
elif ! ip -n "$nsa" link add va type veth peer name vb netns "$nsb" 2>"$tmp/err"; then
	if grep -qiE 'not supported|Unknown device type' "$tmp/err"; then
		skip "veth pair across two network namespaces" \
			"kernel has no veth: $(head -n1 "$tmp/err")"
	else
		notok "veth pair across two network namespaces" "$(cat "$tmp/err")"
	fi
elif check "veth pair across two network namespaces" sh -c "
	ip -n $nsa addr add 10.77.0.1/24 dev va &&
	ip -n $nsb addr add 10.77.0.2/24 dev vb &&
	ip -n $nsa link set va up && ip -n $nsb link set vb up &&
	ip -n $nsa link set lo up && ip -n $nsb link set lo up"; then
	have_veth=1
fi

# 6. ip link set ... xdp obj ... sec xdp, on the receiving end of the veth,
# and the program sees the frames sent from the other namespace.
# (Pinned objects can't be used with ip -n: it remounts /sys, hiding bpffs;
# the map is found through the attached program's id instead.)
if [ $have_veth = 0 ] || [ $have_obj = 0 ]; then
	skip "attach XDP with ip link set xdp obj (native, on veth)" "needs veth and $OBJ"
	skip "XDP program counts frames received on veth" "needs veth and $OBJ"
elif check "attach XDP with ip link set xdp obj (native, on veth)" \
	ip -n "$nsb" link set dev vb xdpdrv obj "$OBJ" sec xdp; then
	progid=$(ip -n "$nsb" -d link show dev vb | sed -n 's/.*prog\/xdp id \([0-9]*\).*/\1/p')
	if [ -n "$progid" ]; then
		ok "ip link shows the XDP program on vb (id $progid)"
	else
		notok "ip link shows the XDP program on vb" "$(ip -n "$nsb" -d link show dev vb)"
	fi
	# ARP + UDP datagrams from a to b; XDP on vb sees them.
	for _ in 1 2 3; do
		ip netns exec "$nsa" bash -c 'echo hi >/dev/udp/10.77.0.2/9' 2>/dev/null
		sleep 0.2
	done
	if [ $have_bpftool = 0 ] || [ -z "$progid" ]; then
		skip "XDP program counts frames received on veth" "needs bpftool and the program id"
	else
		mapid=$(bpftool prog show id "$progid" 2>&1 | sed -n 's/.*map_ids \([0-9]*\).*/\1/p')
		out=$(bpftool -j map lookup id "${mapid:-0}" key 0 0 0 0 2>&1)
		cnt=$(printf '%s' "$out" | sed -n 's/.*"formatted":{[^}]*"value":\([0-9]*\).*/\1/p')
		if [ -z "$cnt" ]; then
			# no BTF formatting: first (little-endian) byte
			cnt=$(printf '%s' "$out" | sed -n 's/.*"value":\["\(0x[0-9a-f]*\)".*/\1/p')
			[ -n "$cnt" ] && cnt=$((cnt))
		fi
		if [ -n "$cnt" ] && [ "$cnt" -gt 0 ]; then
			ok "XDP program counts frames received on veth ($cnt)"
		else
			notok "XDP program counts frames received on veth" "map ${mapid:-?} count '$cnt': $out"
		fi
	fi
	check "detach XDP" ip -n "$nsb" link set dev vb xdpdrv off
fi

# 7. sluice's own BPF object loads and passes the verifier on this kernel
if [ $have_bpftool = 0 ] || [ $have_bpffs = 0 ]; then
	skip "sluice.bpf.o loads (verifier)" "needs bpftool and bpffs"
elif [ ! -f "$SLUICE_OBJ" ]; then
	skip "sluice.bpf.o loads (verifier)" "$SLUICE_OBJ not built"
else
	check "sluice.bpf.o loads (verifier)" \
		bpftool prog loadall "$SLUICE_OBJ" "${pin}_sluice"
fi

echo "1..$n"
