#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The runbook (docs/operations.md, "Runbook") quotes only what is real:
# every `sluice_...` metric it names is documented in docs/metrics.md and
# emitted by the source, every `Sluice...` alert exists in docs/alerts.yml,
# every alert there has a runbook entry, every entry has the four parts,
# and every link to a heading of operations.md finds it. Reads files
# only: no root, no network, no kernel.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

OPS=${RUNBOOK_OPS:-docs/operations.md}
T=$(mktemp -d /tmp/runbook.XXXXXX)
trap 'rm -rf "$T"' EXIT

# One "STATUS<TAB>DESCRIPTION" line per check, printed as TAP below.
python3 - "$OPS" docs/metrics.md docs/alerts.yml >"$T/checks" <<'PY'
import fnmatch, glob, itertools, re, sys

ops_path, metrics_md, alerts_yml = sys.argv[1:4]
ops = open(ops_path).read()
mdoc = open(metrics_md).read()
# the files whose metric families are the scrape (metrics.c writes them)
SOURCES = ["user/agent/metrics.c", "user/tokensrv/metrics.c",
           "user/lib/metrics.c", "user/svc/etcd_source.c"]
src = "".join(open(f).read() for f in SOURCES)
# not metrics: the snapshot's format field (docs/operations.md, "Format")
NOT_METRICS = {"sluice_snapshot": "user/lib/snapshot.c"}

def code_spans(text):
    """Text inside fenced blocks and inline backticks."""
    out = re.findall(r"(?ms)^```[^\n]*\n(.*?)^```", text)
    rest = re.sub(r"(?ms)^```[^\n]*\n.*?^```", "", text)
    out += [m.group(2) for m in
            re.finditer(r"(?s)(`+)(.+?)(?<!`)\1(?!`)", rest)]
    return out

def emitted():
    names = set(re.findall(r'"(sluice_[a-z0-9_]+)"', src))
    # the host counters are one template over the data plane's names
    # (user/dp/stats.c); the malformed_* ones are one labelled family
    if '"sluice_packets_%s_total"' in src:
        stats = open("user/dp/stats.c").read()
        for s in re.findall(r'\] = "([a-z0-9_]+)"', stats):
            if not s.startswith("malformed_"):
                names.add("sluice_packets_%s_total" % s)
    return names

# documented: the first cell of a table row, and its type
documented = dict(re.findall(r"(?m)^\| `(sluice_[a-z0-9_]+)` \| (\w+) \|",
                             mdoc))
src_names = emitted()

def expand(tok):
    """A grep pattern's (a|b) groups and ? into names; '*' stays a glob."""
    parts = re.split(r"(\([a-z0-9_|]*\)\??)", tok)
    choices = []
    for p in parts:
        if p.startswith("("):
            alts = p.rstrip("?")[1:-1].split("|")
            choices.append(alts + ([""] if p.endswith("?") else []))
        else:
            choices.append([p])
    return ["".join(c) for c in itertools.product(*choices)]

def base_of(name):
    """The family a sample name belongs to, as metrics.md lists it."""
    if name in documented:
        return name
    for suf in ("_bucket", "_sum", "_count"):
        b = name[: -len(suf)]
        if name.endswith(suf) and documented.get(b) == "histogram":
            return b
    if documented.get(name + "_total") == "counter":
        return name + "_total"
    return None

TOK = r"sluice_[a-z0-9_]*(?:\([a-z0-9_|]*\)\??[a-z0-9_]*)*(?:\*[a-z0-9_]*)*"
names, globs = set(), set()
for span in code_spans(ops):
    for tok in re.findall(TOK, span):
        for n in expand(tok):
            (globs if "*" in n else names).add(n)

for n in sorted(names):
    if n in NOT_METRICS:
        ok = ('"%s"' % n) in open(NOT_METRICS[n]).read()
        print("%d\t%s: not a metric, a field of %s" %
              (0 if ok else 1, n, NOT_METRICS[n]))
        continue
    b = base_of(n)
    why = []
    if not b:
        why.append("not in metrics.md")
    elif b not in src_names:
        why.append("not emitted by " + ", ".join(SOURCES))
    print("%d\tmetric %s%s: documented and emitted%s" %
          (1 if why else 0, n, " (%s)" % b if b and b != n else "",
           "; " + "; ".join(why) if why else ""))
for g in sorted(globs):
    hits = [d for d in documented if fnmatch.fnmatchcase(d, g)]
    print("%d\tpattern %s: matches %d documented metrics" %
          (0 if hits else 1, g, len(hits)))

alerts = re.findall(r"(?m)^\s*- alert: (\w+)", open(alerts_yml).read())
quoted = set()
for span in code_spans(ops):
    quoted |= set(re.findall(r"\bSluice[A-Z]\w*", span))
for a in sorted(quoted):
    print("%d\talert %s exists in %s" % (0 if a in alerts else 1, a,
                                          alerts_yml))
m = re.search(r"(?ms)^## Runbook\n(.*?)(?=^## |\Z)", ops)
runbook = m.group(1) if m else ""
entries = re.split(r"(?m)^### ", runbook)[1:]
# named in an entry, not only in the index table above them
in_runbook = set()
for span in code_spans("".join(entries)):
    in_runbook |= set(re.findall(r"\bSluice[A-Z]\w*", span))
for a in alerts:
    print("%d\talert %s has a runbook entry" %
          (0 if a in in_runbook else 1, a))
parts = ("**What you see.**", "**What sluice does meanwhile.**",
         "**Confirm.**", "**Do.**")
print("%d\tthe runbook has entries: %d" % (0 if entries else 1,
                                           len(entries)))
for e in entries:
    title = e.splitlines()[0]
    miss = [p.strip("*.") for p in parts if p not in e]
    print("%d\tentry '%s' has what you see, meanwhile, confirm, do%s" %
          (1 if miss else 0, title,
           "; missing: " + ", ".join(miss) if miss else ""))
# links into the runbook: GitHub's anchors of the headings
def anchor(h):
    h = re.sub(r"[^\w\- ]", "", h.strip().lower())
    return h.replace(" ", "-")
anchors = {anchor(h) for h in re.findall(r"(?m)^#+ (.*)$", ops)}
links = set(re.findall(r"\]\(#([^)]+)\)", ops))
for f in ["README.md"] + glob.glob("docs/*.md"):
    links |= set(re.findall(r"operations\.md#([A-Za-z0-9_\-]+)",
                            open(f).read()))
for l in sorted(links):
    print("%d\tlink operations.md#%s has its heading" %
          (0 if l in anchors else 1, l))
PY
rc=$?
check $rc "read $OPS, docs/metrics.md, docs/alerts.yml and the metrics' source"
while IFS=$'\t' read -r st desc; do
	check "$st" "$desc"
done <"$T/checks"
echo "1..$n"
