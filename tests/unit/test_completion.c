/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unit tests for the shell completion (user/lib/completion.c) over the
 * binary's own command table: bash, run for real, offers every command,
 * every group's subcommands, every option of every command (and no
 * hidden one), every choice of a CHOICE option, files after a FILE
 * option, interfaces after an IFACES one; zsh -n parses the zsh script
 * (a skip without zsh).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "completion.h"
#include "sluice.h"

static char dir[] = "/tmp/sl_completion.XXXXXX";
static char bash_file[64], zsh_file[64];

static int write_script(const char *shell, const char *path)
{
	FILE *f = fopen(path, "w");
	int err;

	if (!f)
		return -errno;
	err = sl_completion_print(sl_commands, shell, f);
	return fclose(f) || err ? -EIO : 0;
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(bash_file, sizeof(bash_file), "%s/sluice.bash", dir);
	snprintf(zsh_file, sizeof(zsh_file), "%s/_sluice", dir);
	return write_script("bash", bash_file) || write_script("zsh", zsh_file);
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

/*
 * What bash's completion offers for the command line words (after
 * "sluice"), completing the last one: each offer on a line of its own,
 * with a newline before the first, so that "\n--json\n" finds one.
 */
static char *offers(const char *words)
{
	char cmd[1024], *buf = malloc(65536);
	size_t len = 1;
	FILE *p;
	size_t n;

	assert_non_null(buf);
	snprintf(cmd, sizeof(cmd),
		 "bash --norc --noprofile -c 'source %s; COMP_WORDS=(sluice %s);"
		 " COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sluice;"
		 " printf \"%%s\\n\" \"${COMPREPLY[@]}\"'",
		 bash_file, words);
	p = popen(cmd, "r");
	assert_non_null(p);
	buf[0] = '\n';
	while ((n = fread(buf + len, 1, 65535 - len, p)) > 0)
		len += n;
	buf[len] = '\0';
	assert_int_equal(pclose(p), 0);
	return buf;
}

static void want(const char *got, const char *words, const char *word)
{
	char line[128];

	snprintf(line, sizeof(line), "\n%s\n", word);
	if (!strstr(got, line))
		fail_msg("sluice %s<TAB> does not offer '%s'; it offers:%s",
			 words, word, got);
}

static void first_word(const struct sl_cmd *cmd, char *buf, size_t len)
{
	snprintf(buf, len, "%.*s", (int)strcspn(cmd->name, " "), cmd->name);
}

static void test_commands(void **state)
{
	char *top = offers("\"\""), *help = offers("help \"\""), w[64];

	(void)state;
	want(top, "", "help");
	for (const struct sl_cmd *const *c = sl_commands; *c; c++) {
		first_word(*c, w, sizeof(w));
		want(top, "", w);
		want(help, "help ", w);
		/* a group's subcommands, after the group and after help */
		if (strchr((*c)->name, ' ')) {
			char words[128], *got;

			snprintf(words, sizeof(words), "%s \"\"", w);
			got = offers(words);
			want(got, words, strchr((*c)->name, ' ') + 1);
			free(got);
			snprintf(words, sizeof(words), "help %s \"\"", w);
			got = offers(words);
			want(got, words, strchr((*c)->name, ' ') + 1);
			free(got);
		}
	}
	free(top);
	free(help);
}

static void test_options(void **state)
{
	(void)state;
	for (const struct sl_cmd *const *c = sl_commands; *c; c++) {
		const struct sl_opt *o = (*c)->opts;
		char words[128], opt[72], *got;

		snprintf(words, sizeof(words), "%s -", (*c)->name);
		got = offers(words);
		want(got, words, "--help");
		for (; o && o->name; o++) {
			snprintf(opt, sizeof(opt), "--%s", o->name);
			if (o->hidden) {
				snprintf(opt, sizeof(opt), "\n--%s\n", o->name);
				if (strstr(got, opt))
					fail_msg("%s offers hidden --%s",
						 (*c)->name, o->name);
				continue;
			}
			want(got, words, opt);
			if (o->short_name) {
				snprintf(opt, sizeof(opt), "-%c", o->short_name);
				want(got, words, opt);
			}
		}
		free(got);
	}
}

/* After an option, its values: choices, files, interfaces; nothing for
 * a number (not the option list). */
static void test_values(void **state)
{
	char path[96], words[256], *got;
	int files = 0, ifaces = 0, numbers = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/rules-a.json", dir);
	fclose(fopen(path, "w"));
	for (const struct sl_cmd *const *c = sl_commands; *c; c++) {
		for (const struct sl_opt *o = (*c)->opts; o && o->name; o++) {
			if (o->hidden || o->optional_value)
				continue;
			switch (o->type) {
			case SL_OPT_CHOICE:
				snprintf(words, sizeof(words), "%s --%s \"\"",
					 (*c)->name, o->name);
				got = offers(words);
				for (int i = 0; o->choices[i]; i++)
					want(got, words, o->choices[i]);
				free(got);
				break;
			case SL_OPT_STRING:
				if (!o->metavar || strcmp(o->metavar, "FILE"))
					break;
				snprintf(words, sizeof(words), "%s --%s %s/rul",
					 (*c)->name, o->name, dir);
				got = offers(words);
				want(got, words, path);
				free(got);
				/* --opt=VALUE, as bash splits it */
				snprintf(words, sizeof(words),
					 "%s --%s = %s/rul", (*c)->name,
					 o->name, dir);
				got = offers(words);
				want(got, words, path);
				free(got);
				files++;
				break;
			case SL_OPT_IFACES:
				snprintf(words, sizeof(words), "%s --%s l",
					 (*c)->name, o->name);
				got = offers(words);
				want(got, words, "lo");
				free(got);
				snprintf(words, sizeof(words), "%s --%s lo,l",
					 (*c)->name, o->name);
				got = offers(words);
				want(got, words, "lo,lo");
				free(got);
				ifaces++;
				break;
			case SL_OPT_U32:
			case SL_OPT_U64:
				snprintf(words, sizeof(words), "%s --%s \"\"",
					 (*c)->name, o->name);
				got = offers(words);
				assert_string_equal(got, "\n\n");
				free(got);
				numbers++;
				break;
			default:
				break;
			}
		}
	}
	/* the table has each kind: the loop above did check something */
	assert_true(files > 0 && ifaces > 0 && numbers > 0);
	/* positional arguments: files, or the words of the synopsis */
	snprintf(words, sizeof(words), "check %s/rul", dir);
	got = offers(words);
	want(got, words, path);
	free(got);
	got = offers("completion \"\"");
	want(got, "completion ", "bash");
	want(got, "completion ", "zsh");
	free(got);
}

static void test_zsh_parses(void **state)
{
	char cmd[128];

	(void)state;
	if (system("command -v zsh >/dev/null 2>&1")) {
		skip(); /* `make deps` installs it */
		return;
	}
	snprintf(cmd, sizeof(cmd), "zsh -n '%s'", zsh_file);
	assert_int_equal(system(cmd), 0);
}

static void test_other_shell(void **state)
{
	(void)state;
	assert_int_equal(sl_completion_print(sl_commands, "fish", stdout),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commands),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_zsh_parses),
		cmocka_unit_test(test_other_shell),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
