#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `sluice check FILE`: validates a rule file offline (no root, no agent).
#   - every example in rules/ is valid and listed in precedence order;
#   - a bad file exits 1 naming the rule and the field (match.vlan and
#     breaker values too);
#   - a missing file exits 1 naming it; --help exits 0; an unknown option
#     or a wrong number of arguments exits 2 with the usage.
set -u
cd "$(dirname "$0")/../.."
source tests/lib/tap.sh
SLUICE=${BUILD:-build}/sluice
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

for f in rules/demo.json rules/examples/*.json; do
	[ -e "$f" ] || continue
	"$SLUICE" check "$f" >"$T/out" 2>&1
	rc=$?
	names=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rules"]))' "$f")
	listed=$(awk 'NR > 2 && $1 ~ /^[0-9]+$/' "$T/out" | wc -l)
	check $(( rc == 0 && listed == names ? 0 : 1 )) \
		"check $f: exit $rc, $listed of $names rules listed"
done

printf '{"rules":[{"name":"web","match":{"proto":"tcp","dport":80},"grade":"pps","count":100,"windw":{}}]}\n' >"$T/typo.json"
"$SLUICE" check "$T/typo.json" >"$T/out" 2>&1
rc=$?
grep -q "web" "$T/out" && grep -q "windw" "$T/out"
check $(( rc == 1 && $? == 0 ? 0 : 1 )) \
	"a misspelt field: exit $rc (want 1), the error names rule 'web' and field 'windw'"
show "$T/out" 3

# match.vlan: 0 and 4095 are reserved, and the only word is "untagged"
printf '{"rules":[%s,%s,%s]}\n' \
	'{"name":"v0","match":{"vlan":0},"grade":"pps","count":1}' \
	'{"name":"v4095","match":{"vlan":4095},"grade":"pps","count":1}' \
	'{"name":"vword","match":{"vlan":"none"},"grade":"pps","count":1}' \
	>"$T/vlan.json"
"$SLUICE" check "$T/vlan.json" >"$T/out" 2>&1
rc=$?
grep -q "rule 'v0': field 'match.vlan': must be between 1 and 4094, got 0" "$T/out" &&
grep -q "rule 'v4095': field 'match.vlan': must be between 1 and 4094, got 4095" "$T/out" &&
grep -q "rule 'vword': field 'match.vlan': 'none' is not a VLAN; use an id 1-4094 or \"untagged\"" "$T/out"
check $(( rc == 1 && $? == 0 ? 0 : 1 )) \
	"bad match.vlan values: exit $rc (want 1), each error names its rule and field"
show "$T/out" 4

# breaker: each strategy's own fields, and what a udp rule's cannot do
brk() { printf '{"name":"%s","match":{"proto":"%s","dport":8080},"grade":"pps","count":1,"breaker":%s}' "$@"; }
printf '{"rules":[%s,%s,%s,%s,%s,%s]}\n' \
	"$(brk nort tcp '{"strategy":"slow_request_ratio","threshold":0.5,"open_ms":100}')" \
	"$(brk rtcount tcp '{"strategy":"error_count","threshold":3,"max_rt_ms":50,"open_ms":100}')" \
	"$(brk rtzero tcp '{"strategy":"slow_request_ratio","threshold":0.5,"max_rt_ms":0,"open_ms":100}')" \
	"$(brk udpslow udp '{"strategy":"slow_request_ratio","threshold":0.5,"max_rt_ms":50,"open_ms":100}')" \
	"$(brk udprst udp '{"strategy":"error_ratio","threshold":0.5,"open_ms":100,"open_action":"rst"}')" \
	"$(printf '{"name":"anybrk","match":{},"grade":"pps","count":1,"breaker":%s}' \
		'{"strategy":"error_count","threshold":1,"open_ms":100}')" \
	>"$T/breaker.json"
"$SLUICE" check "$T/breaker.json" >"$T/out" 2>&1
rc=$?
grep -q "rule 'nort': field 'breaker.max_rt_ms': required with slow_request_ratio" "$T/out" &&
grep -q "rule 'rtcount': field 'breaker.max_rt_ms': only with strategy slow_request_ratio (strategy is 'error_count')" "$T/out" &&
grep -q "rule 'rtzero': field 'breaker.max_rt_ms': must be between 1 and 60000, got 0" "$T/out" &&
grep -q "rule 'udpslow': field 'breaker.strategy': slow_request_ratio times TCP responses and needs match.proto \"tcp\" (proto is 'udp')" "$T/out" &&
grep -q "rule 'udprst': field 'breaker.open_action': 'rst' answers TCP SYNs" "$T/out" &&
grep -q "rule 'anybrk': field 'breaker': watches the answers to TCP SYNs or UDP datagrams and needs match.proto \"tcp\" or \"udp\" (proto is 'any')" "$T/out"
check $(( rc == 1 && $? == 0 ? 0 : 1 )) \
	"bad breaker values: exit $rc (want 1), each error names its rule and field"
show "$T/out" 6

"$SLUICE" check "$T/none.json" >"$T/out" 2>&1
rc=$?
grep -q "none.json" "$T/out"
check $(( rc == 1 && $? == 0 ? 0 : 1 )) "a missing file: exit $rc (want 1), named in the error"

"$SLUICE" check --help >"$T/out" 2>&1
rc=$?
grep -q "usage: sluice check FILE" "$T/out"
check $(( rc == 0 && $? == 0 ? 0 : 1 )) "--help: exit $rc (want 0) with the usage"

for args in "--frobnicate" "" "a.json b.json"; do
	# shellcheck disable=SC2086
	"$SLUICE" check $args >"$T/out" 2>&1
	rc=$?
	grep -q "usage: sluice check FILE" "$T/out"
	check $(( rc == 2 && $? == 0 ? 0 : 1 )) \
		"check ${args:-(no file)}: exit $rc (want 2) with the usage"
done
# -j: the compiled rules as JSON in precedence order, settings included
"$SLUICE" check -j rules/examples/breaker.json >"$T/json" 2>"$T/err"
rc=$?
jq -e '[.rules[].rank] == [1, 2] and .rules[0].name == "db-syn-breaker" and
	.rules[1].breaker.strategy == "error_ratio" and .classes == 2' \
	"$T/json" >/dev/null
check $(( rc == 0 && $? == 0 ? 0 : 1 )) "check -j: exit $rc, ranked rules with their breaker as JSON"
check $([ -s "$T/err" ]; echo $((!$?))) "check -j of a clean file: nothing on stderr"
"$SLUICE" check rules/examples/breaker.json >"$T/out" 2>&1
grep -q '^breaker api-syn-breaker: {"strategy":"error_ratio",' "$T/out"
check $? "check prints each rule's breaker settings"
for f in system cluster; do
	"$SLUICE" check "rules/examples/$f.json" >"$T/out" 2>&1
	grep -q "^$f [a-z0-9-]*: {" "$T/out"
	check $? "check prints the $f settings of rules/examples/$f.json"
done

# - reads stdin
"$SLUICE" check - <rules/demo.json >"$T/out" 2>&1
rc=$?
grep -q '^<stdin>: ' "$T/out"
check $(( rc == 0 && $? == 0 ? 0 : 1 )) "check - reads stdin: exit $rc"

# warnings, on stderr, exit 0: a catch-all, a rule shadowed by an identical match
printf '{"rules":[%s,%s,%s,%s,%s]}\n' \
	'{"name":"all","match":{},"grade":"pps","count":100000}' \
	'{"name":"dns1","match":{"proto":"udp","dport":53},"grade":"pps","count":100}' \
	'{"name":"dns2","match":{"proto":"udp","dport":53},"grade":"pps","count":200}' \
	'{"name":"syn","match":{"proto":"tcp","dport":22},"grade":"cps","count":10}' \
	'{"name":"ssh","match":{"proto":"tcp","dport":22},"grade":"pps","count":1000}' \
	>"$T/warn.json"
"$SLUICE" check "$T/warn.json" >"$T/out" 2>"$T/err"
rc=$?
show "$T/err"
grep -q "^sluice: warning: rule 'all' matches every packet" "$T/err"
check $(( rc == 0 && $? == 0 ? 0 : 1 )) "a catch-all rule: a warning on stderr, exit $rc (want 0)"
grep -q "^sluice: warning: rule 'dns2' can never match: 'dns1'" "$T/err"
check $? "a rule with an earlier identical match: a warning naming both"
check $(( $(wc -l <"$T/err") == 2 ? 0 : 1 )) \
	"a cps rule before a pps rule of the same match shadows only SYNs: no warning"
check $(grep -q warning "$T/out"; echo $((!$?))) "warnings stay off stdout"

# a deny that a more specific limit of the same priority outranks on the
# packets both match: a warning naming it and how many more; none for
# the limits of another family or port, a higher priority, or an allow
# that wins by its priority (rules/examples/allow-deny.json)
printf '{"rules":[%s,%s,%s,%s,%s,%s]}\n' \
	'{"name":"bad-net","match":{"src":"198.19.0.0/16"},"action":"deny"}' \
	'{"name":"https","match":{"proto":"tcp","dport":443},"grade":"cps","count":4000}' \
	'{"name":"dns","match":{"proto":"udp","dport":53},"grade":"pps","count":100}' \
	'{"name":"v6-only","match":{"proto":"udp","dst":"2001:db8::/32"},"grade":"pps","count":100}' \
	'{"name":"other-net","match":{"proto":"tcp","src":"198.18.0.0/16"},"grade":"pps","count":100}' \
	'{"name":"boss","match":{"proto":"tcp","dport":22},"grade":"pps","count":100,"priority":5}' \
	>"$T/outranked.json"
# one_warning FILE WARNING WHAT: check FILE exits 0 with WARNING alone
one_warning()
{
	local rc

	"$SLUICE" check "$1" >"$T/out" 2>"$T/err"
	rc=$?
	show "$T/err"
	grep -qx "sluice: warning: $2" "$T/err"
	check $(( rc == 0 && $? == 0 && $(wc -l <"$T/err") == 1 ? 0 : 1 )) \
		"$3, exit $rc"
}
one_warning "$T/outranked.json" \
	"rule 'bad-net' (deny) does not judge the packets that 'https' (rank 4) and 1 more limit also match: more specific, they rank first; give 'bad-net' a priority to judge them all" \
	"a deny outranked by more specific limits: one warning naming the first and how many more"
"$SLUICE" check rules/examples/allow-deny.json >"$T/out" 2>"$T/err"
check $(( $? == 0 && $(wc -l <"$T/err") == 0 ? 0 : 1 )) \
	"allow and deny rules with a priority: no warning"

# layers: each layer's rules together, the chains counted; a same-match
# rule in another layer is not "never matches"; an aggregate limit in a
# layer before a per_source rule it overlaps is warned of
"$SLUICE" check rules/examples/layers.json >"$T/out" 2>"$T/err"
rc=$?
show "$T/out"
check $(( rc == 0 && $(wc -l <"$T/err") == 0 ? 0 : 1 )) \
	"rules/examples/layers.json: no warning, exit $rc"
check $(grep -q ', 2 chains of layers$' "$T/out" &&
	awk '$1 ~ /^[0-9]+$/ { print $2, $3 }' "$T/out" | tr '\n' ' ' |
	grep -qx '0 monitoring 0 syn-per-24 1 syn-service 2 syn-fleet '; echo $?) \
	"check lists the rules by layer, then precedence, and counts 2 chains"
"$SLUICE" check -j rules/examples/layers.json |
	jq -e '.chains == 2 and ([.rules[] | .layer // 0] == [0, 0, 1, 2])' >/dev/null
check $? "check -j: the chains, and each rule's layer in rank order"
printf '{"rules":[%s,%s]}\n' \
	'{"name":"service","match":{"proto":"tcp","dport":443},"grade":"cps","count":20000}' \
	'{"name":"per-24","match":{"proto":"tcp","dport":443},"grade":"cps","count":200,"layer":1,"per_source":{"prefix_v4":24,"max_sources":1000}}' \
	>"$T/layer-order.json"
one_warning "$T/layer-order.json" \
	"rule 'service' (layer 0) is charged for the packets that per_source rule 'per-24' (layer 1) then drops, so one source's flood spends it for all; put 'service' in a layer after 'per-24'" \
	"an aggregate layer before a per_source one: one warning"

# "$schema" for editors: accepted (a string), and the schema has an $id
printf '{"$schema":"rules/schema.json","rules":[%s]}\n' \
	'{"name":"dns","match":{"proto":"udp","dport":53},"grade":"pps","count":100}' \
	>"$T/schema.json"
"$SLUICE" check "$T/schema.json" >"$T/out" 2>&1
check $? "a rule file may carry \"\$schema\""
jq -e '."$id" and .properties."$schema".type == "string"' rules/schema.json >/dev/null
check $? "rules/schema.json has an \$id and allows \"\$schema\""

# the schema (generated from the field table) against the shipped files,
# which it must accept, and rules the parser refuses for what a schema
# can say, which it must refuse too
if python3 -c 'import jsonschema' 2>/dev/null; then
	python3 - rules/schema.json rules/demo.json rules/examples/*.json >"$T/schema.out" 2>&1 <<'PY'
import json, sys
from jsonschema import Draft202012Validator
v = Draft202012Validator(json.load(open(sys.argv[1])))
for f in sys.argv[2:]:
    errs = list(v.iter_errors(json.load(open(f))))
    print(f"{f} {len(errs)}", *[e.message[:100] for e in errs], sep="\n# ")
bad = {
    "allow with a count": {"action": "allow", "count": 5},
    "deny with per_source": {"action": "deny", "per_source": {"max_sources": 9}},
    "shadow allow": {"action": "allow", "mode": "shadow"},
    "a limit without a grade": {"count": 5},
    "cps on udp": {"match": {"proto": "udp"}, "grade": "cps", "count": 5},
    "an unknown action": {"action": "block"},
}
for what, r in bad.items():
    rule = {"name": "x", "match": {}}
    rule.update(r)
    print(f"bad {what!r} {len(list(v.iter_errors({'rules': [rule]})))}")
PY
	awk '(!/^(bad|#)/ && $2 != 0) || (/^bad/ && $NF == 0)' "$T/schema.out" |
		sed 's/^/#   /' | head -20
	check $(awk '!/^(bad|#)/ && $2 != 0 { bad = 1 } END { exit bad }' "$T/schema.out"; echo $?) \
		"rules/schema.json accepts demo.json and every example ($(grep -vc '^bad\|^#' "$T/schema.out") files)"
	check $(awk '/^bad/ && $NF == 0 { bad = 1 } END { exit bad }' "$T/schema.out"; echo $?) \
		"rules/schema.json refuses allow with a count, deny with per_source, shadow allow, a limit without a grade, cps on udp, an unknown action"
else
	skip "rules/schema.json against the examples" "no python3-jsonschema"
fi

# errors carry the documented prefix
"$SLUICE" check "$T/typo.json" 2>&1 >/dev/null | head -1 | grep -q '^sluice: error: '
check $? "an invalid file: the error starts with 'sluice: error:'"
echo "1..$n"
