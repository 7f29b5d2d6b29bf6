#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs test suites that speak TAP ("ok N - name", "not ok N - name",
# "ok N - name # SKIP reason") and prints one closing line:
#   N passed, N failed, N skipped
# Usage: tests/run.sh SUITE_CMD...   (each argument is one shell command)
set -u
# Debian's python3 first, as tests/lib/tap.sh says why
[ -x /usr/bin/python3 ] && export PATH=/usr/bin:$PATH
logdir=${SLUICE_TEST_LOGS:-build/test-logs}
mkdir -p "$logdir"
pass=0 fail=0 skip=0
failed=()
i=0
for suite in "$@"; do
	i=$((i + 1))
	log="$logdir/suite-$i.log"
	echo "# suite: $suite"
	t0=$SECONDS
	bash -c "$suite" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	# what each suite takes of the run's time
	echo "# suite took $((SECONDS - t0)) s"
	p=$(grep -cE '^ok [0-9]+' "$log" | tr -d ' ')
	s=$(grep -cE '^ok [0-9]+.*# *SKIP' "$log" | tr -d ' ')
	f=$(grep -cE '^not ok [0-9]+' "$log" | tr -d ' ')
	p=$((p - s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - suite '$suite' exited $rc without reporting a failure" |
			tee -a "$log"
		f=1
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	[ "$f" -eq 0 ] ||
		failed+=("# $suite:" "$(grep -E '^not ok' "$log" | head -n 20 |
			sed 's/^/#   /')")
done
# the failures again, by suite, as TAP comments: a long log's tail is
# what CI shows
[ ${#failed[@]} -eq 0 ] || printf '%s\n' "# what failed:" "${failed[@]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
