# SPDX-License-Identifier: GPL-2.0
# What the token server benchmarks share (tests/bench/bench_tokend.sh and
# the cluster part of bench_peers.sh): ports, the rules of N flows, and
# the namespace secret.

BENCH_SECRET=bench-secret-0123456789

# A free loopback port, chosen by the kernel.
free_port()
{
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits (at most 5 s) until something listens on loopback PORT.
wait_port() # PORT
{
	local i

	for ((i = 0; i < 100; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	echo "nothing listens on $1" >&2
	return 1
}

# DIR/rules.json with N global flows of namespace bench, each of COUNT
# (default 1000000) with the default fallback (share), DIR/secrets.
bench_flows() # DIR N [COUNT]
{
	python3 - "$2" "${3:-1000000}" >"$1/rules.json" <<'PY'
import json, sys
n, count = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps({"rules": [{"name": "f%d" % i,
    "match": {"proto": "udp", "dport": 1000 + i}, "grade": "pps",
    "count": count, "cluster": {"namespace": "bench", "flow_id": i + 1,
    "threshold_type": "global"}} for i in range(n)]}))
PY
	(umask 077 && echo "bench $BENCH_SECRET" >"$1/secrets")
}
