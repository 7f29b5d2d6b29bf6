// SPDX-License-Identifier: GPL-2.0
/* `sluice tokend`: the token server as a process (docs/cluster.md). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "tokend.h"
#include "rules_parse.h"

#define ERRBUF 8192

static struct sl_tokend *running;

static void on_signal(int sig)
{
	if (running)
		sl_tokend_command(running, sig == SIGUSR1 ? SL_TOKEND_DRAIN
							 : SL_TOKEND_STOP);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice tokend --listen ADDR:PORT --rules FILE "
		"--state-dir DIR\n"
		"                     [--secrets FILE] [--lease-ttl-ms MS] "
		"[--sync-ms MS]\n"
		"                     [--learn-ms MS] [--max-conns N] "
		"[--ns-rate SYNCS_PER_S]\n"
		"SIGUSR1 drains (every lease to TTL 0), SIGTERM stops.\n");
}

static int parse_u32(const char *opt, const char *s, uint32_t *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !*s || v > UINT32_MAX || s[0] == '-') {
		pr_err("%s: '%s' is not a number", opt, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* One server per state directory: an flock held for the process's life. */
static int lock_state_dir(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST) {
		pr_err("--state-dir %s: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/tokend.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		pr_err("%s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		pr_err("%s: another tokend uses this state directory", path);
		close(fd);
		return -1;
	}
	return fd;
}

int sl_tokend_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"rules", required_argument, NULL, 'r'},
		{"state-dir", required_argument, NULL, 'S'},
		{"secrets", required_argument, NULL, 'k'},
		{"lease-ttl-ms", required_argument, NULL, 't'},
		{"sync-ms", required_argument, NULL, 'p'},
		{"learn-ms", required_argument, NULL, 'L'},
		{"max-conns", required_argument, NULL, 'c'},
		{"ns-rate", required_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	const char *rules = NULL, *state_dir = NULL, *secrets_file = NULL;
	struct sl_secrets secrets = {0};
	struct sl_ruleset rs = {0};
	struct sl_tokend_cfg cfg;
	struct sl_tokend *td = NULL;
	bool learn_set = false;
	char *err = NULL;
	int c, ret = 1, lock_fd = -1;

	sl_tokend_cfg_default(&cfg);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int e = 0;

		switch (c) {
		case 'l':
			cfg.listen = optarg;
			break;
		case 'r':
			rules = optarg;
			break;
		case 'S':
			state_dir = optarg;
			break;
		case 'k':
			secrets_file = optarg;
			break;
		case 't':
			e = parse_u32("--lease-ttl-ms", optarg, &cfg.ttl_ms);
			break;
		case 'p':
			e = parse_u32("--sync-ms", optarg, &cfg.sync_ms);
			break;
		case 'L':
			e = parse_u32("--learn-ms", optarg, &cfg.learn_ms);
			learn_set = true;
			break;
		case 'c':
			e = parse_u32("--max-conns", optarg, &cfg.max_conns);
			break;
		case 'n':
			e = parse_u32("--ns-rate", optarg, &cfg.ns_rate);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (e)
			return 2;
	}
	if (optind != argc || !cfg.listen || !rules || !state_dir) {
		if (optind != argc)
			pr_err("unexpected argument '%s'", argv[optind]);
		else
			pr_err("tokend needs --listen, --rules and "
			       "--state-dir");
		usage(stderr);
		return 2;
	}
	if (!learn_set)
		cfg.learn_ms = cfg.ttl_ms;
	err = calloc(1, ERRBUF);
	if (!err)
		return 1;
	lock_fd = lock_state_dir(state_dir);
	if (lock_fd < 0)
		goto out;
	if (sl_rules_load_file(rules, &rs, err, ERRBUF)) {
		pr_err("%s: invalid:\n%s", rules, err);
		goto out;
	}
	if (secrets_file &&
	    sl_secrets_load(secrets_file, &secrets, err, ERRBUF)) {
		pr_err("--secrets %s", err);
		goto out;
	}
	if (sl_tokend_new(&cfg, &rs, secrets_file ? &secrets : NULL, &td, err,
			  ERRBUF)) {
		pr_err("tokend: %s", err);
		goto out;
	}
	if (!secrets_file)
		pr_warn("tokend: no --secrets: clients are not authenticated "
			"(loopback only)");
	pr_info("tokend: listening on port %u; lease TTL %u ms, learning "
		"for %u ms",
		sl_tokend_port(td), cfg.ttl_ms, cfg.learn_ms);
	running = td;
	signal(SIGUSR1, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	ret = sl_tokend_run(td) ? 1 : 0;
	running = NULL;
	pr_info("tokend: stopped");
out:
	sl_tokend_free(td);
	sl_secrets_free(&secrets);
	sl_ruleset_free(&rs);
	if (lock_fd >= 0)
		close(lock_fd);
	free(err);
	return ret;
}
