#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Extract the uncompressed ELF vmlinux from a bzImage (vmlinuz), the way the
# kernel's scripts/extract-vmlinux does it: find each compression magic in the
# image, decompress from that offset and keep the first result that is ELF.
# Booting the ELF directly (PVH entry) skips the slow in-guest decompression
# under qemu's TCG.
#
# Usage: extract-vmlinux.sh VMLINUZ OUT
set -eu
img=$1
out=$2
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT

is_elf() {
	[ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]
}

# try MAGIC PLACEHOLDER DECOMPRESSOR...
# tr maps the magic's first byte to a newline and the others to the
# placeholder letters (and real newlines to '='), so every occurrence of the
# magic becomes a line starting with PLACEHOLDER; grep -b gives its offset,
# which is the 1-based offset of the magic in the image.
try() {
	magic=$1 ph=$2
	shift 2
	for pos in $(tr "${magic}\n${ph}" "\n${ph}=" <"$img" |
		grep -abo "^${ph}" | cut -d: -f1); do
		tail -c+"$pos" "$img" | "$@" >"$tmp" 2>/dev/null || true
		if [ -s "$tmp" ] && is_elf "$tmp"; then
			mv "$tmp" "$out"
			return 0
		fi
	done
	return 1
}

try '\037\213\010' xy gunzip -c && exit 0
try '\3757zXZ\000' abcde xz -dc && exit 0
try '(\265/\375' xxx zstd -dc && exit 0
try 'BZh' xy bunzip2 -c && exit 0
try '\135\0\0\0' xxx unlzma -c && exit 0
try '\211\114\132' xy lzop -dc && exit 0
try '\002!L\030' xxx lz4 -dc && exit 0
is_elf "$img" && cp "$img" "$out" && exit 0
echo "extract-vmlinux: no ELF kernel found in $img" >&2
exit 1
