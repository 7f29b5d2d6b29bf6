# SPDX-License-Identifier: GPL-2.0
# The sluice agent in a test's namespace world; source after netns.sh and
# netns_setup.
#
#   sluice_env_setup             # state dir, a private bpffs for the pins
#   sluice_start NAME [ARGS...]  # agent on veth-rx in NS_RX, waits for ready
#   sluice_cli VERB [ARGS...]    # the CLI against that agent
#   sluice_rule_stat RULE FIELD  # one field of `sluice stats -j` for RULE
#
# Cleanup (LIFO, with netns.sh's): the agent is stopped, the data plane
# detached and the bpffs unmounted, also when the test fails.

SLUICE=${SLUICE:-$GEN_BIN/sluice}

sluice_env_setup()
{
	_netns_tmp || return 1
	SL_STATE=$NETNS_TMP/state
	SL_BPFFS=$NETNS_TMP/bpffs
	SL_PIN=$SL_BPFFS/sluice
	mkdir -p "$SL_STATE" "$SL_BPFFS" || return 1
	# `ip netns exec` remounts /sys, so /sys/fs/bpf is not bpffs inside
	# it; a bpffs of our own is visible there and goes away with us
	mount -t bpf bpf "$SL_BPFFS" || return 1
	netns_on_exit "umount -l '$SL_BPFFS'"
	netns_on_exit "ip netns exec '$NS_RX' '$SLUICE' down --iface veth-rx --pin-dir '$SL_PIN'"
	export SL_STATE SL_BPFFS SL_PIN
}

sluice_cli()
{
	local verb=$1

	shift
	if [ "$verb" = rule ]; then
		local sub=$1

		shift
		ip netns exec "$NS_RX" "$SLUICE" rule "$sub" "$@" \
			--state-dir "$SL_STATE"
	else
		ip netns exec "$NS_RX" "$SLUICE" "$verb" "$@" \
			--state-dir "$SL_STATE"
	fi
}

# Starts the agent and waits (10 s at most) until it reports ready.
sluice_start()
{
	local name=$1 i

	shift
	netns_bg "$NS_RX" "$name" "$SLUICE" agent --iface veth-rx \
		--state-dir "$SL_STATE" --pin-dir "$SL_PIN" "$@"
	for ((i = 0; i < 100; i++)); do
		sluice_cli status --ready >/dev/null 2>&1 && return 0
		kill -0 "${NETNS_PID[$name]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "# agent $name did not become ready:"
	sed 's/^/#   /' "$NETNS_TMP/$name.err"
	return 1
}

sluice_rule_stat()
{
	sluice_cli stats -j | python3 -c '
import json, sys
doc = json.load(sys.stdin)
for r in doc["rules"]:
    if r["name"] == sys.argv[1]:
        print(int(r[sys.argv[2]]) if isinstance(r[sys.argv[2]], (int, float)) else r[sys.argv[2]])
' "$1" "$2"
}
