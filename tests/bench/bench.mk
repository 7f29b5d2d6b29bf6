# SPDX-License-Identifier: GPL-2.0
# Benchmarks (docs/benchmarks.md): `make bench` prints every figure.
#   BENCH_XDP_ARGS   extra arguments for build/bench_xdp (e.g. --runs 9)
#   BENCH_THREADS    threads of build/bench_xdp --threads (default 2, 1 on
#                    one CPU)
#   BENCH_SCALE_ARGS extra arguments for it (e.g. --runs 5 --path sketch)
#   BENCH_VETH_ARGS  extra arguments for tests/bench/veth_drop.sh (e.g.
#                    --seconds 55; a later --case replaces all)
#   BENCH_CTL_ARGS   extra arguments for tests/bench/bench_ctl.sh (e.g. --runs 41)
#   AGENTS, FLOWS, PERIOD_MS, BENCH_SECONDS  load of tests/bench/bench_tokend.sh;
#   FLEET_AGENTS, FLEET_FLOWS, RUNS, SAT_AGENTS, FLEET_ONLY=1  its fleet part
#   QUICK=1, PLOTS=DIR  `make bench-peers`: fewer, shorter runs; gnuplot PNGs
#   BENCH_PUSH_ARGS  extra arguments for tests/bench/bench_push.sh (e.g. --old)

BENCH_DIR   := $(BUILD)/bench
# two threads where there are two CPUs
BENCH_THREADS ?= $(shell [ "$$(nproc)" -ge 2 ] && echo 2 || echo 1)
BENCH_BARE  := $(BENCH_DIR)/bare.bpf.o
BENCH_SKEL  := $(BENCH_DIR)/bare.skel.h
BENCH_XDP   := $(BUILD)/bench_xdp
BENCH_TOKEND := $(BUILD)/bench_tokend
BENCH_FAILOVER := $(BUILD)/bench_failover
BENCH_VETH  := $(BUILD)/bench_veth
ADMIT_SHAPE := $(BUILD)/admit_shape
BENCH_GC    := $(BUILD)/bench_gc
BENCH_PUSH  := $(BUILD)/bench_push
BENCH_GRANTS := $(BUILD)/bench_grants

.PHONY: bench bench-bins bench-tokend bench-peers
bench-bins: $(BENCH_XDP) $(BENCH_VETH) $(BENCH_TOKEND) $(ADMIT_SHAPE) \
	    $(BENCH_GC) $(BENCH_FAILOVER) $(BENCH_PUSH) $(BENCH_GRANTS)

bench: all gen bench-bins
	$(BENCH_XDP) $(BENCH_XDP_ARGS)
	$(BENCH_XDP) --threads $(BENCH_THREADS) $(BENCH_SCALE_ARGS)
	$(ADMIT_SHAPE)
	$(BENCH_GC)
	BUILD=$(BUILD) tests/bench/veth_drop.sh --case all $(BENCH_VETH_ARGS)
	BUILD=$(BUILD) tests/bench/bench_ctl.sh $(BENCH_CTL_ARGS)
	[ $(BENCH_THREADS) -lt 2 ] || $(BENCH_GRANTS) $(BENCH_THREADS)
	BUILD=$(BUILD) tests/bench/bench_tokend.sh
	BUILD=$(BUILD) tests/bench/bench_etcd.sh
	BUILD=$(BUILD) tests/bench/bench_push.sh $(BENCH_PUSH_ARGS)

# sluice beside nftables, iptables and Redis (tests/bench/bench_peers.sh)
bench-peers: all gen bench-bins
	QUICK=$(QUICK) PLOTS=$(PLOTS) BUILD=$(BUILD) tests/bench/bench_peers.sh

bench-tokend: all $(BENCH_TOKEND) $(BENCH_GRANTS)
	[ $(BENCH_THREADS) -lt 2 ] || $(BENCH_GRANTS) $(BENCH_THREADS)
	BUILD=$(BUILD) tests/bench/bench_tokend.sh

$(BENCH_TOKEND): tests/bench/bench_tokend.c tests/bench/redis_limiter.h \
		$(PROG_LIBS) $(LIB)
	$(CC) $(CFLAGS) $(INC_ALL) -o $@ $< $(PROG_LIBS) $(LIB) $(LDLIBS)

# the token server's grant path on 1 and N threads, no sockets
$(BENCH_GRANTS): tests/bench/bench_grants.c $(PROG_LIBS) $(LIB)
	$(CC) $(CFLAGS) $(INC_ALL) -o $@ $< $(PROG_LIBS) $(LIB) $(LDLIBS)

# a fleet through a kill -9 of tokend or Redis (bench_peers.sh)
$(BENCH_FAILOVER): tests/bench/bench_failover.c tests/bench/redis_limiter.h \
		$(LIB)
	$(CC) $(CFLAGS) $(INC_ALL) -o $@ $< $(LIB) $(LDLIBS)

$(BENCH_DIR):
	mkdir -p $@

$(BENCH_BARE): tests/bench/bare.bpf.c $(BPF_HDRS) | $(BENCH_DIR)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BENCH_SKEL): $(BENCH_BARE)
	$(BPFTOOL) gen skeleton $< name bare_bpf > $@

# the traffic tools' helpers: logging, signals; numbers and the clock
$(BENCH_VETH): tests/bench/bench_veth.c $(BENCH_SKEL) $(GEN_OUT)/genutil.o \
		$(GEN_UTIL)
	$(CC) $(CFLAGS) -I$(BENCH_DIR) -Itests/gen -Iuser/lib -o $@ $< \
		$(GEN_OUT)/genutil.o $(GEN_UTIL) $(LDLIBS)

$(BENCH_XDP): tests/bench/bench_xdp.c tests/bench/bench_scale.c \
		tests/bench/bench_scale.h $(BENCH_SKEL) $(SKEL) $(LIB) \
		$(GEN_OUT)/genutil.o
	$(CC) $(CFLAGS) $(INC_ALL) -I$(BENCH_DIR) -Itests/gen -o $@ $< \
		tests/bench/bench_scale.c $(GEN_OUT)/genutil.o $(LIB) \
		$(LDLIBS) -lpthread

$(BENCH_GC): tests/bench/bench_gc.c $(SKEL) $(LIB) $(GEN_OUT)/genutil.o
	$(CC) $(CFLAGS) $(INC_ALL) -Itests/gen -o $@ $< \
		$(GEN_OUT)/genutil.o $(LIB) $(LDLIBS)

$(ADMIT_SHAPE): tests/bench/admit_shape.c $(SKEL) $(LIB) $(GEN_OUT)/frame.o \
		$(GEN_OUT)/genutil.o $(PKT_OBJ)
	$(CC) $(CFLAGS) $(INC_ALL) -Itests/gen -o $@ $< $(GEN_OUT)/frame.o \
		$(GEN_OUT)/genutil.o $(PKT_OBJ) $(LIB) $(LDLIBS)

# simulated agents' etcd sources against a real etcd (bench_push.sh)
$(BENCH_PUSH): tests/bench/bench_push.c $(LIB)
	$(CC) $(CFLAGS) $(INC_ALL) -o $@ $< $(LIB) $(LDLIBS)
