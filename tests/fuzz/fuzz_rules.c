/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for the rule document parser (`sluice check`, the
 * agent's rule files and requests): any input is refused with an error
 * or parses to rules whose canonical JSON parses back to the same text,
 * which the snapshot writer relies on (snapshot.h, "parsed").
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules_json.h"
#include "rules_parse.h"

static char err[16384];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_ruleset rs = { 0 }, back = { 0 };
	char *json, *again;

	if (sl_rules_parse((const char *)data, size, &rs, err, sizeof(err))) {
		if (!err[0])
			abort(); /* refused without saying why */
		return 0;
	}
	json = sl_ruleset_to_json(&rs, false);
	if (!json)
		abort();
	if (sl_rules_parse(json, strlen(json), &back, err, sizeof(err)))
		abort(); /* its own output does not read back */
	again = sl_ruleset_to_json(&back, false);
	if (!again || strcmp(json, again) || back.n != rs.n)
		abort();
	free(again);
	free(json);
	sl_ruleset_free(&back);
	sl_ruleset_free(&rs);
	return 0;
}
