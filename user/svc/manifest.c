// SPDX-License-Identifier: GPL-2.0
/* Rule manifests (manifest.h, docs/fleet.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "etcd.h"
#include "manifest.h"

#define MANIFEST_TEXT_MAX 65536 /* a manifest is a few hundred bytes */

static bool is_hex64(const char *s)
{
	if (strlen(s) != SL_SHA256_HEX_LEN)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static bool is_http_url(const char *s)
{
	return (!strncmp(s, "http://", 7) && s[7]) ||
	       (!strncmp(s, "https://", 8) && s[8]);
}

int sl_manifest_parse(const char *text, size_t len, struct sl_manifest *m,
		      char *err, size_t errlen)
{
	const cJSON *ver, *sha, *size, *rules, *urls, *u;
	cJSON *doc;
	int ret = -EINVAL;

	memset(m, 0, sizeof(*m));
	/* a rule file is a JSON object too: only the member tells */
	if (len > MANIFEST_TEXT_MAX ||
	    !memmem(text, len, "sluice_manifest", 15))
		return -ENOMSG;
	doc = cJSON_ParseWithLength(text, len);
	ver = cJSON_GetObjectItemCaseSensitive(doc, "sluice_manifest");
	if (!cJSON_IsObject(doc) || !ver) {
		cJSON_Delete(doc);
		return -ENOMSG;
	}
	sha = cJSON_GetObjectItemCaseSensitive(doc, "sha256");
	size = cJSON_GetObjectItemCaseSensitive(doc, "size");
	rules = cJSON_GetObjectItemCaseSensitive(doc, "rules");
	urls = cJSON_GetObjectItemCaseSensitive(doc, "urls");
	if (!cJSON_IsNumber(ver) || ver->valuedouble != SL_MANIFEST_VERSION)
		sl_set_err(err, errlen, "a manifest of a version this sluice "
			"does not know (it knows %d)", SL_MANIFEST_VERSION);
	else if (!cJSON_IsString(sha) || !is_hex64(sha->valuestring))
		sl_set_err(err, errlen, "a manifest without \"sha256\" (64 "
			"lower-case hex digits)");
	else if (!cJSON_IsNumber(size) || size->valuedouble < 0 ||
		 size->valuedouble > SL_MANIFEST_BODY_MAX ||
		 size->valuedouble != (uint64_t)size->valuedouble)
		sl_set_err(err, errlen, "a manifest without \"size\" (bytes, "
			"64 MiB at most)");
	else if (!cJSON_IsArray(urls) || !cJSON_GetArraySize(urls) ||
		 cJSON_GetArraySize(urls) > SL_MANIFEST_MAX_URLS)
		sl_set_err(err, errlen, "a manifest without \"urls\" (1 to %d "
			"http:// or https:// URLs)", SL_MANIFEST_MAX_URLS);
	else
		ret = 0;
	cJSON_ArrayForEach(u, urls) {
		if (ret)
			break;
		if (!cJSON_IsString(u) || !is_http_url(u->valuestring) ||
		    strlen(u->valuestring) >= SL_MANIFEST_URL_MAX) {
			sl_set_err(err, errlen, "a manifest URL that is not "
				"http:// or https://");
			ret = -EINVAL;
			break;
		}
		strcpy(m->url[m->n_urls++], u->valuestring);
	}
	if (!ret) {
		strcpy(m->sha256, sha->valuestring);
		m->size = size->valuedouble;
		m->rules = cJSON_IsNumber(rules) && rules->valuedouble > 0
				   ? rules->valuedouble : 0;
	}
	cJSON_Delete(doc);
	return ret;
}

char *sl_manifest_build(const char *body, size_t len, uint64_t n_rules,
			const char *bases, struct sl_manifest *m, char *err,
			size_t errlen)
{
	char sha[SL_SHA256_HEX_LEN + 1];
	const char *cur = bases, *item;
	cJSON *doc, *urls;
	char *text = NULL;
	size_t n;

	memset(m, 0, sizeof(*m));
	sl_sha256_hex(body, len, sha);
	strcpy(m->sha256, sha);
	m->size = len;
	m->rules = n_rules;
	while (sl_list_next(&cur, &item, &n)) {
		while (n && item[n - 1] == '/')
			n--;
		if (m->n_urls == SL_MANIFEST_MAX_URLS ||
		    n + SL_SHA256_HEX_LEN + 7 >= SL_MANIFEST_URL_MAX) {
			sl_set_err(err, errlen, "--body-url: at most %d URLs, "
				"each shorter than %d bytes",
				SL_MANIFEST_MAX_URLS, SL_MANIFEST_URL_MAX - 72);
			return NULL;
		}
		snprintf(m->url[m->n_urls], SL_MANIFEST_URL_MAX, "%.*s/%s.json",
			 (int)n, item, sha);
		if (!is_http_url(m->url[m->n_urls]) || !n) {
			sl_set_err(err, errlen, "--body-url '%.*s': not an "
				"http:// or https:// URL", (int)n, item);
			return NULL;
		}
		m->n_urls++;
	}
	if (!m->n_urls) {
		sl_set_err(err, errlen, "--body-url: no URL");
		return NULL;
	}
	doc = cJSON_CreateObject();
	if (doc && cJSON_AddNumberToObject(doc, "sluice_manifest",
					   SL_MANIFEST_VERSION) &&
	    cJSON_AddStringToObject(doc, "sha256", m->sha256) &&
	    cJSON_AddNumberToObject(doc, "size", len) &&
	    cJSON_AddNumberToObject(doc, "rules", n_rules) &&
	    (urls = cJSON_AddArrayToObject(doc, "urls"))) {
		for (int i = 0; i < m->n_urls; i++)
			cJSON_AddItemToArray(urls,
					     cJSON_CreateString(m->url[i]));
		text = cJSON_PrintUnformatted(doc);
	}
	cJSON_Delete(doc);
	if (!text)
		sl_set_err(err, errlen, "out of memory");
	return text;
}

int sl_manifest_fetch(const struct sl_etcd *e, const struct sl_manifest *m,
		      unsigned int first, int *used, char **out, size_t *len,
		      char *err, size_t errlen)
{
	char hex[SL_SHA256_HEX_LEN + 1];
	bool other_bytes = false;
	int ret = -EIO;

	*out = NULL;
	for (int k = 0; k < m->n_urls; k++) {
		int i = (first + k) % m->n_urls;
		const char *url = m->url[i];
		char *body;
		size_t n;

		ret = sl_etcd_fetch_url(e, url, m->size, &body, &n, err,
					errlen);
		if (ret == -ENOMEM)
			return ret;
		if (ret == -EFBIG) {
			sl_set_err(err, errlen, "%s: more than the manifest's "
				   "%llu bytes; not applied", url,
				   (unsigned long long)m->size);
			other_bytes = true;
		}
		if (ret)
			continue;
		sl_sha256_hex(body, n, hex);
		if (n == m->size && !strcmp(hex, m->sha256)) {
			*out = body;
			*len = n;
			*used = i;
			return 0;
		}
		free(body);
		sl_set_err(err, errlen, "%s: %zu bytes of sha256 %.12s..., the "
			"manifest says %llu bytes of sha256 %.12s...; not "
			"applied", url, n, hex, (unsigned long long)m->size,
			m->sha256);
		other_bytes = true;
	}
	/* err: the last URL's reason */
	return other_bytes ? -EBADMSG : ret;
}
