/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For targets whose parser reads a file: the input as the bytes of one
 * temporary file (mode 0600), rewritten in place for every input.
 */
#ifndef SLUICE_FUZZ_FILE_H
#define SLUICE_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char fuzz_path[] = "/tmp/sluice-fuzz-XXXXXX";
static int fuzz_fd = -1;

static void fuzz_file_remove(void)
{
	unlink(fuzz_path);
}

/* The path of a file holding exactly data; aborts if it cannot. */
static const char *fuzz_file(const uint8_t *data, size_t size)
{
	if (fuzz_fd < 0) {
		fuzz_fd = mkstemp(fuzz_path);
		if (fuzz_fd < 0) {
			perror(fuzz_path);
			abort();
		}
		atexit(fuzz_file_remove);
	}
	if (ftruncate(fuzz_fd, 0) ||
	    pwrite(fuzz_fd, data, size, 0) != (ssize_t)size)
		abort();
	return fuzz_path;
}

#endif
