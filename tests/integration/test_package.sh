#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The Debian package (`make deb`, docs/operations.md "Installing"), on
# this machine:
#   - it builds, lintian has nothing to say (debian/ overrides one tag,
#     with its reason), and Depends names the shared libraries' packages;
#   - dpkg -i: `sluice --version` is the package's, the configuration is
#     conffiles (the secrets template mode 0600), the units verify;
#   - the units' sandbox: `systemd-analyze security --offline` rates the
#     agent <= 2.5 and tokend <= 2.0 (they were 9.5 and 8.3), and the agent
#     run with exactly the unit's capability bound attaches (and without
#     CAP_PERFMON does not, so the bound is what is tested);
#   - the shipped defaults: the agent's command line as the unit runs it
#     exits 2 at once with the error first, and the unit does not restart
#     on 2; tokend's starts and serves;
#   - removal with /etc/sluice/keep-attached leaves the program attached;
#     `make uninstall` refuses while it is; purge (no opt-out) takes it
#     down and leaves no file of the package, no state, no /etc/sluice.
# Host only: it installs a package on the machine (purged at exit).
# About 40 s, most of it the package build (SLUICE_DEB=FILE uses a built
# one).
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
BUILD=${BUILD:-build}

if [ "$(id -u)" != 0 ]; then
	skip "package" "needs root (dpkg -i)"; echo "1..$n"; exit 0
fi
for t in dpkg-buildpackage dh lintian systemd-analyze setpriv; do
	command -v $t >/dev/null ||
		{ skip "package" "no $t (apt-get install debhelper lintian)"; echo "1..$n"; exit 0; }
done

T=$(mktemp -d /tmp/sl-pkg.XXXXXX)
A=slpk$$a B=slpk$$b
AGENT=
# the test writes /etc/default/sluice; one that was not there goes at exit
had_default=$([ -e /etc/default/sluice ] && echo 1)
cleanup()
{
	[ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
	rm -f /etc/sluice/keep-attached
	dpkg --purge sluice >/dev/null 2>&1
	[ -n "$had_default" ] || rm -f /etc/default/sluice
	ip link del "$A" 2>/dev/null
	umount -l "$T/bpffs" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

# ---- the build ----
if [ -n "${SLUICE_DEB:-}" ]; then
	DEB=$SLUICE_DEB
	check $([ -r "$DEB" ] && echo 0 || echo 1) "SLUICE_DEB=$DEB is there"
else
	start=$SECONDS
	make -s deb BUILD="$BUILD" >"$T/deb.log" 2>&1
	rc=$?
	DEB=$(ls "$BUILD"/deb/sluice_*.deb 2>/dev/null | head -1)
	check $(( rc == 0 && ${#DEB} > 0 ? 0 : 1 )) \
		"make deb: exit $rc in $((SECONDS - start)) s: ${DEB:-no .deb}"
	show "$T/deb.log" 10
fi
lintian --tag-display-limit 0 "$DEB" 2>/dev/null | grep -v '^N:' >"$T/lintian"
check $(( $(wc -l <"$T/lintian") == 0 ? 0 : 1 )) \
	"lintian: $(wc -l <"$T/lintian") tags"
show "$T/lintian" 10
depends=$(dpkg-deb -f "$DEB" Depends)
miss=""
for p in libbpf1 libc6 libcjson1 libcurl4 libmicrohttpd12 libmnl0 \
	 libssl3 libsystemd0; do
	grep -q "\b$p\b" <<<"$depends" || miss="$miss $p"
done
check $([ -z "$miss" ] && echo 0 || echo 1) \
	"Depends comes from the shared libraries${miss:+; missing:$miss}: $depends"
version=$(dpkg-deb -f "$DEB" Version)

# ---- install ----
dpkg --purge sluice >/dev/null 2>&1
dpkg -i "$DEB" >"$T/install.log" 2>&1
check $? "dpkg -i $(basename "$DEB")"
show "$T/install.log" 4
got=$(sluice --version 2>&1)
check $([ "$got" = "sluice $version" ] && echo 0 || echo 1) \
	"sluice --version: '$got' (want 'sluice $version')"
conff=$(sort /var/lib/dpkg/info/sluice.conffiles | tr '\n' ' ')
want="/etc/default/sluice /etc/default/sluice-tokend /etc/sluice/cluster.json /etc/sluice/rules.json /etc/sluice/secrets "
check $([ "$conff" = "$want" ] && echo 0 || echo 1) "conffiles: $conff"
check $([ "$(stat -c %a /etc/sluice/secrets)" = 600 ] && echo 0 || echo 1) \
	"/etc/sluice/secrets mode $(stat -c %a /etc/sluice/secrets) (want 600)"
for page in sluice.8 sluice-tokend.8 sluice-rules.5; do
	check $([ -e "/usr/share/man/man${page##*.}/$page.gz" ] && echo 0 || echo 1) \
		"man page $page installed"
done

# ---- units ----
U=/lib/systemd/system
for u in sluice sluice-tokend; do
	systemd-analyze verify --man=no "$U/$u.service" >"$T/verify" 2>&1
	rc=$?
	check $(( rc == 0 && $(wc -c <"$T/verify") == 0 ? 0 : 1 )) \
		"systemd-analyze verify $u.service: exit $rc, $(wc -l <"$T/verify") lines of complaint"
	show "$T/verify" 4
done
# systemd-analyze security --offline rates the unit files as they are
for u in sluice:2.5 sluice-tokend:2.0; do
	name=${u%:*} max=${u#*:}
	score=$(systemd-analyze security --offline=yes "$U/$name.service" 2>&1 |
		sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	check $(awk -v s="${score:-99}" -v m="$max" 'BEGIN { exit !(s <= m) }'; echo $?) \
		"systemd-analyze security $name.service: ${score:-none} (want <= $max)"
done
for u in sluice sluice-tokend; do
	grep -qx 'RestartPreventExitStatus=2' "$U/$u.service"
	check $? "$u.service does not restart a usage error (exit 2)"
done

# ---- the shipped defaults ----
# the agent's command line as the unit runs it: EnvironmentFile, then
# ExecStart with $SLUICE_AGENT_OPTS split into words
(set -a; . /etc/default/sluice; set +a
 # shellcheck disable=SC2086
 timeout 10 sluice agent $SLUICE_AGENT_OPTS) >"$T/agent0.out" 2>&1
rc=$?
first=$(grep -v '^$' "$T/agent0.out" | head -1)
grep -q 'error: agent: missing --iface' <<<"$first"
check $(( rc == 2 && $? == 0 ? 0 : 1 )) \
	"the shipped /etc/default/sluice: exit $rc (want 2, not restarted), first line: $first"
mkdir -p "$T/tokend"
cp /etc/sluice/secrets "$T/secrets"
(set -a; . /etc/default/sluice-tokend; set +a
 # shellcheck disable=SC2086
 exec sluice tokend --state-dir "$T/tokend" --secrets "$T/secrets" \
	$SLUICE_TOKEND_OPTS) >"$T/tokend.out" 2>&1 &
tpid=$!
for _ in $(seq 50); do
	grep -q 'listening on' "$T/tokend.out" && break
	kill -0 $tpid 2>/dev/null || break
	sleep 0.1
done
grep -q 'listening on' "$T/tokend.out"
serving=$?
kill $tpid 2>/dev/null; wait $tpid 2>/dev/null
check $serving "the shipped /etc/default/sluice-tokend starts and serves: $(grep -v warning "$T/tokend.out" | head -1)"

# ---- the agent under the unit's capability bound ----
ip link add "$A" type veth peer name "$B" && ip link set "$A" up &&
	ip link set "$B" up
mkdir -p "$T/bpffs" "$T/state" && mount -t bpf bpf "$T/bpffs"
PIN=$T/bpffs/sluice
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$U/sluice.service")
bound=$(tr ' ' '\n' <<<"$caps" | sed 's/^CAP_//' | tr 'A-Z' 'a-z' |
	sed 's/^/+/' | paste -sd,)
# what prerm reads to find the pins
echo "SLUICE_AGENT_OPTS=\"--iface $A --pin-dir $PIN\"" >/etc/default/sluice
run_agent()
{
	setpriv --bounding-set="-all,$1" --no-new-privs \
		sluice agent --iface "$A" --pin-dir "$PIN" \
		--state-dir "$T/state" --rules /etc/sluice/rules.json \
		>"$T/agent.out" 2>&1 &
	AGENT=$!
	for _ in $(seq 100); do
		sluice status --ready --state-dir "$T/state" >/dev/null 2>&1 &&
			return 0
		kill -0 $AGENT 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
run_agent "$(sed 's/,+perfmon//' <<<"$bound")"
check $([ $? != 0 ] && echo 0 || echo 1) \
	"without CAP_PERFMON the agent does not start (the bound is in force): $(grep error "$T/agent.out" | tail -1)"
wait $AGENT 2>/dev/null; AGENT=
run_agent "$bound"
check $? "the agent with exactly the unit's bound ($caps) is ready"
show "$T/agent.out" 3
kill $AGENT; wait $AGENT 2>/dev/null; AGENT=
attached() { ip link show dev "$A" | grep -qw xdp; }
attached
check $? "it left its program attached to $A (as an agent does)"

# ---- removal ----
make -s uninstall PIN_DIR="$PIN" PREFIX="$T/nowhere" >"$T/uninstall" 2>&1
rc=$?
grep -q "sluice down --iface $A" "$T/uninstall"
check $(( rc != 0 && $? == 0 ? 0 : 1 )) \
	"make uninstall refuses while attached and says what to run: $(head -c 200 "$T/uninstall")"
touch /etc/sluice/keep-attached
dpkg --remove sluice >"$T/remove.log" 2>&1
attached
check $(( $? == 0 ? 0 : 1 )) \
	"remove with /etc/sluice/keep-attached: still attached ($(grep -o 'keeping[^;]*' "$T/remove.log"))"
rm -f /etc/sluice/keep-attached
dpkg -i "$DEB" >>"$T/install.log" 2>&1
echo "SLUICE_AGENT_OPTS=\"--iface $A --pin-dir $PIN\"" >/etc/default/sluice
files=$(dpkg -L sluice | while read -r f; do [ -f "$f" ] && echo "$f"; done)
dpkg --purge sluice >"$T/purge.log" 2>&1
check $? "dpkg --purge sluice"
show "$T/purge.log" 4
attached
check $([ $? != 0 ] && echo 0 || echo 1) "purge took the program off $A"
check $([ ! -e "$PIN/links/$A" ] && echo 0 || echo 1) "and its pins"
left=""
for f in $files /etc/sluice /var/lib/sluice /etc/default/sluice \
	 /etc/default/sluice-tokend; do
	[ -e "$f" ] && left="$left $f"
done
check $([ -z "$left" ] && echo 0 || echo 1) \
	"purge left no file of the package ($(wc -w <<<"$files") files)${left:+; left:$left}"
echo "1..$n"
