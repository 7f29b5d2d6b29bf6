#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# docs/architecture.md's map of the tree is the tree: every source file of
# bpf/ and user/ is named in it (by its name, or in the row of its folder
# by its stem or its sibling: `loader` or `loader.c` for user/dp/loader.h),
# and every path it names exists. Reads files only.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

T=$(mktemp /tmp/docs_map.XXXXXX)
trap 'rm -f "$T"' EXIT
python3 - docs/architecture.md >"$T" <<'PY'
import glob, os, re, sys

doc = open(sys.argv[1]).read()
m = re.search(r"^## A map of the tree\n(.*?)^## ", doc, re.S | re.M)
rows = [l for l in (m.group(1) if m else "").splitlines() if l.startswith("| `")]
if not rows:
    print("1\tthe map of the tree (a table under '## A map of the tree') is missing")
    sys.exit()
# each row: the folders or files of its first cell, the names of the row
def names(text):
    return set(re.findall(r"`([^`]+)`", text))
files = sorted(glob.glob("bpf/*.[ch]") + glob.glob("user/*.[ch]") +
               glob.glob("user/*/*.[ch]"))
missing = []
for f in files:
    d, base = os.path.split(f)
    stem = os.path.splitext(base)[0]
    found = False
    for r in rows:
        first, rest = r.split("|")[1], "|".join(r.split("|")[2:])
        heads = names(first)
        here = any(h == f or h.rstrip("/") == d or
                   (h.startswith(d + "/") and h.endswith(base)) for h in heads)
        shortcut = any(h == base or os.path.join(d, h) == f for h in heads)
        said = names(rest) | heads
        if (here and ({base, stem, stem + ".c", stem + ".h"} & said or
                      f in heads)) or shortcut:
            found = True
            break
    if not found:
        missing.append(f)
print("%d\tevery source file is in the map (%d files%s)" %
      (bool(missing), len(files),
       "; missing: " + ", ".join(missing) if missing else ""))
# names the map gives as paths of the tree (a slash, an extension)
gone = []
for r in rows:
    for n in names(r):
        if re.fullmatch(r"(bpf|user|tests|deploy|docs|rules|vmtest)/[\w./-]+", n) \
                and "*" not in n and not os.path.exists(n):
            gone.append(n)
print("%d\tevery path the map names exists%s" %
      (bool(gone), " (gone: " + ", ".join(sorted(set(gone))) + ")" if gone else ""))
PY
while IFS=$'\t' read -r st what; do
	check "$st" "$what"
done <"$T"
echo "1..$n"
