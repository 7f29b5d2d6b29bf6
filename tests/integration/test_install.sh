#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make install` and `make uninstall` (docs/operations.md, "Installing"):
#   - DESTDIR gets the binary, both units, the man pages, the docs, the
#     bash and zsh completion and the configuration (the secrets file mode 0600), all with their modes;
#   - a second install keeps configuration an operator edited;
#   - every unit passes `systemd-analyze verify` with nothing to say, and
#     the agent's ordering has no cycle and puts it before network-pre,
#     network and network-online targets (so what they order comes after);
#   - every man page renders, and every option of `sluice help COMMAND` is
#     in its man page (the table and the page cannot drift apart);
#   - the Kubernetes DaemonSet parses as YAML and asks for what the agent
#     needs: hostNetwork, the bpffs and state mounts, the readiness probe,
#     `make image`'s image; its teardown runs `sluice down` from it;
#   - uninstall removes what install made and keeps edited configuration.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
BUILD=${BUILD:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3 # Debian's, with python3-yaml

for t in scdoc systemd-analyze man; do
	command -v $t >/dev/null || { skip "install" "no $t"; echo "1..$n"; exit 0; }
done

make -s install DESTDIR="$T/root" BUILD="$BUILD" >"$T/install.log" 2>&1
check $? "make install DESTDIR=... exits 0"
R=$T/root
for f in usr/local/sbin/sluice:755 \
	 usr/local/lib/systemd/system/sluice.service:644 \
	 usr/local/lib/systemd/system/sluice-tokend.service:644 \
	 usr/local/share/man/man8/sluice.8:644 \
	 usr/local/share/man/man8/sluice-tokend.8:644 \
	 usr/local/share/man/man5/sluice-rules.5:644 \
	 usr/local/share/doc/sluice/operations.md:644 \
	 usr/local/share/doc/sluice/alerts.yml:644 \
	 usr/local/share/doc/sluice/examples/schema.json:644 \
	 usr/local/share/bash-completion/completions/sluice:644 \
	 usr/local/share/zsh/site-functions/_sluice:644 \
	 etc/default/sluice:644 etc/default/sluice-tokend:644 \
	 etc/sluice/rules.json:644 etc/sluice/cluster.json:644 \
	 etc/sluice/secrets:600; do
	path=$R/${f%:*} want=${f#*:}
	mode=$(stat -c %a "$path" 2>/dev/null)
	check $([ "$mode" = "$want" ] && echo 0 || echo 1) \
		"installed ${f%:*} mode ${mode:-missing} (want $want)"
done
"$R/usr/local/sbin/sluice" check "$R/etc/sluice/rules.json" >/dev/null
check $? "the example /etc/sluice/rules.json is a valid rule file"
grep -q '"mode": "shadow"' "$R/etc/sluice/rules.json" &&
	! grep -q '"mode": "enforce"' "$R/etc/sluice/rules.json"
check $? "and drops nothing until edited (every rule in shadow mode)"

echo 'SLUICE_AGENT_OPTS="--iface eth9"' >"$R/etc/default/sluice"
make -s install DESTDIR="$R" BUILD="$BUILD" >>"$T/install.log" 2>&1
grep -q eth9 "$R/etc/default/sluice"
check $? "a second install keeps an edited /etc/default/sluice"

# units: installed under a prefix of their own, so that the paths they
# name exist for verify
make -s install PREFIX="$T/p/usr" SYSCONFDIR="$T/p/etc" BUILD="$BUILD" \
	>>"$T/install.log" 2>&1
for u in sluice sluice-tokend; do
	systemd-analyze verify --man=no "$T/p/usr/lib/systemd/system/$u.service" \
		>"$T/verify" 2>&1
	rc=$?
	check $((rc == 0 && $(wc -c <"$T/verify") == 0 ? 0 : 1)) \
		"systemd-analyze verify $u.service: exit $rc, $(wc -l <"$T/verify") lines of complaint"
	show "$T/verify" 4
done

# the ordering, with systemd's own edges between the targets it names
$PY - "$T/p/usr/lib/systemd/system/sluice.service" <<'PY' >"$T/order"
import configparser, sys
cp = configparser.ConfigParser(strict=False, interpolation=None)
cp.optionxform = str
cp.read(sys.argv[1])
u = cp["Unit"]
after = set((u.get("After") or "").split())
before = set((u.get("Before") or "").split())
if u.get("DefaultDependencies", "yes") != "no":
    after |= {"sysinit.target", "basic.target"}
    before |= {"shutdown.target"}
# X -> Y: X starts before Y (systemd's target units)
edges = {("local-fs.target", "sysinit.target"), ("sysinit.target", "basic.target"),
         ("network-pre.target", "network.target"),
         ("network.target", "network-online.target"),
         ("basic.target", "multi-user.target"),
         ("network.target", "multi-user.target")}
edges |= {(a, "sluice") for a in after} | {("sluice", b) for b in before}
succ = {}
for a, b in edges:
    succ.setdefault(a, set()).add(b)
def reach(x, seen):
    for y in succ.get(x, ()):
        if y not in seen:
            seen.add(y)
            reach(y, seen)
    return seen
cycle = "sluice" in reach("sluice", set())
later = reach("sluice", set())
print("cycle" if cycle else "acyclic",
      all(t in later for t in ("network-pre.target", "network.target",
                               "network-online.target")))
PY
read -r shape first <"$T/order"
check $([ "$shape" = acyclic ] && [ "$first" = True ] && echo 0 || echo 1) \
	"the agent's ordering is $shape and before network-pre/network/network-online: $first"

# man pages: they render, and name every option of the command table
for page in sluice.8 sluice-tokend.8 sluice-rules.5; do
	man -l "$R/usr/local/share/man/man${page##*.}/$page" >"$T/man.txt" \
		2>"$T/man.err"
	check $(( $? == 0 && $(wc -l <"$T/man.txt") > 40 ? 0 : 1 )) \
		"man $page renders ($(wc -l <"$T/man.txt") lines)"
done
missing=""
for cmd in agent "rule add" "rule del" "rule replace" "rule list" status \
	   stats down check tokend; do
	page=$R/usr/local/share/man/man8/sluice.8
	[ "$cmd" = tokend ] && page=$R/usr/local/share/man/man8/sluice-tokend.8
	man -l "$page" 2>/dev/null | col -b >"$T/page.txt"
	# shellcheck disable=SC2086
	for o in $("$BUILD/sluice" help $cmd | grep -o -- '--[a-z][a-z-]*' |
		   sort -u); do
		[ "$o" = --help ] && continue
		grep -q -- "$o" "$T/page.txt" || missing="$missing $cmd:$o"
	done
done
check $([ -z "$missing" ] && echo 0 || echo 1) \
	"every option of \`sluice help COMMAND\` is in its man page${missing:+; missing:$missing}"

# the Kubernetes DaemonSet
$PY - deploy/kubernetes/sluice-daemonset.yaml \
	deploy/kubernetes/sluice-teardown.yaml <<'PY' >"$T/k8s" 2>&1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
pod = ds["spec"]["template"]["spec"]
agent = next(c for c in pod["containers"] if c["name"] == "sluice-agent")
vols = {v["name"]: v for v in pod["volumes"]}
mounts = {m["mountPath"]: m["name"] for m in agent["volumeMounts"]}
caps = set(agent["securityContext"]["capabilities"]["add"])
probe = agent["readinessProbe"]["exec"]["command"]
problems = []
if not pod.get("hostNetwork"):
    problems.append("hostNetwork")
if vols[mounts.get("/sys/fs/bpf", "?")]["hostPath"]["path"] != "/sys/fs/bpf":
    problems.append("bpffs hostPath")
if vols[mounts.get("/var/lib/sluice", "?")]["hostPath"]["path"] != "/var/lib/sluice":
    problems.append("state hostPath")
if not {"BPF", "NET_ADMIN", "PERFMON"} <= caps:
    problems.append("capabilities %s" % sorted(caps))
if probe[-2:] != ["status", "--ready"]:
    problems.append("readiness probe %s" % probe)
if agent["securityContext"].get("privileged"):
    problems.append("privileged")
# the image of `make image`, where the package puts the binary
if not agent["image"].startswith("localhost/sluice:") or \
        agent["command"][0] != "/usr/sbin/sluice":
    problems.append("image %s command %s" % (agent["image"], agent["command"]))
# the teardown: sluice down from the same image, with the bpffs
td = next(d for d in yaml.safe_load_all(open(sys.argv[2])) if d)
tpod = td["spec"]["template"]["spec"]
init = tpod["initContainers"][0]
if "sluice down" not in " ".join(init["args"]) or init["image"] != agent["image"] \
        or init["volumeMounts"][0]["mountPath"] != "/sys/fs/bpf":
    problems.append("teardown")
print("ok" if not problems else "problems: " + ", ".join(problems))
PY
check $([ "$(cat "$T/k8s")" = ok ] && echo 0 || echo 1) \
	"deploy/kubernetes/sluice-daemonset.yaml parses and asks for what the agent needs: $(head -c 200 "$T/k8s")"

make -s uninstall DESTDIR="$R" BUILD="$BUILD" >>"$T/install.log" 2>&1
left=$(cd "$R" && find . -type f | sort | tr '\n' ' ')
check $([ "$left" = "./etc/default/sluice " ] && echo 0 || echo 1) \
	"make uninstall removes what install made, but the edited config: left ${left:-nothing}"
echo "1..$n"
