/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libFuzzer target for what sluice reads from etcd's JSON gateway: the
 * input as a watch stream, cut into chunks of 1-13 bytes and split into
 * frames, each parsed as a watch frame; the input as a range and as
 * a txn answer; and as a value of the key that may be a manifest
 * (manifest.c), which parses only into what agents can check against. Any input is refused or yields values that hold what
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
#include "manifest.h"

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
	struct sl_manifest m;
	struct sl_etcd_kv kv;
	char err[256];
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

	if (!sl_manifest_parse((const char *)data, size, &m, err,
			       sizeof(err))) {
		if (strlen(m.sha256) != SL_SHA256_HEX_LEN ||
		    strspn(m.sha256, "0123456789abcdef") != SL_SHA256_HEX_LEN ||
		    m.size > SL_MANIFEST_BODY_MAX || m.n_urls < 1 ||
		    m.n_urls > SL_MANIFEST_MAX_URLS)
			__builtin_trap();
		for (int i = 0; i < m.n_urls; i++)
			if (strncmp(m.url[i], "http://", 7) &&
			    strncmp(m.url[i], "https://", 8))
				__builtin_trap();
	}
	return 0;
}
