// SPDX-License-Identifier: GPL-2.0
/*
 * `make rules-gen`: rules/schema.json and the field table of
 * sluice-rules(5) from the rule field table (rule_doc.h), written in
 * place. A build tool, not installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rule_doc.h"
#include "util.h"

/* text into path, through a temporary file and a rename. */
static int write_file(const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) || rename(tmp, path)) {
		fprintf(stderr, "rulegen: %s: %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}

/* The man page with its generated part replaced. */
static int man(const char *path)
{
	char *page = NULL, *fields = sl_rules_man_fields(), *b, *e, *out;
	size_t len;
	int fd, ret = 1;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!fields || fd < 0 || sl_read_fd(fd, 1 << 20, &page, &len)) {
		fprintf(stderr, "rulegen: %s: cannot read\n", path);
		goto out;
	}
	b = strstr(page, SL_MAN_BEGIN);
	e = b ? strstr(b, SL_MAN_END) : NULL;
	if (!e) {
		fprintf(stderr, "rulegen: %s: no lines '%.*s' ... '%.*s'\n",
			path, (int)strlen(SL_MAN_BEGIN) - 1, SL_MAN_BEGIN,
			(int)strlen(SL_MAN_END) - 1, SL_MAN_END);
		goto out;
	}
	*b = '\0';
	out = malloc(strlen(page) + strlen(fields) +
		     strlen(e + strlen(SL_MAN_END)) + 1);
	if (out) {
		sprintf(out, "%s%s%s", page, fields, e + strlen(SL_MAN_END));
		ret = write_file(path, out);
	}
	free(out);
out:
	if (fd >= 0)
		close(fd);
	free(page);
	free(fields);
	return ret;
}

int main(int argc, char **argv)
{
	char *schema;
	int ret;

	if (argc == 3 && !strcmp(argv[1], "man"))
		return man(argv[2]);
	if (argc != 3 || strcmp(argv[1], "schema")) {
		fprintf(stderr, "usage: rulegen schema|man FILE\n");
		return 2;
	}
	schema = sl_rules_schema();
	ret = schema ? write_file(argv[2], schema) : 1;
	free(schema);
	return ret;
}
