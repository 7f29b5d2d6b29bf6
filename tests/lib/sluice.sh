# SPDX-License-Identifier: GPL-2.0
# The sluice agent in a test's namespace world; source after netns.sh and
# netns_setup.
#
#   sluice_env_setup             # state dir, a private bpffs for the pins
#   sluice_start NAME [ARGS...]  # agent on veth-rx in NS_RX, waits for ready
#   sluice_cli VERB [ARGS...]    # the CLI against that agent
#   sluice_rule_stat RULE FIELD  # one field of `sluice stats -j` for RULE
#   sl_pinned_map NAME           # true when map NAME is pinned (in any layout)
#   SL_LINK                      # veth-rx's pinned link
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
	SL_LINK=$SL_PIN/links/veth-rx
	export SL_STATE SL_BPFFS SL_PIN SL_LINK
}

sl_pinned_map()
{
	compgen -G "$SL_PIN/layout-*/$1" >/dev/null
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

# Helpers of the agent suites (tests/integration/test_agent_*.sh):
#
#   sluice_bg NAME [ARGS...]      # agent on veth-rx in NS_RX, not waited for
#   sluice_wait_ready NAME [SECS] # poll `status --ready` every 20 ms (default
#                                 # 10 s; 0 when ready, 1 if NAME died first)
#   sluice_kill NAME              # SIGKILL the agent NAME and reap it
#   sl_mark VAR                   # VAR=now, wall clock in seconds (no fork)
#   sl_until SECS CMD...          # CMD every 50 ms until it succeeds (0) or
#                                 # SECS pass (1)
#   sl_bg VAR CMD...              # CMD in the background (a generator, say),
#                                 # its pid in VAR; ended at exit unless
#   sl_wait PID...                # waited for with sl_wait (status of last)
#   sluice_agent_fg ERRFILE [ARGS...]
#                                 # agent in the foreground, stdout+stderr to
#                                 # ERRFILE, ended after $SL_FG_TIMEOUT (5) s;
#                                 # returns its exit status (124: still ran)
#   sluice_json EXPR              # EXPR (python, the document is d) of the
#                                 # JSON on stdin: bools as true/false, other
#                                 # containers as JSON
#   rx_wait_ready NAME VAR [SECS] # netns_wait_ready for rxcount, polling
#                                 # every 5 ms; VAR = when "ready" was seen
#   rx_csv_py CSV T_SEEN T_END [ARGS...]
#                                 # python program on stdin, run with helpers
#                                 # for an `rxcount --csv CSV` series on the
#                                 # wall clock (sl_mark), see below
#
# rxcount's samples are relative to its own start, t0, taken just before it
# attaches and prints "ready". Two marks bound t0 from above: T_SEEN (from
# rx_wait_ready) and T_END (sl_mark right after netns_stop of rxcount,
# minus the time of its last sample). The earlier of the two is used; both
# are within a few ms. Stop rxcount with netns_stop, not by --duration.

sluice_bg()
{
	local name=$1

	shift
	netns_bg "$NS_RX" "$name" "$SLUICE" agent --iface veth-rx \
		--state-dir "$SL_STATE" --pin-dir "$SL_PIN" "$@"
}

sluice_wait_ready()
{
	local name=$1 secs=${2:-10} deadline

	deadline=$(( ${EPOCHREALTIME//[.,]/} + secs * 1000000 ))
	while (( ${EPOCHREALTIME//[.,]/} < deadline )); do
		sluice_cli status --ready >/dev/null 2>&1 && return 0
		kill -0 "${NETNS_PID[$name]:-0}" 2>/dev/null || return 1
		sleep 0.02
	done
	return 1
}

sluice_kill()
{
	local pid=${NETNS_PID[$1]:-}

	[ -n "$pid" ] || return 1
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	unset "NETNS_PID[$1]"
	return 0
}

rx_wait_ready()
{
	local name=$1 secs=${3:-5} pid=${NETNS_PID[$1]:-} i

	for ((i = 0; i < secs * 200; i++)); do
		if grep -qx ready "$NETNS_TMP/$name.err" 2>/dev/null; then
			sl_mark "$2"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.005
	done
	return 1
}

declare -gA SL_BG_LIVE=()

sl_bg()
{
	local var=$1

	shift
	"$@" &
	printf -v "$var" '%s' "$!"
	SL_BG_LIVE[$!]=1
	netns_on_exit "_sl_bg_end $!"
}

_sl_bg_end()
{
	[ -n "${SL_BG_LIVE[$1]:-}" ] || return 0
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	unset "SL_BG_LIVE[$1]"
}

sl_wait()
{
	local p rc=0

	for p in "$@"; do
		wait "$p"
		rc=$?
		unset "SL_BG_LIVE[$p]"
	done
	return $rc
}

# sl_send_sources N RATE: a paced pktsend for each key k of the caller's
# associative array SRC, N datagrams at RATE/s from SRC[k] (4 sources in
# its /24) to 198.18.0.2 port DPORT[k] (an array the caller may declare;
# else 9000); waits for them all, then for the receiver netns_bg started
# as udprx (tests/lib/udpcount.py)
sl_send_sources()
{
	local n=$1 rate=$2 k v port pids=()

	for k in "${!SRC[@]}"; do
		port=9000
		if declare -p DPORT >/dev/null 2>&1; then
			port=${DPORT[$k]}
		fi
		sl_bg v ip netns exec "$NS_TX" "$GEN_BIN/pktsend" \
			--dev veth-tx --dst-mac "$RX_MAC" --src "${SRC[$k]}" \
			--sources 4 --dst 198.18.0.2 --dport "$port" \
			--count "$n" --rate "$rate" >"$NETNS_TMP/send-$k.json"
		pids+=("$v")
	done
	sl_wait "${pids[@]}"
	sl_wait "${NETNS_PID[udprx]}"
}

# sl_until SECS CMD...: runs CMD every 50 ms until it succeeds (0) or
# SECS pass (1)
sl_until()
{
	local k

	for ((k = 0; k < $1 * 20; k++)); do
		"${@:2}" && return 0
		sleep 0.05
	done
	return 1
}

sl_mark()
{
	printf -v "$1" '%s' "${EPOCHREALTIME/,/.}"
}

sluice_agent_fg()
{
	local errfile=$1

	shift
	ip netns exec "$NS_RX" timeout -s KILL "${SL_FG_TIMEOUT:-5}" \
		"$SLUICE" agent --iface veth-rx --state-dir "$SL_STATE" \
		--pin-dir "$SL_PIN" "$@" >"$errfile" 2>&1
	local rc=$?

	# SIGKILL by timeout is 137; report "it kept running" as 124
	[ "$rc" -eq 137 ] && rc=124
	return $rc
}

sluice_json()
{
	python3 -c '
import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
if isinstance(v, bool):
    print("true" if v else "false")
elif isinstance(v, (dict, list)):
    print(json.dumps(v, sort_keys=True))
else:
    print(v)
' "$1"
}

# In the program: T0 (wall-clock time of rxcount's t = 0), T_SEEN and
# T0_END (t0 as T_END alone places it; for diagnostics), at(T) (packets
# counted by time T, linear between samples), count(Ta, Tb), rate(Ta, Tb),
# max_window(Ta, Tb, w=1.0) (largest count of a window [s, s + w] inside
# [Ta, Tb], s or s + w on a sample), min_window (the smallest), bins(Ta, n, w=1.0) (counts of n
# consecutive windows from Ta), args (the extra arguments).
read -r -d '' RX_CSV_LIB <<'PY' || true
import bisect, json, sys
args = sys.argv[4:]
_t, _n = [], []
with open(sys.argv[1]) as _f:
    next(_f)
    for _line in _f:
        _a, _b, _c = _line.split(',')
        _t.append(float(_a) / 1000.0)
        _n.append(int(_b))
T_SEEN = float(sys.argv[2])
T0_END = float(sys.argv[3]) - _t[-1]
T0 = min(T_SEEN, T0_END)
def at(T):
    x = T - T0
    if x <= _t[0]:
        return _n[0]
    if x >= _t[-1]:
        return _n[-1]
    i = bisect.bisect_right(_t, x)
    t1, t2, n1, n2 = _t[i - 1], _t[i], _n[i - 1], _n[i]
    return n2 if t2 <= t1 else n1 + (n2 - n1) * (x - t1) / (t2 - t1)
def count(Ta, Tb):
    return at(Tb) - at(Ta)
def rate(Ta, Tb):
    return count(Ta, Tb) / (Tb - Ta)
def max_window(Ta, Tb, w=1.0):
    s = [Ta] + [T0 + t for t in _t if Ta < T0 + t <= Tb - w] + \
        [T0 + t - w for t in _t if Ta <= T0 + t - w and T0 + t <= Tb]
    return max(count(x, x + w) for x in s)
def min_window(Ta, Tb, w=1.0):
    s = [Ta, Tb - w] + [T0 + t for t in _t if Ta < T0 + t <= Tb - w] + \
        [T0 + t - w for t in _t if Ta <= T0 + t - w and T0 + t <= Tb]
    return min(count(x, x + w) for x in s)
def bins(Ta, n, w=1.0):
    return [count(Ta + k * w, Ta + (k + 1) * w) for k in range(n)]
PY

rx_csv_py()
{
	local prog

	prog=$(cat)
	python3 -c "$RX_CSV_LIB
$prog" "$@"
}
