#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The OCI image (`make image`, docs/operations.md "An OCI image"):
#   - one layer, no base image: Debian's Essential set and sluice's .deb,
#     installed by dpkg (the image's dpkg database lists sluice at the
#     .deb's version), entrypoint /usr/sbin/sluice;
#   - its root filesystem (umoci unpack) runs `sluice --version` in a
#     chroot, every shared library found;
#   - podman runs it here (with runc and explicit ulimits, see below):
#     the agent from the image, with exactly CAP_BPF, CAP_NET_ADMIN and
#     CAP_PERFMON, in a network namespace, attaches to its veth and is
#     ready; `sluice down` from the image takes it down again. Where podman
#     cannot run a container, the same agent runs from the root filesystem
#     with unshare and chroot instead, and the skip says why.
# Building the image takes about 2 minutes (mmdebstrap): the test uses
# $BUILD/image when `make image` made it, builds it with
# SLUICE_TEST_IMAGE=1, and is skipped otherwise. Host only.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
BUILD=${BUILD:-build}
IMG=$BUILD/image

if [ "$(id -u)" != 0 ]; then
	skip "image" "needs root"; echo "1..$n"; exit 0
fi
if [ ! -e "$IMG/sluice-image.tar" ] && [ -z "${SLUICE_TEST_IMAGE:-}" ]; then
	skip "image" "no $IMG (make image, or SLUICE_TEST_IMAGE=1 to build it: ~2 min)"
	echo "1..$n"; exit 0
fi
for t in umoci skopeo podman jq; do
	command -v $t >/dev/null ||
		{ skip "image" "no $t (apt-get install umoci skopeo podman jq)"; echo "1..$n"; exit 0; }
done

T=$(mktemp -d /tmp/sl-img.XXXXXX)
NS=slimg$$
NAME=sluice-test-$$
LOADED=
cleanup()
{
	podman rm -f "$NAME" >/dev/null 2>&1
	[ -n "$LOADED" ] && podman rmi -f $LOADED >/dev/null 2>&1
	ip netns del "$NS" 2>/dev/null
	umount -l "$T/bpffs" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

if [ -n "${SLUICE_TEST_IMAGE:-}" ]; then
	start=$SECONDS
	make -s image BUILD="$BUILD" >"$T/image.log" 2>&1
	rc=$?
	check $rc "make image: exit $rc in $((SECONDS - start)) s: $(tail -1 "$T/image.log")"
	show "$T/image.log" 6
fi
TAG=$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' \
	"$IMG/oci/index.json" 2>/dev/null)
DEB=$(ls "$IMG"/sluice_*.deb 2>/dev/null | head -1) # what it was made of
version=$(dpkg-deb -f "$DEB" Version 2>/dev/null)

# ---- the layout ----
skopeo inspect --config "oci:$IMG/oci:$TAG" >"$T/config.json" 2>"$T/err"
skopeo inspect "oci:$IMG/oci:$TAG" >"$T/inspect.json" 2>>"$T/err"
layers=$(jq '.Layers | length' "$T/inspect.json" 2>/dev/null)
entry=$(jq -c '.config.Entrypoint' "$T/config.json" 2>/dev/null)
label=$(jq -r '.config.Labels["org.opencontainers.image.version"]' "$T/config.json" 2>/dev/null)
check $([ "$layers" = 1 ] && [ "$entry" = '["/usr/sbin/sluice"]' ] &&
	[ "$label" = "$version" ] && echo 0 || echo 1) \
	"OCI layout $TAG: ${layers:-?} layer (no base image), entrypoint $entry, version label $label (the .deb: $version)"
show "$T/err" 3

umoci unpack --image "$IMG/oci:$TAG" "$T/bundle" >"$T/unpack.log" 2>&1
check $? "umoci unpack"
R=$T/bundle/rootfs
inimage=$(chroot "$R" dpkg-query -W -f='${Version}' sluice 2>/dev/null)
npkgs=$(chroot "$R" dpkg-query -W -f='${Package}\n' 2>/dev/null | wc -l)
check $([ "$inimage" = "$version" ] && echo 0 || echo 1) \
	"the image's dpkg database: sluice $inimage among $npkgs packages"
got=$(chroot "$R" /usr/sbin/sluice --version 2>&1)
check $([ "$got" = "sluice $version" ] && echo 0 || echo 1) \
	"chroot ROOTFS sluice --version: $got"
chroot "$R" ldd /usr/sbin/sluice 2>&1 | grep 'not found' >"$T/ldd"
check $(( $(wc -l <"$T/ldd") == 0 ? 0 : 1 )) \
	"every shared library of the binary is in the image"
show "$T/ldd" 5
echo "# image: $(du -m "$IMG/sluice-image.tar" | cut -f1) MB uncompressed, $(du -sm "$IMG/oci" | cut -f1) MB as the OCI layout (gzip)"

# ---- the agent from the image, in a network namespace ----
ip netns add "$NS"
ip -n "$NS" link add veth-a type veth peer name veth-b
ip -n "$NS" link set veth-a up && ip -n "$NS" link set veth-b up
mkdir -p "$T/bpffs" "$T/state"
mount -t bpf bpf "$T/bpffs"
attached() { ip -n "$NS" link show dev veth-a | grep -qw xdp; }

# podman here: crun refuses this host's hybrid cgroup layout (hugetlb in
# the cgroup2 tree: "cgroups in hybrid mode not supported"), so runc;
# root has no CAP_SYS_RESOURCE, so podman's default ulimits (1048576 fds)
# cannot be set: explicit ones. podman's default seccomp profile allows
# bpf(2) only with CAP_SYS_ADMIN: unconfined, the capabilities bound it.
PODMAN_RUN=(podman run --runtime runc --ulimit nofile=8192:8192
	    --ulimit nproc=4096:4096 --network "ns:/run/netns/$NS"
	    --cap-drop all --cap-add BPF,NET_ADMIN,PERFMON
	    --security-opt seccomp=unconfined --read-only
	    -v "$T/bpffs:/sys/fs/bpf" -v "$T/state:/var/lib/sluice")
why=""
# SLUICE_TEST_NO_PODMAN=1 takes the root filesystem path (to test it)
if [ -n "${SLUICE_TEST_NO_PODMAN:-}" ]; then
	why="SLUICE_TEST_NO_PODMAN is set"
elif ! podman load -i "$IMG/sluice-image.tar" >"$T/load.log" 2>&1; then
	why="podman load: $(tail -1 "$T/load.log")"
else
	LOADED="localhost/sluice:$TAG localhost/sluice:latest"
	podman run --rm --runtime runc --ulimit nofile=1024:1024 \
		--ulimit nproc=1024:1024 --network none \
		"localhost/sluice:$TAG" --version >"$T/ver" 2>&1 ||
		why="podman run: $(tail -1 "$T/ver")"
fi
if [ -z "$why" ]; then
	check $([ "$(cat "$T/ver")" = "sluice $version" ] && echo 0 || echo 1) \
		"podman run localhost/sluice:$TAG --version: $(cat "$T/ver")"
	"${PODMAN_RUN[@]}" -d --name "$NAME" "localhost/sluice:$TAG" \
		agent --iface veth-a --rules /etc/sluice/rules.json \
		>"$T/run.log" 2>&1
	ready=1
	for _ in $(seq 100); do
		podman exec "$NAME" sluice status --ready >/dev/null 2>&1 &&
			{ ready=0; break; }
		sleep 0.1
	done
	podman logs "$NAME" >"$T/agent.log" 2>&1
	check $ready "the agent from the image (3 capabilities, netns $NS) is ready"
	show "$T/agent.log" 4
	attached
	check $? "and attached to veth-a"
	podman stop -t 5 "$NAME" >/dev/null 2>&1
	attached
	check $? "still attached once the container has stopped (as on a node)"
	"${PODMAN_RUN[@]}" --rm "localhost/sluice:$TAG" down --iface veth-a \
		>"$T/down.log" 2>&1
	! attached && [ ! -e "$T/bpffs/sluice/links/veth-a" ]
	check $? "sluice down from the image detaches and unpins (the teardown): $(head -1 "$T/down.log")"
else
	skip "podman" "$why; the root filesystem instead"
	# the same, in a mount namespace with the rootfs as /, the bpffs and
	# the state bound in, with exactly the three capabilities
	mkdir -p "$R/var/lib/sluice"
	rootrun()
	{
		ip netns exec "$NS" unshare --mount --fork sh -c "
			mount -t sysfs sysfs '$R/sys' &&
			mount --bind '$T/bpffs' '$R/sys/fs/bpf' &&
			mount --bind '$T/state' '$R/var/lib/sluice' &&
			mount -t proc proc '$R/proc' &&
			exec chroot '$R' setpriv --bounding-set=-all,+bpf,+net_admin,+perfmon \
				/usr/sbin/sluice $*"
	}
	rootrun agent --iface veth-a --rules /etc/sluice/rules.json \
		>"$T/agent.log" 2>&1 &
	apid=$!
	for _ in $(seq 100); do
		grep -q attached "$T/agent.log" && break
		sleep 0.1
	done
	attached
	check $? "the agent from the image's rootfs (3 capabilities, netns $NS) attached: $(grep attached "$T/agent.log")"
	attached || show "$T/agent.log" 5
	kill $apid 2>/dev/null; wait $apid 2>/dev/null
	rootrun down --iface veth-a >"$T/down.log" 2>&1
	! attached && grep -q 'veth-a: detached' "$T/down.log"
	check $? "sluice down from the rootfs detaches: $(head -1 "$T/down.log")"
fi
echo "1..$n"
