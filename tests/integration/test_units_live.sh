#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The package's units under a live systemd (docs/operations.md,
# "Hardening"). systemd is not PID 1 where the tests run, so this boots
# one: a Debian root filesystem (mmdebstrap: Essential, systemd, and the
# .deb) as a podman container with systemd as PID 1, in a network
# namespace with a veth, the host's bpffs of the test at /sys/fs/bpf:
#   - sluice.service, sandboxed as shipped, starts, is active, and its
#     program is on veth-a; its main process has exactly the three
#     capabilities, a seccomp filter and no new privileges; the live
#     `systemd-analyze security` is <= 2.5;
#   - `systemctl restart sluice` adopts the data plane (it stays on);
#   - the shipped /etc/default/sluice (no --iface): the unit fails once,
#     not restarted, the error its first line;
#   - sluice-tokend.service, as shipped but for the secrets credential
#     (systemd in this container cannot hand one to a dynamic user: even
#     `systemd-run -p DynamicUser=yes -p LoadCredential=...` reads
#     "Permission denied"), is active and serving;
#   - `dpkg --purge sluice` stops the units and takes the program off.
# About 2.5 minutes (mmdebstrap), so only with SLUICE_TEST_SYSTEMD=1;
# skipped otherwise. Host only.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
BUILD=${BUILD:-build}

if [ -z "${SLUICE_TEST_SYSTEMD:-}" ]; then
	skip "units under systemd" "SLUICE_TEST_SYSTEMD=1 runs it (~2.5 min: a root filesystem with systemd)"
	echo "1..$n"; exit 0
fi
if [ "$(id -u)" != 0 ]; then
	skip "units under systemd" "needs root"; echo "1..$n"; exit 0
fi
for t in mmdebstrap podman runc; do
	command -v $t >/dev/null ||
		{ skip "units under systemd" "no $t (apt-get install mmdebstrap podman runc)"; echo "1..$n"; exit 0; }
done

T=$(mktemp -d /tmp/sl-live.XXXXXX)
NS=sllive$$
NAME=sluice-live-$$
cleanup()
{
	podman rm -f -t 1 "$NAME" >/dev/null 2>&1
	ip netns del "$NS" 2>/dev/null
	umount -l "$T/bpffs" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

DEB=${SLUICE_DEB:-}
if [ -z "$DEB" ]; then
	make -s deb BUILD="$BUILD" >"$T/deb.log" 2>&1
	DEB=$(ls "$BUILD"/deb/sluice_*.deb 2>/dev/null | head -1)
fi
check $([ -r "$DEB" ] && echo 0 || echo 1) "the package: ${DEB:-none}"
cp "$DEB" "$T/sluice.deb"
# shellcheck disable=SC1091
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
sources=/etc/apt/sources.list.d/debian.sources
[ -s "$sources" ] || sources=/etc/apt/sources.list
start=$SECONDS
mmdebstrap --mode=root --variant=essential \
	--include=systemd,systemd-sysv,dbus,"$T/sluice.deb" \
	--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	"$suite" "$T/rootfs" "$sources" >"$T/mmdebstrap.log" 2>&1
check $? "mmdebstrap: a root filesystem with systemd and the package in $((SECONDS - start)) s"
show "$T/mmdebstrap.log" 0
R=$T/rootfs
shipped=$(cat "$R/etc/default/sluice")
echo 'SLUICE_AGENT_OPTS="--iface veth-a --rules /etc/sluice/rules.json"' \
	>"$R/etc/default/sluice"
chroot "$R" systemctl enable sluice.service >/dev/null 2>&1
mkdir -p "$R/etc/systemd/system/sluice-tokend.service.d"
cat >"$R/etc/systemd/system/sluice-tokend.service.d/test.conf" <<'EOF'
[Service]
LoadCredential=
ExecStart=
ExecStart=/usr/sbin/sluice tokend --state-dir ${STATE_DIRECTORY} $SLUICE_TOKEND_OPTS
EOF

ip netns add "$NS"
ip -n "$NS" link add veth-a type veth peer name veth-b
ip -n "$NS" link set veth-a up && ip -n "$NS" link set veth-b up
mkdir -p "$T/bpffs" && mount -t bpf bpf "$T/bpffs"
attached() { ip -n "$NS" link show dev veth-a | grep -qw xdp; }
# runc: crun refuses this host's hybrid cgroups; explicit ulimits: root
# here cannot raise podman's defaults (test_image.sh)
podman run -d --name "$NAME" --runtime runc --privileged --systemd=always \
	--ulimit nofile=8192:8192 --ulimit nproc=4096:4096 \
	--network "ns:/run/netns/$NS" -v "$T/bpffs:/sys/fs/bpf" \
	--rootfs "$R" /lib/systemd/systemd >"$T/run.log" 2>&1
check $? "podman: systemd as PID 1 of the root filesystem"
show "$T/run.log" 3
inside() { timeout 30 podman exec "$NAME" "$@"; }

state=""
for _ in $(seq 100); do
	state=$(inside systemctl is-active sluice 2>/dev/null)
	[ "$state" = active ] && break
	sleep 0.2
done
inside journalctl -u sluice --no-pager >"$T/journal" 2>&1
check $([ "$state" = active ] && echo 0 || echo 1) "sluice.service as shipped is $state"
[ "$state" = active ] || show "$T/journal" 8
attached
check $? "and its program is on veth-a"
pid=$(inside systemctl show sluice -p MainPID --value)
inside grep -E '^(CapBnd|CapEff|Seccomp|NoNewPrivs):' "/proc/$pid/status" >"$T/proc"
bnd=$(awk '/^CapBnd/ {print $2}' "$T/proc")
seccomp=$(awk '/^Seccomp:/ {print $2}' "$T/proc")
nnp=$(awk '/^NoNewPrivs/ {print $2}' "$T/proc")
# CAP_NET_ADMIN (12), CAP_PERFMON (38), CAP_BPF (39)
check $([ "$bnd" = 000000c000001000 ] && [ "$seccomp" = 2 ] && [ "$nnp" = 1 ] &&
	echo 0 || echo 1) \
	"its main process: CapBnd $bnd (want CAP_NET_ADMIN CAP_PERFMON CAP_BPF), seccomp $seccomp, NoNewPrivs $nnp"
score=$(inside systemd-analyze security sluice 2>&1 |
	sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
check $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.5) }'; echo $?) \
	"systemd-analyze security sluice (live): ${score:-none} (want <= 2.5)"
inside systemctl restart sluice
inside journalctl -u sluice --no-pager -n 5 >"$T/journal" 2>&1
grep -q 'veth-a: adopted' "$T/journal" && attached &&
	[ "$(inside systemctl is-active sluice)" = active ]
check $? "systemctl restart sluice adopts the data plane: $(grep -o 'veth-a: adopted.*' "$T/journal")"

# the shipped default: fails once, not restarted
printf '%s\n' "$shipped" >"$R/etc/default/sluice"
inside systemctl restart sluice >/dev/null 2>&1
sleep 3
st=$(inside systemctl is-active sluice)
restarts=$(inside systemctl show sluice -p NRestarts --value)
inside journalctl -u sluice --no-pager -o cat -n 30 >"$T/journal" 2>&1
first=$(grep -m1 '^sluice: error' "$T/journal")
check $([ "$st" = failed ] && [ "$restarts" = 0 ] &&
	grep -q 'missing --iface' <<<"$first" && echo 0 || echo 1) \
	"the shipped /etc/default/sluice: unit $st, $restarts restarts, $first"
attached
check $? "the program stays on veth-a meanwhile"

inside systemctl start sluice-tokend >/dev/null 2>&1
state=""
for _ in $(seq 50); do
	state=$(inside systemctl is-active sluice-tokend)
	inside journalctl -u sluice-tokend --no-pager -o cat 2>/dev/null |
		grep -q 'listening on' && break
	sleep 0.2
done
inside journalctl -u sluice-tokend --no-pager -o cat >"$T/tokend" 2>&1
grep -q 'listening on' "$T/tokend"
check $(( $? == 0 ? 0 : 1 )) "sluice-tokend.service (sandboxed, no credential) is $state: $(grep -m1 'listening on' "$T/tokend")"
score=$(inside systemd-analyze security sluice-tokend 2>&1 |
	sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
check $(awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.0) }'; echo $?) \
	"systemd-analyze security sluice-tokend (live): ${score:-none} (want <= 2.0)"

# back to a working agent, then purge under the live systemd
echo 'SLUICE_AGENT_OPTS="--iface veth-a --rules /etc/sluice/rules.json"' \
	>"$R/etc/default/sluice"
inside systemctl reset-failed sluice
inside systemctl start sluice
inside dpkg --purge sluice >"$T/purge.log" 2>&1
check $? "dpkg --purge sluice under systemd"
show "$T/purge.log" 6
attached
check $([ $? != 0 ] && echo 0 || echo 1) "took the program off veth-a"
# no pgrep in the Essential set: the processes' command lines
left=$(inside sh -c 'for c in /proc/[0-9]*/cmdline; do
	tr "\0" " " <"$c" 2>/dev/null; echo; done | grep "^/usr/sbin/sluice "
	ls -d /usr/sbin/sluice /etc/sluice /var/lib/sluice 2>/dev/null')
check $([ -z "$left" ] && echo 0 || echo 1) "no agent, binary, configuration or state left${left:+: $left}"
echo "1..$n"
