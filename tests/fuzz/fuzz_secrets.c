/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for the secrets file reader (tokend, the agent's
 * --secrets and SIGHUP): any file is refused with an error naming it and
 * the line, or read whole (no NUL cuts it short) to namespaces that are
 * valid, unique, with one or two secrets of a valid length each.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "secrets.h"

static char err[512];

static void check(const struct sl_secrets *s)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct sl_secret *e = &s->v[i];

		if (!e->ns[0] || strlen(e->ns) > 63 ||
		    sl_secrets_find(s, e->ns) != e || e->n_keys < 1 ||
		    e->n_keys > SL_SECRET_KEYS)
			abort();
		for (size_t k = 0; k < e->n_keys; k++)
			if (e->len[k] < SL_SECRET_MIN ||
			    e->len[k] > SL_SECRET_MAX)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(data, size);
	struct sl_secrets s = { 0 };

	if (sl_secrets_load(path, &s, err, sizeof(err))) {
		if (strncmp(err, path, strlen(path)))
			abort(); /* the error does not name the file */
		return 0;
	}
	if (memchr(data, '\0', size))
		abort(); /* the lines after a NUL went unread */
	check(&s);
	sl_secrets_free(&s);
	return 0;
}
