# SPDX-License-Identifier: GPL-2.0
# Test suites. Every suite prints TAP; tests/run.sh adds them up.

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
BPF_TEST   := $(BUILD)/tests/test_xdp
# The packet builder of the BPF tests and the traffic tools.
PKT_DIR    := tests/lib
PKT_OBJ_DIR := $(BUILD)/tests/lib
PKT_OBJ    := $(PKT_OBJ_DIR)/pkt.o
INTEG_TESTS := $(sort $(wildcard tests/integration/test_*.sh))

$(BUILD)/tests:
	mkdir -p $@

$(BUILD)/tests/test_%: tests/unit/test_%.c $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS) -lcmocka

$(PKT_OBJ_DIR):
	mkdir -p $@

# Its headers are tracked in its .d file.
$(PKT_OBJ): $(PKT_DIR)/pkt.c | $(PKT_OBJ_DIR)
	$(CC) $(CFLAGS) -MMD -MP -I$(PKT_DIR) -c $< -o $@
-include $(PKT_OBJ:.o=.d)

$(BPF_TEST): tests/bpf/test_xdp.c $(PKT_DIR)/pkt.h $(PKT_OBJ) $(LIB) \
		| $(BUILD)/tests
	$(CC) $(CFLAGS) -I$(PKT_DIR) -o $@ $< $(PKT_OBJ) $(LIB) $(LDLIBS)

# libFuzzer needs clang; FUZZ_SECONDS bounds each run (tests/fuzz/run.sh).
FUZZ_PROTO := $(BUILD)/fuzz/fuzz_proto
$(FUZZ_PROTO): tests/fuzz/fuzz_proto.c user/proto.c user/proto.h
	mkdir -p $(dir $@)
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -Iuser \
		-o $@ tests/fuzz/fuzz_proto.c user/proto.c -lcrypto

TEST_BINS := $(UNIT_BINS) $(if $(wildcard tests/bpf/test_xdp.c),$(BPF_TEST)) \
	     $(FUZZ_PROTO)

# One shell command per suite.
UNIT_SUITES  := $(foreach b,$(UNIT_BINS),"CMOCKA_MESSAGE_OUTPUT=TAP $(b)")
BPF_SUITES   := $(if $(wildcard tests/bpf/test_xdp.c),"$(BPF_TEST)")
INTEG_SUITES := $(foreach t,$(INTEG_TESTS),"$(t)")
GEN_SUITES   := "bash tests/gen/selftest.sh"
FUZZ_SUITES  := "BUILD=$(BUILD) tests/fuzz/run.sh"
# The tools' self-test measures rates and floods with live frames, which
# crash Debian's 6.12 under qemu TCG (docs/kernels.md): host only.
VMTEST_SUITES ?= "vmtest/smoke.sh" $(BPF_SUITES) $(INTEG_SUITES)
VMTEST_PREREQS := all gen $(TEST_BINS)

.PHONY: test test-bins
test-bins: $(TEST_BINS)

test: deps
	$(MAKE) all gen test-bins
	tests/run.sh $(UNIT_SUITES) $(FUZZ_SUITES) $(BPF_SUITES) $(GEN_SUITES) \
		$(INTEG_SUITES)
