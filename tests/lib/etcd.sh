# SPDX-License-Identifier: GPL-2.0
# One etcd-server in the test's receiving namespace, on its own loopback
# (its ports are free by construction); source after netns.sh and set
# ETCD_EP (the client URL, port 2379) and T (its data dir's parent):
#   etcd_start     # start it, wait (10 s at most) until it is healthy
#   etcd_kill      # SIGKILL it and reap it
#   ectl ARGS...   # etcdctl against it, from that namespace

etcd_start()
{
	netns_bg "$NS_RX" etcd etcd --name t --data-dir "$T/etcd" \
		--listen-client-urls "$ETCD_EP" --advertise-client-urls "$ETCD_EP" \
		--listen-peer-urls http://127.0.0.1:2380 \
		--initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster t=http://127.0.0.1:2380
	for ((i = 0; i < 100; i++)); do
		ectl endpoint health >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "# etcd did not come up:"
	sed 's/^/#   /' "$NETNS_TMP/etcd.err" | head -n 20
	return 1
}

etcd_kill()
{
	kill -KILL "${NETNS_PID[etcd]}" 2>/dev/null
	wait "${NETNS_PID[etcd]}" 2>/dev/null
	unset "NETNS_PID[etcd]"
}

ectl() { ip netns exec "$NS_RX" env ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" "$@"; }
