# SPDX-License-Identifier: GPL-2.0
# sluice: `make deps`, `make`, `make test`, `make bench`, `make demo`.

BUILD     ?= build
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
ARCH_INC  := -I/usr/include/$(shell uname -m)-linux-gnu

CFLAGS    ?= -O2 -g
CFLAGS    += -Wall -Wextra -Wno-unused-parameter -std=gnu11 -D_GNU_SOURCE \
	     -I$(BUILD) -Iuser -Ibpf
LDLIBS    += -lbpf -lelf -lz -lcjson -lcrypto -lsystemd -lm -lpthread

BPF_CFLAGS := -O2 -g -target bpf -mcpu=v3 -Wall -Wno-unused-function \
	      $(ARCH_INC) -Ibpf $(BPF_EXTRA)

BPF_SRC   := bpf/sluice.bpf.c
BPF_HDRS  := $(wildcard bpf/*.h)
BPF_OBJ   := $(BUILD)/sluice.bpf.o
SKEL      := $(BUILD)/sluice.skel.h

LIB_SRCS  := user/rules.c user/compile.c user/loader.c user/stats.c user/log.c \
	     user/json_text.c user/snapshot.c user/ctl.c user/agent.c user/cli.c \
	     user/proto.c user/quota.c user/secrets.c user/tokend.c \
	     user/tokend_cmd.c user/lease.c user/cluster.c
LIB_OBJS  := $(patsubst user/%.c,$(BUILD)/%.o,$(LIB_SRCS))
LIB       := $(BUILD)/libsluice.a
SLUICE    := $(BUILD)/sluice

.PHONY: all deps test bench demo clean vmtest format
all: $(SLUICE) $(BPF_OBJ)

# Debian packages for building, testing and the demo; idempotent.
DEB_PKGS := make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
	    libcjson-dev libcmocka-dev libssl-dev libsystemd-dev pkg-config \
	    iproute2 libclang-rt-14-dev python3 jq redis-server
deps:
	@missing=""; for p in $(DEB_PKGS) $(EXTRA_DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | \
			grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq $$missing >/dev/null; \
	else echo "deps: all installed"; fi

$(BUILD):
	mkdir -p $@

$(BPF_OBJ): $(BPF_SRC) $(BPF_HDRS) | $(BUILD)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(SKEL): $(BPF_OBJ)
	$(BPFTOOL) gen skeleton $< name sluice_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/%.o: user/%.c $(wildcard user/*.h) bpf/sluice_abi.h $(SKEL) | $(BUILD)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	$(AR) rcs $@ $^

$(SLUICE): $(BUILD)/main.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

include tests/tests.mk
-include tests/gen/gen.mk
-include tests/bench/bench.mk
-include vmtest/vmtest.mk

demo: deps all gen
	./tests/demo.sh

format:
	clang-format -i bpf/*.c bpf/*.h user/*.c user/*.h

clean:
	rm -rf $(BUILD)
