// SPDX-License-Identifier: GPL-2.0
/* sl_sha256_hex() of util.h, apart from util.c: the traffic tools link
 * util.o alone, without libcrypto. */
#include <string.h>

#include <openssl/evp.h>

#include "util.h"

void sl_sha256_hex(const char *data, size_t len,
		   char hex[SL_SHA256_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;

	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != SL_SHA256_HEX_LEN / 2) {
		memset(hex, '?', SL_SHA256_HEX_LEN);
		hex[SL_SHA256_HEX_LEN] = '\0';
		return;
	}
	for (i = 0; i < mdlen; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[SL_SHA256_HEX_LEN] = '\0';
}
