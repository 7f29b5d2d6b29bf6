#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs libFuzzer targets for a bounded time each; one TAP line per target.
#   tests/fuzz/run.sh NAME...   ($BUILD/fuzz/fuzz_NAME; none: every
#                                tests/fuzz/fuzz_*.c)
#   FUZZ_SECONDS (default 15 each: make test runs six in about 100 s)
# Each reads its committed seeds (tests/fuzz/seeds/NAME) and the corpus
# it grew in earlier runs ($BUILD/fuzz/corpus-NAME, where new inputs go),
# with tests/fuzz/NAME.dict as its dictionary if there is one.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
BUILD=${BUILD:-build}
secs=${FUZZ_SECONDS:-15}
dir=tests/fuzz

# Seeds kept elsewhere in the tree, read in place so they follow the
# format: the shipped rule files; and the dictionaries a target adds.
more_seeds()
{
	case $1 in
	rules) echo rules deploy/etc/sluice ;;
	esac
}
more_dicts()
{
	case $1 in
	snapshot | ctl) echo "$dir/rules.dict" ;;
	esac
}

if [ $# -eq 0 ]; then
	set -- $(ls $dir/fuzz_*.c | sed 's|.*/fuzz_\(.*\)\.c|\1|')
fi
echo "1..$#"
for name in "$@"; do
	bin=$BUILD/fuzz/fuzz_$name
	corpus=$BUILD/fuzz/corpus-$name
	log=$BUILD/fuzz/fuzz_$name.log
	dict=$BUILD/fuzz/$name.dict
	mkdir -p "$corpus"
	cat $(more_dicts "$name") /dev/null \
		$(ls "$dir/$name.dict" 2>/dev/null) >"$dict"
	opts=()
	[ -s "$dict" ] && opts=(-dict="$dict")
	if [ ! -x "$bin" ]; then
		check 1 "fuzz: $name: $bin is not built"
		continue
	fi
	if "$bin" -max_total_time="$secs" -max_len=8192 -timeout=10 \
		"${opts[@]}" -artifact_prefix="$BUILD/fuzz/$name-" \
		-print_final_stats=1 "$corpus" \
		$(ls -d "$dir/seeds/$name" 2>/dev/null) \
		$(more_seeds "$name") >"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		check 0 "fuzz: $name, ${secs}s, ${runs:-?} inputs, no crash"
	else
		check 1 "fuzz: $name failed (reproducer in $BUILD/fuzz/$name-*)"
		grep -A20 -E 'ERROR|abort|deadly|runtime error' "$log" |
			show /dev/stdin 30
	fi
done
