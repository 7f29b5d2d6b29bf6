#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs the test suites inside a qemu VM for each kernel of vmtest/kernels
# (or the ones given as arguments) and prints a table kernel x (result,
# passed, failed, skipped, seconds). Exits non-zero if any kernel failed.
#
# Usage: vmtest/vmtest.sh [KERNEL...]
#   KERNEL is a line of vmtest/kernels: a series such as "6.1" / "6.12"
#   (newest linux-image-6.1.0-N-amd64 / linux-image-6.12.N+debNN-amd64 in
#   apt), or an exact package name such as linux-image-6.1.0-57-amd64.
#
# Environment:
#   VMTEST_SUITES   shell words, each one TAP suite command, given as-is to
#                   tests/run.sh in the guest (default: vmtest/smoke.sh)
#   BUILD           host build directory (default: build); results land in
#                   $BUILD/vmtest/<kernel>/
#   VMTEST_TIMEOUT  seconds one VM may take, boot included (default 900)
#   VMTEST_ACCEL    auto (probe KVM, fall back to TCG) | tcg | kvm (default auto)
#   VMTEST_MEM      guest memory (default 1G); VMTEST_SMP vCPUs (default 2)
#   VMTEST_CACHE    kernel cache directory (default vmtest/cache)
#   VMTEST_VERBOSE  1: also print the guest's serial console
#   VMTEST_BOOT_TRIES  boots of one kernel when the guest crashes before
#                   its job starts, or in TCG's XDP dispatcher fault once
#                   it has (default 3; see docs/kernels.md)
#   VMTEST_GUEST_TIMEOUT  seconds the guest gives the job (default: 90% of
#                   VMTEST_TIMEOUT, at least 10 s less); 0 = none, leaving
#                   only the host's timeout (used to test that path)
set -u
set -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
cd "$repo" || exit 2

BUILD=${BUILD:-build}
case $BUILD in /*) build_abs=$BUILD ;; *) build_abs=$repo/$BUILD ;; esac
cache=${VMTEST_CACHE:-$here/cache}
mkdir -p "$cache" || exit 2
cache=$(cd "$cache" && pwd)
suites=${VMTEST_SUITES:-vmtest/smoke.sh}
vm_timeout=${VMTEST_TIMEOUT:-900}
accel_req=${VMTEST_ACCEL:-auto}
mem=${VMTEST_MEM:-1G}
smp=${VMTEST_SMP:-2}
# a guest of other than 2 vCPUs keeps its results apart: 6.12-8cpu
smp_tag=
[ "$smp" = 2 ] || smp_tag=-${smp}cpu
boot_tries=${VMTEST_BOOT_TRIES:-3}
qemu=${QEMU:-qemu-system-x86_64}

say() { echo "vmtest: $*"; }
warn() { echo "vmtest: $*" >&2; }

# ---------------------------------------------------------------- qemu life
qemu_pidfile=
cleanup() {
	if [ -n "$qemu_pidfile" ] && [ -s "$qemu_pidfile" ]; then
		kill -KILL "$(cat "$qemu_pidfile")" 2>/dev/null
	fi
	[ -n "${qemu_job:-}" ] && kill -KILL "$qemu_job" 2>/dev/null
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM HUP

# ------------------------------------------------------------ package pick
apt_lists_fresh() {
	[ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' \
		-mmin -1440 2>/dev/null | head -n1)" ]
}
apt_updated=0
apt_update() {
	[ "$apt_updated" = 1 ] && return 0
	apt_updated=1
	say "apt-get update"
	apt-get update -qq >/dev/null 2>&1 || warn "apt-get update failed"
}

# series_regex SERIES: package names of Debian's generic amd64 flavour.
series_regex() {
	local s=${1//./\\.}
	# 6.1: linux-image-6.1.0-57-amd64   6.12: linux-image-6.12.117+deb12-amd64
	echo "^linux-image-${s}(\.0-[0-9]+|\.[0-9]+\+deb[0-9]+)-amd64\$"
}

# newest_pkg SERIES -> "name version" (empty if apt knows none)
newest_pkg() {
	local spec=$1 re name ver
	if [[ $spec == linux-image-* ]]; then
		name=$spec
	else
		re=$(series_regex "$spec")
		name=$(apt-cache pkgnames linux-image- 2>/dev/null |
			grep -E "$re" | sort -V | tail -n1)
	fi
	[ -n "$name" ] || return 1
	ver=$(apt-cache show --no-all-versions "$name" 2>/dev/null |
		awk '/^Version:/ { print $2; exit }')
	[ -n "$ver" ] || return 1
	echo "$name $ver"
}

# newest already-unpacked kernel for SERIES (offline fallback)
cached_pkg() {
	local spec=$1 d best=
	for d in "$cache"/kernels/*/; do
		[ -f "$d/.series" ] && [ -f "$d/.unpacked" ] || continue
		[ "$(cat "$d/.series")" = "$spec" ] || continue
		best="$best$(cat "$d/.pkg")"$'\n'
	done
	[ -n "$best" ] && printf '%s' "$best" | sort -V | tail -n1
}

# fetch SERIES -> sets kdir, pkg, pkgver
fetch_kernel() {
	local spec=$1 pv
	apt_lists_fresh || apt_update
	pv=$(newest_pkg "$spec") || { apt_update; pv=$(newest_pkg "$spec"); } || pv=
	if [ -z "$pv" ]; then
		pv=$(cached_pkg "$spec")
		[ -n "$pv" ] || { warn "$spec: no package found in apt or cache"; return 1; }
		warn "$spec: apt knows no package, using cached $pv"
	fi
	pkg=${pv% *} pkgver=${pv#* }
	kdir=$cache/kernels/${pkg}_${pkgver}
	[ -f "$kdir/.unpacked" ] && return 0

	local debs
	rm -rf "$kdir"
	mkdir -p "$kdir" "$cache/kernels"
	debs=$(mktemp -d "$cache/debs.XXXXXX") || return 1
	say "$spec: fetching $pkg $pkgver"
	if ! (cd "$debs" && apt-get download -q=2 -o APT::Sandbox::User=root \
		"$pkg=$pkgver" >/dev/null); then
		apt_update
		(cd "$debs" && apt-get download -q=2 -o APT::Sandbox::User=root \
			"$pkg=$pkgver" >/dev/null) || {
			warn "$spec: apt-get download $pkg=$pkgver failed"
			rm -rf "$debs"
			return 1
		}
	fi
	dpkg-deb -x "$debs"/*.deb "$kdir/root" || {
		warn "dpkg-deb -x failed"
		rm -rf "$debs"
		return 1
	}
	rm -rf "$debs"
	echo "$spec" >"$kdir/.series"
	echo "$pkg $pkgver" >"$kdir/.pkg"
	touch "$kdir/.unpacked"
	# Drop older unpacked versions of the same series.
	local d
	for d in "$cache"/kernels/*/; do
		d=${d%/}
		[ "$d" != "$kdir" ] && [ -f "$d/.series" ] &&
			[ "$(cat "$d/.series")" = "$spec" ] && rm -rf "$d"
	done
	return 0
}

# ------------------------------------------------------------- preparation
# find_mod KVER NAME -> path of NAME's .ko[.xz|.zst|.gz] (relative to the
# modules dir); "builtin" if built in; empty if unknown.
find_mod() {
	local mdir=$1 name=$2 pat p
	pat="(^|/)${name//[-_]/[-_]}\.ko(\.(xz|zst|gz))?\$"
	if grep -qE "$pat" "$mdir/modules.builtin" 2>/dev/null; then
		echo builtin
		return
	fi
	p=$(grep -E "$pat" "$mdir/modules.order" 2>/dev/null | head -n1)
	[ -n "$p" ] || p=$(cd "$mdir" && find kernel -regextype posix-extended \
		-regex ".*/${name//[-_]/[-_]}\.ko(\.(xz|zst|gz))?" | head -n1)
	[ -n "$p" ] || return 0
	for f in "$p" "$p.xz" "$p.zst" "$p.gz" "${p%.*}"; do
		[ -f "$mdir/$f" ] && { echo "$f"; return; }
	done
}

decompress() {
	case $1 in
	*.xz) xz -dc "$1" ;;
	*.zst) zstd -qdc "$1" ;;
	*.gz) gzip -dc "$1" ;;
	*) cat "$1" ;;
	esac
}

# add_mod MDIR NAME STAGE: copy NAME and its dependencies (first) into
# STAGE/modules, decompressed, and append them to STAGE/modules.list.
declare -A mod_seen
add_mod() {
	local mdir=$1 name=${2//-/_} stage=$3 rel deps d
	[ -n "${mod_seen[$name]:-}" ] && return 0
	mod_seen[$name]=1
	rel=$(find_mod "$mdir" "$name")
	case $rel in
	builtin) return 0 ;;
	'') warn "module $name not found"; return 1 ;;
	esac
	decompress "$mdir/$rel" >"$stage/modules/$name.ko" || return 1
	deps=$(tr '\0' '\n' <"$stage/modules/$name.ko" |
		sed -n 's/^depends=//p' | head -n1 | tr ',' ' ')
	for d in $deps; do
		add_mod "$mdir" "$d" "$stage" || return 1
	done
	echo "$name.ko" >>"$stage/modules.list"
}

# prepare_kernel: sets kver, kernel_img, initrd
prepare_kernel() {
	local root=$kdir/root mdir stage
	kver=$(basename "$(ls -d "$root"/lib/modules/*/ | head -n1)")
	mdir=$root/lib/modules/$kver
	[ -d "$mdir" ] || { warn "no modules in $root"; return 1; }

	kernel_img=$kdir/vmlinux
	if [ ! -s "$kernel_img" ]; then
		if ! "$here/extract-vmlinux.sh" "$root/boot/vmlinuz-$kver" "$kernel_img"; then
			warn "$kver: cannot extract vmlinux, booting the bzImage (slower)"
			kernel_img=$root/boot/vmlinuz-$kver
		fi
	fi
	# modules.dep for on-demand loading in the guest (kmod handles .ko.xz)
	if [ ! -f "$mdir/modules.dep" ] && command -v depmod >/dev/null; then
		depmod -b "$root" "$kver" 2>/dev/null || warn "depmod failed"
	fi

	# The initramfs is cheap: rebuild it every run (in the build dir, so
	# that runs from other trees don't step on it) so init changes apply.
	stage=$build_abs/vmtest/initramfs-$kver.d
	rm -rf "$stage"
	mkdir -p "$stage"/{bin,sbin,modules,proc,sys,dev,tmp,mnt}
	cp /bin/busybox "$stage/bin/busybox" 2>/dev/null ||
		cp "$(command -v busybox)" "$stage/bin/busybox" || return 1
	ln -s busybox "$stage/bin/sh"
	install -m 755 "$here/init" "$stage/init"
	cp "$root/boot/config-$kver" "$stage/config"
	: >"$stage/modules.list"
	mod_seen=()
	local m
	for m in virtio_pci 9pnet_virtio 9p veth; do
		add_mod "$mdir" "$m" "$stage" || { warn "$kver: module $m missing"; return 1; }
	done
	if [ -f "$mdir/modules.dep" ]; then
		echo "$root" >"$stage/modroot"
		cat >"$stage/sbin/modprobe-host" <<-'EOF'
		#!/bin/sh
		# Kernel module autoload: the host's kmod modprobe, run in the
		# host root, on the unpacked kernel package.
		exec /bin/chroot /mnt/host /sbin/modprobe -d "$(cat /modroot)" "$@"
		EOF
		chmod 755 "$stage/sbin/modprobe-host"
	fi
	initrd=$build_abs/vmtest/initramfs-$kver.cpio
	(cd "$stage" && find . | busybox cpio -o -H newc 2>/dev/null) >"$initrd.tmp" &&
		mv "$initrd.tmp" "$initrd" || { warn "cpio failed"; return 1; }
}

# ---------------------------------------------------------------- running
# run_vm ACCEL SHARE TIMEOUT [APPEND...] -> qemu's exit status (124: timeout)
# With VM_PROBE=1 it gives up early when the serial console stays silent.
run_vm() {
	local accel=$1 share=$2 t=$3 cpu rc extra
	shift 3
	extra=${*:+ $*}
	case $accel in
	kvm) cpu=host ;;
	*) cpu=max ;;
	esac
	qemu_pidfile=$share/qemu.pid
	rm -f "$qemu_pidfile"
	timeout -k 5 "$t" "$qemu" \
		-nodefaults -no-reboot -display none -no-user-config \
		-machine pc -accel "$accel" -cpu "$cpu" -smp "$smp" -m "$mem" \
		-kernel "$kernel_img" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 loglevel=5 mitigations=off$extra" \
		-serial "file:$share/console.log" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$share,mount_tag=vmout,security_model=none,multidevs=remap" \
		-device isa-debug-exit,iobase=0xf4,iosize=0x04 \
		-pidfile "$qemu_pidfile" \
		</dev/null >"$share/qemu.log" 2>&1 &
	qemu_job=$!
	if [ "${VM_PROBE:-0}" = 1 ]; then
		# A kernel that works under this accelerator prints its first
		# (earlyprintk) lines within a second; silence means it hangs.
		local i=0
		while kill -0 "$qemu_job" 2>/dev/null; do
			sleep 0.5
			i=$((i + 1))
			if [ $i -ge 12 ] && [ ! -s "$share/console.log" ]; then
				kill -TERM "$qemu_job" 2>/dev/null
				break
			fi
		done
	fi
	wait "$qemu_job"
	rc=$?
	qemu_job=
	cleanup
	qemu_pidfile=
	return $rc
}

# KVM is used only if it really boots this kernel to userspace: a probe boot
# with no job (init reports "probe ok" through isa-debug-exit: qemu exits
# 85). The verdict is kept per host boot in the cache.
pick_accel() {
	case $accel_req in
	tcg | kvm) accel=$accel_req; return ;;
	esac
	accel=tcg
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 0
	local boot verdict_f verdict probe rc
	boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
	verdict_f=$cache/kvm-probe/$boot-$kver
	verdict=$(cat "$verdict_f" 2>/dev/null)
	if [ -z "$verdict" ]; then
		probe=$build_abs/vmtest/kvm-probe-$kver
		rm -rf "$probe"
		mkdir -p "$probe" "$cache/kvm-probe"
		VM_PROBE=1 run_vm kvm "$probe" 20 earlyprintk=serial
		rc=$?
		if [ "$rc" = 85 ]; then verdict=yes; else verdict=no; fi
		[ -s "$probe/console.log" ] || rc="$rc, no console output"
		echo "$verdict" >"$verdict_f"
		if [ "$verdict" = yes ]; then
			say "$kver: KVM probe: boots to userspace, using KVM"
		else
			say "$kver: KVM probe: no userspace (qemu exited $rc), using TCG"
		fi
	fi
	[ "$verdict" = yes ] && accel=kvm
	return 0
}

shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

write_job() {
	local share=$1
	mkdir -p "$share/bin" "$share/logs"
	# Tests that call modprobe themselves get the guest kernel's modules.
	if [ -f "$kdir/root/lib/modules/$kver/modules.dep" ]; then
		cat >"$share/bin/modprobe" <<-EOF
		#!/bin/sh
		exec /sbin/modprobe -d $(shq "$kdir/root") "\$@"
		EOF
		chmod 755 "$share/bin/modprobe"
	fi
	# The guest stops the job a little before the host kills the VM, so a
	# hung test still brings back its output and dmesg.
	local margin=$((vm_timeout / 10 > 10 ? vm_timeout / 10 : 10))
	echo "${VMTEST_GUEST_TIMEOUT:-$((vm_timeout - margin))}" >"$share/guest-timeout"
	# The directories the guest binds back over its own mounts (/tmp,
	# /run, /boot: vmtest/init), none inside one listed before it.
	local d k keep=()
	for d in "$repo" "$build_abs" "$cache"; do
		for k in "${keep[@]}"; do
			case $d/ in "$k"/*) continue 2 ;; esac
		done
		keep+=("$d")
	done
	printf '%s\n' "${keep[@]}" >"$share/keep"
	cat >"$share/job.sh" <<-EOF
	#!/bin/bash
	# written by vmtest/vmtest.sh; run by the guest's /init in a chroot
	export PATH=/run/vmtest/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	export HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8
	export SLUICE_VM=1 SLUICE_TEST_LOGS=/run/vmtest/logs
	export BUILD=$(shq "$BUILD")
	export VMTEST_KERNEL=$(shq "$spec") VMTEST_KERNEL_PKG=$(shq "$pkg $pkgver")
	cd $(shq "$repo") || { echo "vmtest: the guest cannot enter $(shq "$repo")"; exit 97; }
	echo "# guest kernel: \$(uname -r) ($(shq "$pkg $pkgver"))"
	tests/run.sh $suites | tee /run/vmtest/tap.log
	st=\${PIPESTATUS[0]}
	# one line per test: PASS|FAIL|SKIP<TAB>description
	awk '/^not ok /        { sub(/^not ok [0-9]* *-? */, ""); print "FAIL\t" \$0; next }
	     /^ok .*# *SKIP/   { sub(/^ok [0-9]* *-? */, "");     print "SKIP\t" \$0; next }
	     /^ok /            { sub(/^ok [0-9]* *-? */, "");     print "PASS\t" \$0 }' \
		/run/vmtest/tap.log >/run/vmtest/results.txt
	exit \$st
	EOF
}

SPLAT_RE='(-+\[ cut here \]-+|WARNING: CPU:|BUG: |kernel BUG at|Oops|general protection fault|Kernel panic|Call Trace:|UBSAN:|KASAN:|refcount_t:|list_(add|del) corruption|INFO: task .* blocked for more than|rcu: INFO: rcu_.* stall|soft lockup|hard LOCKUP)'

# tcg_dispatcher_crash CONSOLE: the oops is TCG's int3 in the XDP
# dispatcher, the first oops of the boot (docs/kernels.md)
tcg_dispatcher_crash() {
	grep -m1 -A30 'Oops: int3' "$1" 2>/dev/null |
		grep -q 'RIP: 0010:bpf_dispatcher_xdp_func'
}

# run_kernel SPEC: one line of the table in the globals row_*
run_kernel() {
	spec=$1
	local t0 share rc st summary p f s why=()
	t0=$(date +%s)
	row_pkg=- row_result=FAIL row_p=- row_f=- row_s=- row_accel=- row_why=
	if ! fetch_kernel "$spec"; then
		row_why="no kernel package"
		row_secs=$(($(date +%s) - t0))
		return 1
	fi
	row_pkg="$pkg $pkgver"
	if ! prepare_kernel; then
		row_why="kernel preparation failed"
		row_secs=$(($(date +%s) - t0))
		return 1
	fi
	pick_accel
	row_accel=$accel
	say "$spec: running $pkg $pkgver (uname -r $kver) under $accel, timeout ${vm_timeout}s"

	share=$build_abs/vmtest/$spec$smp_tag
	local tv boot
	for ((boot = 1; ; boot++)); do
		rm -rf "$share"
		mkdir -p "$share"
		write_job "$share"
		tv=$(date +%s)
		run_vm "$accel" "$share" "$vm_timeout"
		rc=$?
		# Down without a verdict before init started the job: the
		# kernel crashed while booting, before any code of ours ran
		# (6.12 under TCG now and then, docs/kernels.md). Boot again.
		# Once the job has started only one crash is retried: TCG's
		# int3 in the XDP dispatcher's live patching, an emulator
		# fault with a signature of its own (docs/kernels.md).
		[ "$rc" = 0 ] && [ "$boot" -lt "$boot_tries" ] || break
		if ! grep -qs '^running job' "$share/init.log"; then
			cp "$share/console.log" \
				"$build_abs/vmtest/$spec$smp_tag-boot-crash-$boot.log" 2>/dev/null
			say "$spec: the guest crashed while booting, before its job" \
				"(console in $build_abs/vmtest/$spec$smp_tag-boot-crash-$boot.log):" \
				"booting again"
		elif [ "$accel" = tcg ] && tcg_dispatcher_crash "$share/console.log"; then
			cp "$share/console.log" \
				"$build_abs/vmtest/$spec$smp_tag-dispatcher-crash-$boot.log" 2>/dev/null
			say "$spec: the guest hit TCG's int3 in the XDP dispatcher" \
				"while the job ran (console in" \
				"$build_abs/vmtest/$spec$smp_tag-dispatcher-crash-$boot.log):" \
				"running the job again"
		else
			break
		fi
	done
	local vm_secs=$(($(date +%s) - tv))

	case $rc in
	1 | 3) ;;
	124 | 137) why+=("timeout after ${vm_timeout}s") ;;
	0) why+=("guest went down without a verdict (panic or crash)") ;;
	*) why+=("qemu exited $rc: $(tail -n1 "$share/qemu.log" 2>/dev/null)") ;;
	esac
	st=$(cat "$share/exit-status" 2>/dev/null)
	if [ -z "$st" ]; then
		why+=("no exit status from the guest")
	else
		if [ -s "$share/guest-timed-out" ]; then
			why+=("guest job killed after $(cat "$share/guest-timed-out")s (guest timeout)")
		elif [ "$st" != 0 ]; then
			why+=("guest job exited $st")
		fi
		# cross-check with isa-debug-exit: guest wrote 0 -> qemu 1, 1 -> 3
		if [ "$rc" = 1 ] || [ "$rc" = 3 ]; then
			local want=3
			[ "$st" = 0 ] && want=1
			[ "$rc" = "$want" ] ||
				why+=("exit status $st disagrees with isa-debug-exit (qemu $rc)")
		fi
	fi
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' \
		"$share/output.log" 2>/dev/null | tail -n1)
	if [ -z "$summary" ]; then
		why+=("no result line from tests/run.sh")
	else
		read -r p _ f _ s _ <<<"${summary//,/}"
		row_p=$p row_f=$f row_s=$s
		[ "$f" = 0 ] || why+=("$f test(s) failed")
		[ $((p + f + s)) -gt 0 ] || why+=("no test ran")
	fi
	if [ -n "$summary" ] && [ $((p + f + s)) -gt 0 ] && [ ! -s "$share/results.txt" ]; then
		why+=("no per-test result file")
	fi
	local splat
	splat=$(cat "$share/dmesg.txt" "$share/console.log" 2>/dev/null |
		grep -E "$SPLAT_RE" | head -n1)
	[ -n "$splat" ] && why+=("kernel splat: ${splat:0:120}")

	say "$spec: guest output ($share/output.log):"
	sed 's/^/  | /' "$share/output.log" 2>/dev/null
	if [ "${VMTEST_VERBOSE:-0}" = 1 ] || [ ${#why[@]} -gt 0 ]; then
		say "$spec: serial console (last 40 lines of $share/console.log):"
		tail -n 40 "$share/console.log" 2>/dev/null | sed 's/^/  # /'
	fi
	row_secs=$(($(date +%s) - t0))
	say "$spec: vm ${vm_secs}s, total ${row_secs}s"
	if [ ${#why[@]} -eq 0 ]; then
		row_result=PASS
		return 0
	fi
	row_why=$(IFS=';'; echo "${why[*]}")
	row_why=${row_why//;/; }
	return 1
}

# ------------------------------------------------------------------- main
if [ $# -gt 0 ]; then
	kernels=("$@")
else
	mapfile -t kernels < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/kernels" | grep -v '^$')
fi
[ ${#kernels[@]} -gt 0 ] || { warn "no kernels"; exit 2; }
for tool in "$qemu" busybox dpkg-deb apt-get xz zstd; do
	command -v "$tool" >/dev/null || { warn "missing $tool (make vmtest-deps)"; exit 2; }
done
command -v depmod >/dev/null || warn "no depmod (kmod): no module autoload in the guest"

# The guest mounts its own proc and sysfs: nothing under them is shared.
for d in "$repo" "$build_abs" "$cache"; do
	case $d/ in /proc/* | /sys/*)
		warn "$d: the guest mounts its own /proc and /sys over it; move it elsewhere"
		exit 2 ;;
	esac
done
mkdir -p "$build_abs/vmtest"
say "suites: $suites"
say "vCPUs: $smp"
table=()
failed=0
t_all=$(date +%s)
for k in "${kernels[@]}"; do
	run_kernel "$k" || failed=1
	table+=("$(printf '%-10s %-52s %-6s %-5s %6s %6s %7s %7s' "$k$smp_tag" "$row_pkg" \
		"$row_result" "$row_accel" "$row_p" "$row_f" "$row_s" "$row_secs")")
	[ -n "$row_why" ] && table+=("         -> $row_why")
	# the failed tests by name: the guest's output scrolls far above
	while IFS= read -r line; do
		table+=("         -> not ok: ${line#FAIL	}")
	done < <([ "$row_f" != - ] && [ "$row_f" != 0 ] &&
		grep -s '^FAIL' "$build_abs/vmtest/$k$smp_tag/results.txt" | head -n 20)
done

# the table again in a file, which `make vmtest` prints after its last
# guest so that a failure stays in the tail of a long log
summary_file=$build_abs/vmtest/summary$smp_tag.txt
{
	echo
	printf '%-10s %-52s %-6s %-5s %6s %6s %7s %7s\n' kernel package result accel \
		passed failed skipped seconds
	printf '%s\n' "${table[@]}"
	echo "vmtest: $((${#kernels[@]})) kernel(s) in $(($(date +%s) - t_all))s:" \
		"$([ $failed = 0 ] && echo all passed || echo FAILED)"
} | tee "$summary_file"
exit $failed
