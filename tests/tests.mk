# SPDX-License-Identifier: GPL-2.0
# Test suites. Every suite prints TAP; tests/run.sh adds them up.

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
# Data plane tests: one binary per feature (tests/bpf/test_<feature>.c)
# over one harness, frames from the library's packet builder, which the
# traffic tools and `sluice explain` share (user/lib/pkt.c).
BPF_FEATURES := pkt parse classify admit per_source swap cpu breaker frag conns chain
BPF_TESTS  := $(if $(wildcard tests/bpf/harness.c),\
		$(BPF_FEATURES:%=$(BUILD)/tests/bpf_%))
BPF_OBJ_DIR := $(BUILD)/tests/bpf
BPF_HARNESS := $(BPF_OBJ_DIR)/harness.o
BPF_OBJS   := $(BPF_HARNESS) $(BPF_FEATURES:%=$(BPF_OBJ_DIR)/test_%.o)
PKT_OBJ    := $(OBJ)/lib/pkt.o
INTEG_TESTS := $(sort $(wildcard tests/integration/test_*.sh))

$(BUILD)/tests:
	mkdir -p $@

$(BUILD)/tests/test_%: tests/unit/test_%.c $(PROG_LIBS) $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) $(INC_ALL) -o $@ $< $(PROG_LIBS) $(LIB) $(LDLIBS) \
		-lcmocka

# test_tokend fails the allocations of a rule change in turn
$(BUILD)/tests/test_tokend: LDLIBS += -Wl,--wrap=calloc \
	-Wl,--wrap=aligned_alloc

$(BPF_OBJ_DIR):
	mkdir -p $@

# Each object's headers are tracked in its .d file; the skeleton is
# generated, so it is named for the first build.
$(BPF_OBJS): $(BPF_OBJ_DIR)/%.o: tests/bpf/%.c $(SKEL) | $(BPF_OBJ_DIR)
	$(CC) $(CFLAGS) -MMD -MP $(INC_ALL) -c $< -o $@

$(BPF_TESTS): $(BUILD)/tests/bpf_%: $(BPF_OBJ_DIR)/test_%.o $(BPF_HARNESS) \
		$(PKT_OBJ) $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

-include $(BPF_OBJS:.o=.d)

# libFuzzer targets: tests/fuzz/fuzz_NAME.c over the library sources it
# exercises (FUZZ_SRCS_NAME), built with clang and the sanitizers;
# tests/fuzz/run.sh runs each for FUZZ_SECONDS.
FUZZ_RULE_SRCS     := $(addprefix user/lib/,rules_parse.c rules.c rules_json.c \
			rule_fields.c rules_read.c \
		        json_text.c util.c)
FUZZ_SRCS_proto    := user/lib/proto.c
FUZZ_SRCS_rules    := $(FUZZ_RULE_SRCS)
FUZZ_SRCS_snapshot := user/lib/snapshot.c user/lib/snapshot_store.c user/lib/digest.c $(FUZZ_RULE_SRCS)
FUZZ_SRCS_secrets  := user/lib/secrets.c user/lib/util.c
FUZZ_SRCS_ctl      := user/lib/ctl.c $(FUZZ_RULE_SRCS)
FUZZ_SRCS_etcd     := $(addprefix user/svc/,etcd.c etcd_kv.c etcd_watch.c) \
		      user/lib/util.c user/svc/manifest.c \
		      user/lib/digest.c
FUZZ_NAMES := proto rules snapshot secrets ctl etcd
FUZZ_BINS  := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
	       -Iuser/lib -Iuser/svc -Ibpf -Itests/fuzz
FUZZ_LDLIBS := -lcjson -lcurl -lcrypto
FUZZ_HDRS  := $(wildcard user/lib/*.h user/svc/*.h bpf/*.h tests/fuzz/*.h)

$(BUILD)/fuzz:
	mkdir -p $@

define fuzz_rule
$(BUILD)/fuzz/fuzz_$(1): tests/fuzz/fuzz_$(1).c $(FUZZ_SRCS_$(1)) \
		$(FUZZ_HDRS) | $(BUILD)/fuzz
	$$(CLANG) $$(FUZZ_CFLAGS) -o $$@ $$< $(FUZZ_SRCS_$(1)) $$(FUZZ_LDLIBS)
endef
$(foreach t,$(FUZZ_NAMES),$(eval $(call fuzz_rule,$(t))))

# A token server that holds the secret and lies (test_cluster_trust.sh).
ROGUE_TOKEND := $(BUILD)/tests/rogue_tokend
$(ROGUE_TOKEND): tests/lib/rogue_tokend.c $(LIB) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Iuser/lib -o $@ $< $(LIB) $(LDLIBS)

# test_tokend_flood.sh drives real sessions with the token server's load
# generator (tests/bench/bench.mk)
TEST_BINS := $(UNIT_BINS) $(BPF_TESTS) $(FUZZ_BINS) $(ROGUE_TOKEND) \
	     $(BUILD)/bench_tokend

# One shell command per suite.
UNIT_SUITES  := $(foreach b,$(UNIT_BINS),"CMOCKA_MESSAGE_OUTPUT=TAP $(b)")
BPF_SUITES   := $(foreach b,$(BPF_TESTS),"$(b)")
INTEG_SUITES := $(foreach t,$(INTEG_TESTS),"$(t)")
GEN_SUITES   := "bash tests/gen/selftest.sh"
FUZZ_SUITES  := "BUILD=$(BUILD) tests/fuzz/run.sh $(FUZZ_NAMES)"
# The tools' self-test measures rates and floods with live frames, which
# crash Debian's 6.12 under qemu TCG (docs/kernels.md): host only.
# test_install.sh checks packaging, not the kernel, and writes the build
# tree (read-only in the guests); test_upgrade.sh builds two more trees;
# test_alerts.sh is promtool alone, and test_metrics.sh checks the HTTP
# side of the counters test_limit.sh checks in the guests (its 4096-rule
# scrapes outlast a TCG guest's time); test_top.sh checks a terminal view
# of rates against paced traffic, which a TCG guest cannot pace;
# test_runbook.sh checks docs against the source, and
# test_cluster_trust.sh the agent's checks of a token server's answers,
# not the kernel; test_etcd_rules.sh needs no kernel feature that the
# agent suites do not check in the guests, and its deadlines (a put in
# force within 2 s, etcd's own election and request timeouts) mean
# nothing at TCG speed, nor do those of test_etcd_auth.sh (etcd's
# 2 s tokens); test_breaker.sh times a RST against 1 ms and its
# breaker's windows against the wall clock, test_breaker_signals.sh too
# (bpf_breaker runs in the guests); test_tokend_stop.sh needs etcd and
# stops it together with tokend replicas, no kernel feature;
# test_stats_watch.sh checks rates against paced traffic (as test_top.sh),
# test_tokend_flood.sh tokend's CPU seconds under a flood of connections,
# and test_rule_source.sh's kernel side is test_agent_swap.sh's, its
# push part needs etcd; test_agent_rules.sh is the CLI's rule changes,
# their refusals and the version's bookkeeping, whose kernel side, the
# apply into the idle set and its flip, test_agent_swap.sh runs in the
# guests under a flood (72 s of a guest's 9 minutes, which with one rerun
# of a guest after TCG's dispatcher oops kept CI under 45 minutes); test_dashboard.sh checks the dashboard's queries
# with promtool and a scrape's names (the HTTP side, as test_metrics.sh);
# test_docs_map.sh reads files only, test_layers.sh compiles headers
# only; test_drops.sh compares sampled
# drops with paced senders' shares (as test_top.sh); test_package.sh,
# test_image.sh and test_units_live.sh install a package on the machine,
# run podman and mmdebstrap, and write the build tree;
# test_agent_control.sh is the control socket's deadlines and clients,
# no kernel feature (4 of a guest's 11 minutes); test_actions.sh's and
# test_rule_layers.sh's data plane is bpf_admit's allow, deny and layers,
# which the guests run; test_conns.sh times real connections against
# idle timeouts of seconds, and its data plane is bpf_conns;
# test_check.sh is `sluice check` offline, no kernel at all;
# test_agent_snapshot.sh is the snapshot's files (the boot over a running
# data plane is test_agent_restart.sh's, which the guests run);
# test_jumbo.sh's program is bpf_admit's multi-buffer case, which the
# guests run (its veth at MTU 9000 in native mode passed in both guests
# on 2026-12-05: make vmtest VMTEST_SUITES=...test_jumbo.sh, 50 s each).
HOST_ONLY_TESTS := %/test_actions.sh %/test_rule_layers.sh %/test_conns.sh %/test_package.sh %/test_image.sh %/test_units_live.sh \
		   %/test_check.sh %/test_agent_snapshot.sh %/test_jumbo.sh \
		   %/test_agent_control.sh %/test_agent_rules.sh \
		   %/test_install.sh %/test_upgrade.sh %/test_alerts.sh \
		   %/test_metrics.sh %/test_top.sh %/test_runbook.sh \
		   %/test_cluster_trust.sh %/test_etcd_rules.sh \
		   %/test_etcd_auth.sh \
		   %/test_breaker.sh %/test_breaker_signals.sh \
		   %/test_tokend_stop.sh %/test_stats_watch.sh \
		   %/test_tokend_flood.sh %/test_rule_source.sh \
		   %/test_dashboard.sh %/test_docs_map.sh %/test_drops.sh \
		   %/test_layers.sh
VMTEST_SUITES ?= "vmtest/smoke.sh" $(BPF_SUITES) \
	$(foreach t,$(filter-out $(HOST_ONLY_TESTS),$(INTEG_TESTS)),"$(t)")
# The data plane's suites again in a guest of 8 vCPUs (6.12): per-CPU
# state, chunks sized by nr_cpus and shares among more CPUs than two,
# which this machine's two hide (docs/kernels.md).
VMTEST_CPUS_SUITES ?= $(BPF_SUITES)
VMTEST_PREREQS := all gen $(TEST_BINS)

.PHONY: test test-bins
test-bins: $(TEST_BINS)

test: deps
	$(MAKE) all gen test-bins
	tests/run.sh $(UNIT_SUITES) $(FUZZ_SUITES) $(BPF_SUITES) $(GEN_SUITES) \
		$(INTEG_SUITES)
