/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for the snapshot reader the agent runs at boot
 * (sl_snapshot_read): any file is refused with an error naming it, or
 * read to rules that serialise back to what its checksum covers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "rules_json.h"
#include "rules_parse.h"
#include "snapshot.h"

static char err[16384];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(data, size);
	struct sl_snapshot s = { 0 };
	struct sl_ruleset back = { 0 };
	char *json;

	if (sl_snapshot_read(path, &s, err, sizeof(err))) {
		if (strncmp(err, path, strlen(path)))
			abort(); /* the error does not name the file */
		return 0;
	}
	if (!s.version || s.version > SL_SNAPSHOT_VERSION_MAX ||
	    (s.source.etcd_key && !s.source.revision))
		abort();
	/* what the agent hands the writer again, "parsed" (snapshot.h) */
	json = sl_ruleset_to_json(&s.rules, false);
	if (!json || sl_rules_parse(json, strlen(json), &back, err,
				    sizeof(err)) ||
	    back.n != s.rules.n)
		abort();
	free(json);
	sl_ruleset_free(&back);
	sl_snapshot_free(&s);
	return 0;
}
