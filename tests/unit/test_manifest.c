/* SPDX-License-Identifier: GPL-2.0 */
/* Unit tests for rule manifests (user/svc/manifest.c): a manifest is
 * told from a rule file, parsed, refused when not valid, and built with
 * the SHA-256 and URLs agents check a body against. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "manifest.h"

static char err[512];

#define SHA_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static int parse(const char *text, struct sl_manifest *m)
{
	err[0] = '\0';
	return sl_manifest_parse(text, strlen(text), m, err, sizeof(err));
}

static void test_rule_files_are_not_manifests(void **state)
{
	struct sl_manifest m;

	(void)state;
	assert_int_equal(parse("{\"rules\":[]}", &m), -ENOMSG);
	assert_int_equal(parse("{\"rules\":[{\"name\":\"a\"}],"
			       "\"allow_empty\":true}", &m), -ENOMSG);
	assert_int_equal(parse("not json", &m), -ENOMSG);
	assert_int_equal(parse("", &m), -ENOMSG);
	/* the word in a rule's name is not the member */
	assert_int_equal(parse("{\"rules\":[{\"name\":\"sluice_manifest\"}]}",
			       &m), -ENOMSG);
}

static void test_parse(void **state)
{
	struct sl_manifest m;

	(void)state;
	assert_int_equal(parse("{\"sluice_manifest\":1,\"sha256\":\"" SHA_ABC
			       "\",\"size\":3,\"rules\":2,\"urls\":["
			       "\"http://a/x.json\",\"https://b/x.json\"]}",
			       &m), 0);
	assert_string_equal(m.sha256, SHA_ABC);
	assert_int_equal(m.size, 3);
	assert_int_equal(m.rules, 2);
	assert_int_equal(m.n_urls, 2);
	assert_string_equal(m.url[1], "https://b/x.json");
}

static void test_invalid(void **state)
{
	static const char *const bad[] = {
		/* a version it does not know */
		"{\"sluice_manifest\":2,\"sha256\":\"" SHA_ABC "\",\"size\":3,"
		"\"urls\":[\"http://a/x\"]}",
		/* no sha256, a short one, upper case */
		"{\"sluice_manifest\":1,\"size\":3,\"urls\":[\"http://a/x\"]}",
		"{\"sluice_manifest\":1,\"sha256\":\"ba78\",\"size\":3,"
		"\"urls\":[\"http://a/x\"]}",
		"{\"sluice_manifest\":1,\"sha256\":\"BA7816BF8F01CFEA414140DE5DAE"
		"2223B00361A396177A9CB410FF61F20015AD\",\"size\":3,"
		"\"urls\":[\"http://a/x\"]}",
		/* no size, a negative one, past 64 MiB */
		"{\"sluice_manifest\":1,\"sha256\":\"" SHA_ABC "\","
		"\"urls\":[\"http://a/x\"]}",
		"{\"sluice_manifest\":1,\"sha256\":\"" SHA_ABC "\",\"size\":-1,"
		"\"urls\":[\"http://a/x\"]}",
		"{\"sluice_manifest\":1,\"sha256\":\"" SHA_ABC "\","
		"\"size\":67108865,\"urls\":[\"http://a/x\"]}",
		/* no URL, not http, not a string */
		"{\"sluice_manifest\":1,\"sha256\":\"" SHA_ABC "\",\"size\":3,"
		"\"urls\":[]}",
		"{\"sluice_manifest\":1,\"sha256\":\"" SHA_ABC "\",\"size\":3,"
		"\"urls\":[\"file:///etc/passwd\"]}",
		"{\"sluice_manifest\":1,\"sha256\":\"" SHA_ABC "\",\"size\":3,"
		"\"urls\":[7]}",
	};
	struct sl_manifest m;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i], &m), -EINVAL);
		assert_true(strlen(err) > 0);
	}
}

static void test_build_round_trip(void **state)
{
	struct sl_manifest m, back;
	char *text;

	(void)state;
	text = sl_manifest_build("abc", 3, 2, "http://a/dir/,https://b", &m,
				 err, sizeof(err));
	assert_non_null(text);
	assert_string_equal(m.sha256, SHA_ABC);
	assert_int_equal(m.n_urls, 2);
	assert_string_equal(m.url[0], "http://a/dir/" SHA_ABC ".json");
	assert_string_equal(m.url[1], "https://b/" SHA_ABC ".json");
	assert_int_equal(parse(text, &back), 0);
	assert_memory_equal(&back, &m, sizeof(m));
	/* a manifest is small: the point of it */
	assert_true(strlen(text) < 400);
	free(text);
	assert_null(sl_manifest_build("abc", 3, 2, "ftp://a", &m, err,
				      sizeof(err)));
	assert_non_null(strstr(err, "--body-url"));
	assert_null(sl_manifest_build("abc", 3, 2, "", &m, err, sizeof(err)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_files_are_not_manifests),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_build_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
