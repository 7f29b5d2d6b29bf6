# SPDX-License-Identifier: GPL-2.0
# sluice: `make deps`, `make`, `make test`, `make bench`, `make demo`.

BUILD     ?= build
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
ARCH_INC  := -I/usr/include/$(shell uname -m)-linux-gnu

CFLAGS    ?= -O2 -g
CFLAGS    += -Wall -Wextra -Wno-unused-parameter -std=gnu11 -D_GNU_SOURCE
DEPFLAGS  := -MMD -MP
LDLIBS    += -lbpf -lelf -lz -lcjson -lcrypto -lsystemd -lmicrohttpd -lcurl \
	     -lncurses -lmnl -lm -lpthread

BPF_CFLAGS := -O2 -g -target bpf -mcpu=v3 -Wall -Wno-unused-function \
	      $(ARCH_INC) -Ibpf $(BPF_EXTRA)

BPF_SRC   := bpf/sluice.bpf.c
BPF_HDRS  := $(wildcard bpf/*.h)
BPF_OBJ   := $(BUILD)/sluice.bpf.o
SKEL      := $(BUILD)/sluice.skel.h

# user/: the library (lib: no threads, sockets or process-wide setup;
# svc: the services a program starts over it, etcd and HTTP; dp: the
# data plane, the only part that touches the skeleton), the token server
# both programs run (tokensrv) and one folder per program. What a part
# may include is its include path, so a layering slip does not compile
# (docs/architecture.md).
OBJ        := $(BUILD)/obj
USER_PARTS := lib svc dp tokensrv agent tokend cli
INC_lib    := -Iuser/lib -Ibpf
INC_svc    := $(INC_lib) -Iuser/svc
INC_dp     := $(INC_lib) -Iuser/dp -I$(BUILD)
INC_tokensrv := $(INC_svc) -Iuser/tokensrv
INC_tokend := $(INC_tokensrv) -Iuser/tokend
INC_agent  := $(INC_dp) -Iuser/svc -Iuser/tokensrv -Iuser/agent
INC_cli    := $(INC_dp) -Iuser/svc -Iuser/cli
INC_main   := $(INC_agent) -Iuser/cli -Iuser/tokend
# tests and benchmarks see every part
INC_ALL    := $(INC_main) -Iuser

part_objs = $(patsubst user/%.c,$(OBJ)/%.o,$(wildcard user/$(1)/*.c))
LIB       := $(BUILD)/libsluice.a
LIB_OBJS  := $(call part_objs,lib) $(call part_objs,svc) $(call part_objs,dp) \
	     $(OBJ)/version.o
# the programs, one archive each (the token server's after the two that
# run it), and the command table over them
PROG_ARS  := $(BUILD)/cli.a $(BUILD)/agent.a $(BUILD)/tokend.a \
	     $(BUILD)/tokensrv.a
PROG_LIBS := $(OBJ)/sluice.o $(PROG_ARS)
SLUICE    := $(BUILD)/sluice

.PHONY: all deps test bench demo clean vmtest format man install uninstall \
	completion rules-gen
all: $(SLUICE) $(BPF_OBJ) completion

# Debian packages for building, testing and the demo; idempotent.
DEB_PKGS := make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
	    libcjson-dev libcmocka-dev libssl-dev libsystemd-dev pkg-config \
	    iproute2 libclang-rt-14-dev python3 jq redis-server scdoc man-db \
	    bsdextrautils systemd python3-yaml python3-jsonschema \
	    libmicrohttpd-dev prometheus \
	    curl libncurses-dev tmux libcurl4-openssl-dev etcd-server \
	    etcd-client nftables iptables gnuplot-nox libmnl-dev zsh debhelper \
	    lintian busybox-static
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

define part_rules
$(OBJ)/$(1)/%.o: user/$(1)/%.c | $(OBJ)/$(1)
	$$(CC) $$(CFLAGS) $$(DEPFLAGS) $$(INC_$(1)) -c $$< -o $$@
$(OBJ)/$(1):
	mkdir -p $$@
endef
$(foreach p,$(USER_PARTS),$(eval $(call part_rules,$(p))))

# the skeleton is generated before anything that may include it
$(call part_objs,dp) $(call part_objs,agent) $(call part_objs,cli): | $(SKEL)

$(OBJ)/main.o $(OBJ)/sluice.o: $(OBJ)/%.o: user/%.c | $(OBJ)/lib
	$(CC) $(CFLAGS) $(DEPFLAGS) $(INC_main) -I user -c $< -o $@

# rewritten only when the version changes, so nothing rebuilds for nothing
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/version.c: FORCE | $(BUILD)
	@echo 'const char sl_version[] = "$(VERSION)";' > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@
$(OBJ)/version.o: $(BUILD)/version.c | $(OBJ)/lib
	$(CC) $(CFLAGS) -c $< -o $@
.PHONY: FORCE

$(LIB): $(LIB_OBJS)
	$(AR) rcs $@ $^

$(BUILD)/cli.a: $(call part_objs,cli)
$(BUILD)/agent.a: $(call part_objs,agent)
$(BUILD)/tokend.a: $(call part_objs,tokend)
$(BUILD)/tokensrv.a: $(call part_objs,tokensrv)
$(PROG_ARS):
	rm -f $@ && $(AR) rcs $@ $^

$(SLUICE): $(OBJ)/main.o $(PROG_LIBS) $(LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# rules/schema.json and the man page's field table, written from the rule
# field table (user/lib/rule_fields.c); test_rule_fields fails when the
# committed files differ from what it writes
RULEGEN := $(BUILD)/rulegen
$(OBJ)/rulegen.o: user/rulegen.c | $(OBJ)/lib
	$(CC) $(CFLAGS) $(DEPFLAGS) $(INC_lib) -c $< -o $@
$(RULEGEN): $(OBJ)/rulegen.o $(LIB)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)
rules-gen: $(RULEGEN)
	$(RULEGEN) schema rules/schema.json
	$(RULEGEN) man docs/man/sluice-rules.5.scd

# bash and zsh completion, printed by the binary from its command table
COMPLETIONS := $(BUILD)/completion/sluice $(BUILD)/completion/_sluice
completion: $(COMPLETIONS)
$(BUILD)/completion/sluice: $(SLUICE)
	@mkdir -p $(@D)
	$(SLUICE) completion bash >$@.tmp && mv $@.tmp $@
$(BUILD)/completion/_sluice: $(SLUICE)
	@mkdir -p $(@D)
	$(SLUICE) completion zsh >$@.tmp && mv $@.tmp $@

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)

include tests/tests.mk
-include tests/gen/gen.mk
-include tests/bench/bench.mk
-include vmtest/vmtest.mk
include deploy/package.mk

demo: deps all gen
	./tests/demo.sh

# ---- installing (docs/operations.md, "Installing") ----
PREFIX     ?= /usr/local
SBINDIR    ?= $(PREFIX)/sbin
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/sluice
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
# Debian's zsh reads vendor-completions under /usr, site-functions elsewhere
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/$(if $(filter /usr,$(PREFIX)),vendor-completions,site-functions)
MAN_PAGES  := $(patsubst docs/man/%.scd,$(BUILD)/man/%,$(wildcard docs/man/*.scd))
UNITS      := sluice.service sluice-tokend.service
# configuration: installed when absent, never overwritten; mode
CONFIGS    := default/sluice:644 default/sluice-tokend:644 \
	      sluice/rules.json:644 sluice/cluster.json:644 sluice/secrets:600
DOCS       := README.md $(wildcard docs/*.md) docs/alerts.yml
EXAMPLES   := rules/schema.json rules/demo.json $(wildcard rules/examples/*)

man: $(MAN_PAGES)
$(BUILD)/man/%: docs/man/%.scd
	@mkdir -p $(@D)
	scdoc < $< > $@.tmp && mv $@.tmp $@

install: $(SLUICE) man completion
	install -D -m 755 $(SLUICE) $(DESTDIR)$(SBINDIR)/sluice
	install -D -m 644 $(BUILD)/completion/sluice \
		$(DESTDIR)$(BASHCOMPDIR)/sluice
	install -D -m 644 $(BUILD)/completion/_sluice \
		$(DESTDIR)$(ZSHCOMPDIR)/_sluice
	install -d -m 755 $(DESTDIR)$(UNITDIR)
	for u in $(UNITS); do \
		sed -e 's|@SBINDIR@|$(SBINDIR)|g' \
		    -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' deploy/systemd/$$u.in \
			> $(DESTDIR)$(UNITDIR)/$$u && \
		chmod 644 $(DESTDIR)$(UNITDIR)/$$u; done
	for m in $(MAN_PAGES); do \
		install -D -m 644 $$m \
			$(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/}; done
	install -D -m 644 -t $(DESTDIR)$(DOCDIR) $(DOCS)
	install -D -m 644 -t $(DESTDIR)$(DOCDIR)/examples $(EXAMPLES)
	install -d -m 755 $(DESTDIR)$(SYSCONFDIR)/sluice
	for c in $(CONFIGS); do f=$${c%:*}; \
		[ -e $(DESTDIR)$(SYSCONFDIR)/$$f ] || install -D -m $${c#*:} \
			deploy/etc/$$f $(DESTDIR)$(SYSCONFDIR)/$$f; done

# Configuration is removed only where it is still as installed. While an
# agent's data plane is attached (a link pinned under PIN_DIR) the binary
# that takes it down stays: run `sluice down` first, or KEEP_ATTACHED=1.
PIN_DIR ?= /sys/fs/bpf/sluice
uninstall:
	@links=$$(ls $(PIN_DIR)/links 2>/dev/null | tr '\n' ',' | sed 's/,$$//'); \
	if [ -z "$(DESTDIR)" ] && [ -n "$$links" ] && [ -z "$(KEEP_ATTACHED)" ]; then \
		echo "uninstall: sluice is still attached to $$links;" \
		     "run \`$(SBINDIR)/sluice down --iface $$links" \
		     "--pin-dir $(PIN_DIR)\` first (or make uninstall" \
		     "KEEP_ATTACHED=1 to leave it attached)" >&2; exit 1; fi
	rm -f $(DESTDIR)$(SBINDIR)/sluice
	rm -f $(DESTDIR)$(BASHCOMPDIR)/sluice $(DESTDIR)$(ZSHCOMPDIR)/_sluice
	rm -f $(UNITS:%=$(DESTDIR)$(UNITDIR)/%)
	for m in $(MAN_PAGES); do \
		rm -f $(DESTDIR)$(MANDIR)/man$${m##*.}/$${m##*/}; done
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/examples/,$(notdir $(EXAMPLES)))
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)
	for c in $(CONFIGS); do f=$${c%:*}; \
		cmp -s deploy/etc/$$f $(DESTDIR)$(SYSCONFDIR)/$$f && \
			rm -f $(DESTDIR)$(SYSCONFDIR)/$$f; done; true
	-rmdir $(DESTDIR)$(SYSCONFDIR)/sluice

format:
	clang-format -i bpf/*.c bpf/*.h user/*.c user/*/*.c user/*/*.h

clean:
	rm -rf $(BUILD)
