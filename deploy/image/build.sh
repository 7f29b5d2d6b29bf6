#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The sluice OCI image, from Debian packages only (docs/operations.md,
# "An OCI image"):
#
#   deploy/image/build.sh DEB OUTDIR TAG
#
# mmdebstrap installs Debian's Essential set and the .deb, with the
# dependencies it names, from this host's apt sources (the same suite,
# as the .deb was built against it); umoci makes the root filesystem the
# one layer of an OCI image layout, OUTDIR/oci (tag TAG), and skopeo
# writes OUTDIR/sluice-image.tar, an archive that podman, docker and
# containerd (ctr images import) load as localhost/sluice:TAG and
# localhost/sluice:latest; the .deb is copied beside them. No base image
# and no other registry.
# Documentation, man pages and locales are left out of the image.
set -euo pipefail

deb=$1 out=$2 tag=$3
name=localhost/sluice
for t in mmdebstrap umoci skopeo; do
	command -v $t >/dev/null ||
		{ echo "image: no $t: apt-get install mmdebstrap umoci skopeo" >&2; exit 1; }
done
[ -r "$deb" ] || { echo "image: no $deb: make deb first" >&2; exit 1; }
deb=$(realpath "$deb")
# shellcheck disable=SC1091
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
sources=${IMAGE_APT_SOURCES:-}
if [ -z "$sources" ]; then
	for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
		[ -s "$f" ] && { sources=$f; break; }
	done
fi
[ -n "$suite" ] && [ -n "$sources" ] ||
	{ echo "image: no suite in /etc/os-release or no apt sources" >&2; exit 1; }

rm -rf "$out" && mkdir -p "$out"
# the .deb it is made of, beside it
cp "$deb" "$out/"
rootfs=$out/rootfs.tar
# root: dpkg in the chroot owns the files as root
mmdebstrap --mode=root --variant=essential --include="$deb" \
	--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook='rm -f "$1"/etc/machine-id "$1"/var/cache/ldconfig/aux-cache' \
	--skip=output/dev \
	"$suite" "$rootfs" "$sources" >"$out/mmdebstrap.log" 2>&1 ||
	{ tail -20 "$out/mmdebstrap.log" >&2; exit 1; }

version=$(tar -xOf "$rootfs" ./var/lib/dpkg/status |
	  awk '/^Package: sluice$/ {p = 1} p && /^Version:/ {print $2; exit}')
oci=$out/oci
umoci init --layout "$oci"
umoci new --image "$oci:$tag"
umoci raw add-layer --image "$oci:$tag" "$rootfs"
umoci config --image "$oci:$tag" --os linux \
	--architecture "$(dpkg --print-architecture)" \
	--config.entrypoint /usr/sbin/sluice --config.cmd agent \
	--config.workingdir / \
	--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--config.label "org.opencontainers.image.title=sluice" \
	--config.label "org.opencontainers.image.version=$version" \
	--config.label "org.opencontainers.image.licenses=GPL-2.0-only" \
	--config.label "org.opencontainers.image.base.name=debian:$suite (mmdebstrap)"
umoci gc --layout "$oci"
skopeo copy --quiet "oci:$oci:$tag" "docker-archive:$out/sluice-image.tar:$name:$tag" \
	--additional-tag "$name:latest"
rm -f "$rootfs"
echo "image: $name:$tag (sluice $version) in $out/oci and $out/sluice-image.tar" \
     "($(du -m "$out/sluice-image.tar" | cut -f1) MB)"
