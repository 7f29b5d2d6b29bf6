/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The usual Redis rate limiter, as the token server benchmarks ask it
 * (bench_tokend.c, bench_failover.c): a sliding window of two fixed
 * windows, the previous one weighted by how much of it the sliding window
 * still covers, in one Lua script.
 *
 * KEYS[1] the flow; ARGV now_ms, window_ms, limit, cost. Admits what fits
 * of cost under limit (all of it, part or nothing) and returns that.
 */
#ifndef SLUICE_BENCH_REDIS_LIMITER_H
#define SLUICE_BENCH_REDIS_LIMITER_H

static const char redis_sliding_window_lua[] =
	"local now, win = tonumber(ARGV[1]), tonumber(ARGV[2]) "
	"local cur = math.floor(now / win) "
	"local k1 = KEYS[1] .. ':' .. cur "
	"local prev = tonumber(redis.call('GET', KEYS[1] .. ':' .. (cur - 1)) "
	"or '0') "
	"local c1 = tonumber(redis.call('GET', k1) or '0') "
	"local w = (win - now % win) / win "
	"local n = math.min(tonumber(ARGV[4]), "
	"math.floor(tonumber(ARGV[3]) - prev * w - c1)) "
	"if n <= 0 then return 0 end "
	"redis.call('INCRBY', k1, n) "
	"redis.call('PEXPIRE', k1, 2 * win) return n";

#endif
