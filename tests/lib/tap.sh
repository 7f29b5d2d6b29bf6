# SPDX-License-Identifier: GPL-2.0
# TAP output for shell suites, sourced by tests/integration/*.sh:
#   check STATUS DESCRIPTION   "ok N - ..." when STATUS is 0, else "not ok"
#   skip DESCRIPTION REASON    "ok N - ... # SKIP REASON"
#   show FILE [LINES]          the head of FILE as TAP comments
# VM is set in the qemu guests of `make vmtest` (SLUICE_VM=1), where rates
# against the wall clock mean nothing; VMWHY says so in skip lines.

n=0
check()
{
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - ${*:2}"; else echo "not ok $n - ${*:2}"; fi
}
skip()
{
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}
show() { sed 's/^/#   /' "$1" | head -n "${2:-6}"; }

# Debian's python3 (make deps) before any other: a version manager's shim
# (pyenv's) spends about 0.4 s starting each interpreter, and the suites
# start hundreds, some of them inside timed windows
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

VM=${SLUICE_VM:-}
VMWHY="measures rates against the wall clock, and a TCG guest runs 10-100x slower"
