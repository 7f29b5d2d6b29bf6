# SPDX-License-Identifier: GPL-2.0
# VM test harness: `make vmtest` runs $(VMTEST_SUITES) inside a qemu VM for
# every kernel of vmtest/kernels (`make vmtest KERNEL=6.1` for one) and
# prints a table kernel x (result, passed, failed, skipped, seconds); then
# $(VMTEST_CPUS_SUITES) in a guest of more vCPUs.
# Included by the top-level Makefile; see docs/kernels.md.
#
# Interface:
#   VMTEST_PREREQS  host build products the guest suites need (set by the
#                   includer, e.g. test binaries); default empty
#   VMTEST_SUITES   shell words, each one TAP suite command run from the repo
#                   root in the guest by tests/run.sh (quote commands that
#                   contain spaces); default vmtest/smoke.sh
#   KERNEL          one line of vmtest/kernels (6.1, 6.12, or a package name)
#   VMTEST_TIMEOUT  seconds per VM, boot included (default 900)
#   VMTEST_ACCEL    auto | tcg | kvm (default auto: KVM only if a probe
#                   boot reaches userspace)

VMTEST_PREREQS ?=
VMTEST_SUITES  ?= vmtest/smoke.sh
# then a guest of VMTEST_CPUS vCPUs on VMTEST_CPUS_KERNEL runs
# VMTEST_CPUS_SUITES (none: no such guest), its results in
# $(BUILD)/vmtest/<kernel>-<n>cpu/
VMTEST_CPUS_SUITES ?=
VMTEST_CPUS        ?= 8
VMTEST_CPUS_KERNEL ?= 6.12
VMTEST_TIMEOUT ?= 900
VMTEST_ACCEL   ?= auto

# What the harness itself needs on the host (Debian packages).
VMTEST_DEB_PKGS := qemu-system-x86 busybox-static kmod xz-utils zstd \
		   iproute2 bpftool clang llvm libbpf-dev

VMTEST_SMOKE_OBJ := $(BUILD)/vmtest/smoke.bpf.o

# shell single-quoting of a make value
vmtest_q = '$(subst ','\'',$(1))'

.PHONY: vmtest vmtest-deps vmtest-clean

vmtest-deps:
	@missing=""; for p in $(VMTEST_DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | \
			grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "vmtest-deps: installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends \
			$$missing >/dev/null; \
	fi

$(VMTEST_SMOKE_OBJ): vmtest/smoke.bpf.c | vmtest-deps
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -mcpu=v3 -Wall \
		-I/usr/include/$(shell uname -m)-linux-gnu -c $< -o $@

# what both runs of vmtest.sh share
vmtest_env = BUILD=$(call vmtest_q,$(BUILD)) \
	VMTEST_TIMEOUT=$(call vmtest_q,$(VMTEST_TIMEOUT)) \
	VMTEST_ACCEL=$(call vmtest_q,$(VMTEST_ACCEL))

vmtest: vmtest-deps $(VMTEST_PREREQS) $(VMTEST_SMOKE_OBJ)
	@rc=0; rm -f $(call vmtest_q,$(BUILD)/vmtest/summary.txt); \
	$(vmtest_env) VMTEST_SUITES=$(call vmtest_q,$(VMTEST_SUITES)) \
		vmtest/vmtest.sh $(KERNEL) || rc=1; \
	if [ -n $(call vmtest_q,$(strip $(VMTEST_CPUS_SUITES))) ]; then \
		$(vmtest_env) \
		VMTEST_SUITES=$(call vmtest_q,$(VMTEST_CPUS_SUITES)) \
		VMTEST_SMP=$(call vmtest_q,$(VMTEST_CPUS)) \
			vmtest/vmtest.sh $(VMTEST_CPUS_KERNEL) || rc=1; \
		echo "vmtest: and the first run's table, from above:"; \
		cat $(call vmtest_q,$(BUILD)/vmtest/summary.txt) 2>/dev/null; \
	fi; \
	exit $$rc

# Drops the kernel cache (vmtest/cache/, git-ignored) and the VM results.
vmtest-clean:
	rm -rf vmtest/cache $(BUILD)/vmtest
