#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The alerting rules (docs/alerts.yml, docs/metrics.md "Alerts"): promtool
# accepts them, and each alert fires where it should and nowhere else
# (tests/alerts/alerts_test.yml). No namespace, no traffic.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh

if ! command -v promtool >/dev/null; then
	skip "alerting rules" "no promtool (Debian: prometheus)"
	echo "1..$n"
	exit 0
fi
T=$(mktemp -d /tmp/alerts.XXXXXX)
trap 'rm -rf "$T"' EXIT

promtool check rules docs/alerts.yml >"$T/check" 2>&1
check $? "promtool check rules docs/alerts.yml: $(grep -o '[0-9]* rules found' "$T/check")"
show "$T/check" 4
promtool test rules tests/alerts/alerts_test.yml >"$T/test" 2>&1
rc=$?
check $rc "promtool test rules tests/alerts/alerts_test.yml: one group per alert, firing and not"
[ $rc = 0 ] || show "$T/test" 30
# an alert added without a test of each way is caught here
missing=$(python3 - docs/alerts.yml tests/alerts/alerts_test.yml <<'PY'
import sys, yaml
alerts = {r["alert"] for g in yaml.safe_load(open(sys.argv[1]))["groups"]
          for r in g["rules"] if "alert" in r}
fires, quiet = set(), set()
for t in yaml.safe_load(open(sys.argv[2]))["tests"]:
    for a in t.get("alert_rule_test", []):
        (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
print(" ".join(sorted(alerts - (fires & quiet))))
PY
)
check $([ -z "$missing" ] && echo 0 || echo 1) \
	"every alert has a case where it fires and one where it does not${missing:+; not: $missing}"
echo "1..$n"
