#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The layering of user/ (docs/architecture.md) is the Makefile's include
# paths: each part compiles a header of every part it may use, and a
# header of a part above it does not resolve (lib cannot reach a service,
# a service cannot reach the data plane). Within user/dp and bpf/, a file
# includes only the headers before its own in the parts' order, so no
# include cycle can form. No product .c grows past 1,000 lines. Compiles
# headers only; needs gcc and make.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

PARTS="lib svc dp tokensrv tokend agent cli"
declare -A flags
while IFS='=' read -r part f; do
	flags[$part]=$f
done < <(make -s --no-print-directory --eval='inc-all: ; @$(foreach p,'"$PARTS"',echo "$(p)=$(INC_$(p))";)' inc-all 2>/dev/null)
# one header of each part, a probe that includes nothing of another part
declare -A probe=([lib]=util.h [svc]=etcd.h [dp]=dataplane.h
		  [tokensrv]=tokensrv.h [tokend]=tokend.h [agent]=agent.h
		  [cli]=cli.h)
declare -A may=([lib]="lib" [svc]="lib svc" [dp]="lib dp"
		[tokensrv]="lib svc tokensrv"
		[tokend]="lib svc tokensrv tokend"
		[agent]="lib svc dp tokensrv agent" [cli]="lib svc dp cli")
ERR=$(mktemp /tmp/layers.XXXXXX)
trap 'rm -f "$ERR"' EXIT

for part in $PARTS; do
	if [ -z "${flags[$part]:-}" ]; then
		check 1 "$part: the Makefile has INC_$part"
		continue
	fi
	for other in $PARTS; do
		h=${probe[$other]}
		echo "#include \"$h\"" |
			gcc -std=gnu11 -D_GNU_SOURCE ${flags[$part]} -fsyntax-only -x c - \
			    2>"$ERR"
		rc=$?
		if [[ " ${may[$part]} " == *" $other "* ]]; then
			check "$rc" "$part may include $other ($h compiles)"
			[ "$rc" = 0 ] || show "$ERR"
		else
			grep -q "$h: No such file" "$ERR"
			check "$?" "$part may not include $other ($h does not resolve)"
		fi
	done
done

# user/dp and bpf/: the order of their parts (docs/architecture.md's map);
# a file includes only the parts before its own, so no cycle can form
in_order() { # DIR ORDER: prints each include out of order
	local dir=$1 order=$2 f stem self h rank
	for f in "$dir"/*.[ch]; do
		stem=$(basename "${f%.*}")
		stem=${stem%.bpf}
		self=$(echo $order | tr ' ' '\n' | grep -nx "$stem" | cut -d: -f1)
		if [ -z "$self" ]; then
			printf ' %s(not in the order)' "$f"
			continue
		fi
		for h in $(sed -n 's/^#include "\([a-z_]*\)\.h"$/\1/p' "$f"); do
			[ -e "$dir/$h.h" ] || continue
			rank=$(echo $order | tr ' ' '\n' | grep -nx "$h" | cut -d: -f1)
			if [ "$h" != "$stem" ] && { [ -z "$rank" ] || [ "$rank" -ge "$self" ]; }; then
				printf ' %s' "$f->$h.h"
			fi
		done
	done
}
bad=$(in_order user/dp "dataplane layout pins attach sources conns rule_cpu
			upgrade apply stats explain drop_ring loader")
check "$([ -z "$bad" ]; echo $?)" "user/dp: each file includes only the parts before it (${bad:- none out of order})"
bad=$(in_order bpf "consts sluice_abi maps parse classify admit source breaker
		   conns frag explain_xdp sluice")
check "$([ -z "$bad" ]; echo $?)" "bpf: each file includes only the parts before it (${bad:- none out of order})"

# a file of one concern stays readable: no product .c over 1,000 lines
long=$(wc -l bpf/*.c user/*.c user/*/*.c | awk '$2 != "total" && $1 > 1000 { printf " %s(%d)", $2, $1 }')
check "$([ -z "$long" ]; echo $?)" "no product .c file over 1,000 lines (${long:- none})"
echo "1..$n"
