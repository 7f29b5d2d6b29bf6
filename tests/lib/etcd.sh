# SPDX-License-Identifier: GPL-2.0
# One etcd-server in the test's receiving namespace, on its own loopback
# (its ports are free by construction); source after netns.sh and set
# ETCD_EP (the client URL, port 2379) and T (its data dir's parent):
#   etcd_start [FLAGS...] # start it (FLAGS: etcd's, e.g. TLS), wait (10 s
#                         # at most) until it is healthy
#   etcd_kill             # SIGKILL it and reap it
#   ectl ARGS...          # etcdctl against it, from that namespace, with
#                         # ECTL_ARGS (an array: TLS files, --user) first
#   etcd_pki DIR          # a throwaway CA and certificates in DIR, below
#   etcd_rule NAME PORT COUNT # a rule of COUNT pps on UDP PORT, as JSON
#   status_until SECS EXPR    # poll the agent's `status -j` every 50 ms
#                             # until EXPR (python, the document is d) is
#                             # true (after sluice.sh)

ECTL_ARGS=()

etcd_start()
{
	netns_bg "$NS_RX" etcd etcd --name t --data-dir "$T/etcd" \
		--listen-client-urls "$ETCD_EP" --advertise-client-urls "$ETCD_EP" \
		--listen-peer-urls http://127.0.0.1:2380 \
		--initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster t=http://127.0.0.1:2380 "$@"
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

ectl()
{
	ip netns exec "$NS_RX" env ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" \
		"${ECTL_ARGS[@]}" "$@"
}

# DIR/ca.{crt,key}: a CA; server.{crt,key}: etcd's for 127.0.0.1, for
# clients too (etcd's gateway dials etcd with it under
# --client-cert-auth); client.{crt,key}: a client's, without a
# CommonName (the gateway refuses one that has it); cn-client.{crt,key}:
# one with; other-ca.crt: a CA that signed none of them.
etcd_pki()
{
	local d=$1 n

	mkdir -p "$d" || return 1
	(
		cd "$d" || exit 1
		for n in ca other-ca; do
			openssl req -x509 -newkey rsa:2048 -nodes -days 1 \
				-subj "/CN=sluice test $n" -keyout $n.key \
				-out $n.crt || exit 1
		done
		printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
		printf 'extendedKeyUsage=clientAuth\n' >client.ext
		cp client.ext cn-client.ext
		for n in server:/CN=etcd client:/O=sluice cn-client:/CN=sluice; do
			openssl req -newkey rsa:2048 -nodes -subj "${n#*:}" \
				-keyout "${n%%:*}.key" -out "${n%%:*}.csr" &&
				openssl x509 -req -in "${n%%:*}.csr" -CA ca.crt \
					-CAkey ca.key -CAcreateserial -days 1 \
					-extfile "${n%%:*}.ext" \
					-out "${n%%:*}.crt" || exit 1
		done
	) >"$d/openssl.log" 2>&1
}

etcd_rule()
{
	printf '{"name":"%s","match":{"proto":"udp","dport":%s},"grade":"pps","count":%s}' "$1" "$2" "$3"
}

status_until()
{
	local deadline=$(( ${EPOCHREALTIME//[.,]/} + $1 * 1000000 ))

	while (( ${EPOCHREALTIME//[.,]/} < deadline )); do
		[ "$(sluice_cli status -j 2>/dev/null | sluice_json "$2" 2>/dev/null)" = true ] &&
			return 0
		sleep 0.05
	done
	return 1
}
