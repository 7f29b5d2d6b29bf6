/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal to the etcd client (etcd.h): what its files call of each
 * other. etcd.c: the client, its TLS and user, and the calls over the
 * gateway (libcurl); etcd_kv.c: the key's value, leases and the
 * election's keys; etcd_watch.c: the watch stream.
 */
#ifndef SLUICE_ETCD_INT_H
#define SLUICE_ETCD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "etcd.h"

/* etcd.c */
void etcd_drop_token(struct sl_etcd *e);
size_t etcd_collect(char *p, size_t size, size_t n, void *arg);
CURL *etcd_new_handle(const struct sl_etcd *e, const char *url,
		      const char *body, struct curl_slist **hdrs, char *detail);
const char *etcd_gateway_error(const cJSON *doc);
void etcd_curl_failed(char *err, size_t errlen, const char *where, CURLcode rc,
		      const char *detail);
int etcd_authenticate(struct sl_etcd *e, int i, char *err, size_t errlen);
int etcd_post(struct sl_etcd *e, const char *path, const char *body,
	      cJSON **doc, char *err, size_t errlen);

/* etcd_kv.c */
int etcd_get_i64(const cJSON *o, const char *name, int64_t *out);
int etcd_parse_kv(const cJSON *kv, const char *key, struct sl_etcd_event *out,
		  bool *ours);

#endif
