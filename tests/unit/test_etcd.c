/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for the etcd gateway client's pure parts (user/svc/etcd.c):
 * base64, the endpoint list, the TLS and user options, watch frames as
 * etcd 3.4 writes them (copied from a running etcd 3.4.23), and the
 * stream cut into frames. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd.h"

static char err[512];

static void test_b64_round_trip(void **state)
{
	static const char *const texts[] = { "", "a", "ab", "abc", "abcd",
					     "{\"rules\": []}\n" };
	char *enc, *dec;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		enc = sl_etcd_b64_encode(texts[i], strlen(texts[i]));
		assert_non_null(enc);
		assert_int_equal(sl_etcd_b64_decode(enc, &dec, &len), 0);
		assert_int_equal(len, strlen(texts[i]));
		assert_memory_equal(dec, texts[i], len);
		assert_int_equal(dec[len], '\0');
		free(enc);
		free(dec);
	}
	enc = sl_etcd_b64_encode("k", 1);
	assert_string_equal(enc, "aw==");
	free(enc);
	/* not base64: a cut quad, a character outside the alphabet */
	assert_int_equal(sl_etcd_b64_decode("aw=", &dec, &len), -EINVAL);
	assert_int_equal(sl_etcd_b64_decode("a*==", &dec, &len), -EINVAL);
}

static void test_endpoints(void **state)
{
	struct sl_etcd e;

	(void)state;
	assert_int_equal(sl_etcd_init(&e, "http://127.0.0.1:2379/,"
					  "https://etcd-2:2379",
				      NULL, "/k", err, sizeof(err)),
			 0);
	assert_int_equal(e.n_urls, 2);
	assert_string_equal(e.url[0], "http://127.0.0.1:2379");
	assert_string_equal(e.url[1], "https://etcd-2:2379");
	sl_etcd_free(&e);
	assert_int_equal(sl_etcd_init(&e, "127.0.0.1:2379", NULL, "/k", err,
				      sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "'127.0.0.1:2379': not a URL"));
	assert_int_equal(sl_etcd_init(&e, "http://a:1,,http://b:1", NULL, "/k",
				      err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "an empty URL"));
	assert_int_equal(sl_etcd_init(&e, "http://", NULL, "/k", err,
				      sizeof(err)),
			 -EINVAL);
	assert_int_equal(sl_etcd_init(&e, "http://a:1", NULL, "", err,
				      sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "empty key"));
}

static int init_auth(const char *endpoints, const struct sl_etcd_auth *auth)
{
	struct sl_etcd e;
	int ret = sl_etcd_init(&e, endpoints, auth, "/k", err, sizeof(err));

	if (!ret)
		sl_etcd_free(&e);
	return ret;
}

/* TLS and a user: files checked and named, the password read, never a
 * half-given pair. */
static void test_auth_options(void **state)
{
	char dir[] = "/tmp/test_etcd.XXXXXX", pw[64], missing[64];
	const char *https = "https://127.0.0.1:2379";
	struct sl_etcd e;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(pw, sizeof(pw), "%s/pw", dir);
	snprintf(missing, sizeof(missing), "%s/missing.pem", dir);
	f = fopen(pw, "w");
	assert_non_null(f);
	fputs("s3cr\"et\n", f);
	fclose(f);
	unsetenv(SL_ETCD_PASSWORD_ENV);

	assert_int_equal(sl_etcd_init(&e, https,
				      &(struct sl_etcd_auth){
					      .cacert = pw, .cert = pw,
					      .user = "sl", .password_file = pw },
				      "/k", err, sizeof(err)),
			 0);
	assert_string_equal(e.password, "s3cr\"et");
	assert_string_equal(e.user, "sl");
	assert_null(e.token);
	sl_etcd_free(&e);

	assert_int_equal(init_auth(https, &(struct sl_etcd_auth){
						  .cacert = missing }),
			 -ENOENT);
	assert_non_null(strstr(err, "--etcd-cacert"));
	assert_non_null(strstr(err, missing));
	assert_int_equal(init_auth(https, &(struct sl_etcd_auth){
						  .cert_key = pw }),
			 -EINVAL);
	assert_non_null(strstr(err, "--etcd-cert-key needs --etcd-cert"));
	assert_int_equal(init_auth("http://127.0.0.1:2379",
				   &(struct sl_etcd_auth){ .cacert = pw }),
			 -EINVAL);
	assert_non_null(strstr(err, "https://"));
	assert_int_equal(init_auth(https, &(struct sl_etcd_auth){
						  .password_file = pw }),
			 -EINVAL);
	assert_non_null(strstr(err, "needs --etcd-user"));
	assert_int_equal(init_auth(https, &(struct sl_etcd_auth){
						  .user = "sl" }),
			 -EINVAL);
	assert_non_null(strstr(err, SL_ETCD_PASSWORD_ENV));
	assert_int_equal(init_auth(https, &(struct sl_etcd_auth){
						  .user = "sl",
						  .password_file = missing }),
			 -ENOENT);
	assert_non_null(strstr(err, missing));

	setenv(SL_ETCD_PASSWORD_ENV, "from-env", 1);
	assert_int_equal(sl_etcd_init(&e, https,
				      &(struct sl_etcd_auth){ .user = "sl" },
				      "/k", err, sizeof(err)),
			 0);
	assert_string_equal(e.password, "from-env");
	sl_etcd_free(&e);
	unsetenv(SL_ETCD_PASSWORD_ENV);

	unlink(pw);
	rmdir(dir);
}

#define HDR "\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\"," \
	    "\"revision\":\"%s\",\"raft_term\":\"2\"}"

static void test_frames(void **state)
{
	struct sl_etcd_frame f;
	char text[1024];

	(void)state;
	snprintf(text, sizeof(text), "{\"result\":{" HDR ",\"created\":true}}",
		 "2");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 0);
	assert_true(f.created);
	assert_int_equal(f.revision, 2);
	assert_int_equal(f.n_events, 0);
	sl_etcd_frame_free(&f);

	/* a put of k ("hello"), a put of another key (l), a delete of k */
	snprintf(text, sizeof(text),
		 "{\"result\":{" HDR ",\"events\":["
		 "{\"kv\":{\"key\":\"aw==\",\"create_revision\":\"2\","
		 "\"mod_revision\":\"3\",\"version\":\"2\","
		 "\"value\":\"aGVsbG8=\"}},"
		 "{\"kv\":{\"key\":\"bA==\",\"mod_revision\":\"4\"}},"
		 "{\"type\":\"DELETE\",\"kv\":{\"key\":\"aw==\","
		 "\"mod_revision\":\"5\"}}]}}",
		 "5");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 0);
	assert_int_equal(f.n_events, 2);
	assert_int_equal(f.events[0].type, SL_ETCD_PUT);
	assert_int_equal(f.events[0].mod_revision, 3);
	assert_int_equal(f.events[0].len, 5);
	assert_string_equal(f.events[0].value, "hello");
	assert_int_equal(f.events[1].type, SL_ETCD_DELETE);
	assert_int_equal(f.events[1].mod_revision, 5);
	assert_null(f.events[1].value);
	/* the put is followed by the delete in the frame: only it counts */
	assert_true(f.events[0].superseded);
	assert_false(f.events[1].superseded);
	sl_etcd_frame_free(&f);

	/* a put of an empty value: "value" is left out */
	snprintf(text, sizeof(text),
		 "{\"result\":{" HDR ",\"events\":[{\"kv\":{\"key\":\"aw==\","
		 "\"mod_revision\":\"7\"}}]}}",
		 "7");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 0);
	assert_int_equal(f.n_events, 1);
	assert_int_equal(f.events[0].len, 0);
	assert_string_equal(f.events[0].value, "");
	sl_etcd_frame_free(&f);

	/* the start revision was compacted */
	snprintf(text, sizeof(text),
		 "{\"result\":{\"header\":{\"raft_term\":\"2\"},"
		 "\"canceled\":true,\"compact_revision\":\"5\"}}");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 0);
	assert_true(f.canceled);
	assert_int_equal(f.compact_revision, 5);
	sl_etcd_frame_free(&f);

	/* a key that is not base64 */
	snprintf(text, sizeof(text),
		 "{\"result\":{" HDR ",\"events\":[{\"kv\":{\"key\":"
		 "\"aw==x\"}}]}}",
		 "8");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 -EPROTO);

	/* a watch refused for its token: only the reason's words say so */
	snprintf(text, sizeof(text),
		 "{\"result\":{" HDR ",\"watch_id\":\"-1\",\"created\":true,"
		 "\"canceled\":true,\"cancel_reason\":\"rpc error: code = "
		 "Unauthenticated desc = etcdserver: invalid auth token\"}}",
		 "1");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 0);
	assert_true(f.canceled);
	assert_string_equal(f.cancel_reason, "rpc error: code = Unauthenticated "
					     "desc = etcdserver: invalid auth "
					     "token");
	sl_etcd_frame_free(&f);

	/* an error frame, a revision that is not a string, not JSON */
	snprintf(text, sizeof(text), "{\"error\":{\"grpc_code\":14,"
				     "\"message\":\"etcdserver: no leader\"}}");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 -EREMOTEIO);
	assert_non_null(strstr(err, "etcdserver: no leader"));
	snprintf(text, sizeof(text),
		 "{\"result\":{\"header\":{\"revision\":7}}}");
	assert_int_equal(sl_etcd_parse_frame(text, strlen(text), "k", &f, err,
					     sizeof(err)),
			 -EPROTO);
	assert_int_equal(sl_etcd_parse_frame("{\"result\"", 10, "k", &f, err,
					     sizeof(err)),
			 -EPROTO);
}

struct frames {
	size_t n;
	size_t len[4];
	char first[8];
};

static int count_frame(void *arg, const char *text, size_t len)
{
	struct frames *fr = arg;

	if (fr->n < 4)
		fr->len[fr->n] = len;
	if (!fr->n)
		memcpy(fr->first, text, sizeof(fr->first));
	fr->n++;
	return 0;
}

/* A 32 MiB frame in 16 KiB chunks, then two frames and an empty line in
 * one chunk: every frame whole, and every byte searched once. */
static void test_stream_chunks(void **state)
{
	const size_t big = 32u << 20, chunk = 16u << 10;
	struct sl_etcd_stream s = { 0 };
	struct frames fr = { 0 };
	char *text = malloc(big + 1);
	const char *tail = "{\"b\":1}\n\n{\"c\":2}\n";

	(void)state;
	assert_non_null(text);
	memset(text, 'x', big);
	memcpy(text, "{\"a\":\"", 6);
	text[big - 2] = '"';
	text[big - 1] = '}';
	text[big] = '\n';
	for (size_t off = 0; off < big + 1; off += chunk)
		assert_int_equal(sl_etcd_stream_feed(&s, text + off,
						     off + chunk > big + 1
							     ? big + 1 - off
							     : chunk,
						     count_frame, &fr),
				 0);
	assert_int_equal(fr.n, 1);
	assert_int_equal(fr.len[0], big);
	assert_memory_equal(fr.first, "{\"a\":\"xx", 8);
	assert_int_equal(s.searched, big + 1);
	assert_int_equal(sl_etcd_stream_feed(&s, tail, strlen(tail),
					     count_frame, &fr),
			 0);
	assert_int_equal(fr.n, 3);
	assert_int_equal(fr.len[1], 7);
	assert_int_equal(fr.len[2], 7);
	assert_int_equal(s.searched, big + 1 + strlen(tail));
	assert_int_equal(s.pending.len, 0);
	sl_etcd_stream_free(&s);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64_round_trip),
		cmocka_unit_test(test_endpoints),
		cmocka_unit_test(test_auth_options),
		cmocka_unit_test(test_frames),
		cmocka_unit_test(test_stream_chunks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
