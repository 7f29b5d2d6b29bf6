#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The layering of user/ (docs/architecture.md) is the Makefile's include
# paths: each part compiles a header of every part it may use, and a
# header of a part above it does not resolve (lib cannot reach a service,
# a service cannot reach the data plane). Within user/dp, a file includes
# only the headers before its own in the parts' order, so no include
# cycle can form. Compiles headers only; needs gcc and make.
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

# user/dp: the order of its parts (docs/architecture.md's map)
ORDER="dataplane layout pins attach sources conns rule_cpu upgrade apply stats
       explain drop_ring loader"
bad=""
for f in user/dp/*.[ch]; do
	stem=$(basename "${f%.*}")
	self=$(echo $ORDER | tr ' ' '\n' | grep -nx "$stem" | cut -d: -f1)
	if [ -z "$self" ]; then
		bad="$bad $f(not in the order)"
		continue
	fi
	for h in $(sed -n 's/^#include "\([a-z_]*\)\.h"$/\1/p' "$f"); do
		[ -e "user/dp/$h.h" ] || continue
		rank=$(echo $ORDER | tr ' ' '\n' | grep -nx "$h" | cut -d: -f1)
		if [ "$h" != "$stem" ] && { [ -z "$rank" ] || [ "$rank" -ge "$self" ]; }; then
			bad="$bad $f->$h.h"
		fi
	done
done
check "$([ -z "$bad" ]; echo $?)" "user/dp: each file includes only the parts before it (${bad:- none out of order})"
echo "1..$n"
