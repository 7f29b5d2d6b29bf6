/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for what sluice reads from etcd's JSON gateway: the
 * input as a watch stream, cut into chunks of 1-13 bytes and split into
 * frames, each parsed as a watch frame; and the input as a range and as
 * a txn answer. Any input is refused or yields values that hold what
 * they claim: a PUT's value NUL-terminated at its length, no value for a
 * DELETE or a missing key. Seeds: tests/fuzz/seeds/etcd/, from a real
 * etcd 3.4.23.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

#define KEY "/sluice/rules"

static void check_value(const char *value, size_t len, bool present)
{
	if (present != (value != NULL) || (value && value[len]))
		__builtin_trap();
}

static int on_frame(void *arg, const char *text, size_t len)
{
	struct sl_etcd_frame f;
	char err[256];

	if (!len || memchr(text, '\n', len))
		__builtin_trap();
	if (sl_etcd_parse_frame(text, len, KEY, &f, err, sizeof(err)))
		return 0;
	for (size_t i = 0; i < f.n_events; i++) {
		check_value(f.events[i].value, f.events[i].len,
			    f.events[i].type == SL_ETCD_PUT);
		if (f.events[i].mod_revision < 0)
			__builtin_trap();
	}
	sl_etcd_frame_free(&f);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sl_etcd_stream s = { 0 };
	size_t chunk = 1 + size % 13;
	struct sl_etcd_kv kv;
	int64_t rev;
	cJSON *doc;

	for (size_t off = 0; off < size; off += chunk)
		if (sl_etcd_stream_feed(&s, (const char *)data + off,
					size - off < chunk ? size - off : chunk,
					on_frame, NULL))
			break;
	/* each byte searched once, whatever the chunks */
	if (s.searched != size)
		__builtin_trap();
	sl_etcd_stream_free(&s);

	doc = cJSON_ParseWithLength((const char *)data, size);
	if (!sl_etcd_range_answer(doc, KEY, &kv)) {
		check_value(kv.value, kv.len, kv.exists);
		sl_etcd_kv_free(&kv);
	}
	if (sl_etcd_txn_answer(doc, &rev) != -EPROTO && rev < 0)
		__builtin_trap();
	cJSON_Delete(doc);
	return 0;
}
