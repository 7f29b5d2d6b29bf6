# SPDX-License-Identifier: GPL-2.0
# Traffic tools for integration tests, the demo and benchmarks; included by
# the top-level Makefile, which defines BUILD, CC, CLANG, BPFTOOL, ARCH_INC,
# CFLAGS and the $(BUILD) directory rule. `make gen` builds:
#   $(BUILD)/xdpflood  live-frames flood     $(BUILD)/pktsend  paced sender
#   $(BUILD)/xdppass   do-nothing XDP program $(BUILD)/rxcount  tc counter
# Frames come from the library's packet builder, $(PKT_OBJ) (tests/tests.mk).

GEN_DIR     := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
GEN_OUT     := $(BUILD)/gen
GEN_BPF     := xdpflood xdppass rxcount
GEN_TOOLS   := $(addprefix $(BUILD)/,xdpflood xdppass pktsend rxcount)
GEN_CFLAGS  := $(CFLAGS) -I$(GEN_OUT) -I$(GEN_DIR) -Iuser/lib
GEN_BPFFLAGS := -O2 -g -target bpf -mcpu=v3 -Wall $(ARCH_INC) -I$(GEN_DIR)
GEN_LDLIBS  := -lbpf -lelf -lz -lm
GEN_HDRS    := $(wildcard $(GEN_DIR)/*.h)

.PHONY: gen
gen: $(GEN_TOOLS)

$(GEN_OUT): | $(BUILD)
	mkdir -p $@

$(GEN_BPF:%=$(GEN_OUT)/%.bpf.o): $(GEN_OUT)/%.bpf.o: $(GEN_DIR)/%.bpf.c \
		$(GEN_HDRS) | $(GEN_OUT)
	$(CLANG) $(GEN_BPFFLAGS) -c $< -o $@

$(GEN_BPF:%=$(GEN_OUT)/%.skel.h): $(GEN_OUT)/%.skel.h: $(GEN_OUT)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

# Each object's headers are tracked in its .d file.
GEN_OBJS := xdpflood xdppass pktsend rxcount frame genutil
$(GEN_OBJS:%=$(GEN_OUT)/%.o): $(GEN_OUT)/%.o: $(GEN_DIR)/%.c | $(GEN_OUT)
	$(CC) $(GEN_CFLAGS) -MMD -MP -c $< -o $@
-include $(GEN_OBJS:%=$(GEN_OUT)/%.d)

# numbers and the clock: the library's checked parsers, one copy
GEN_UTIL := $(OBJ)/lib/util.o

# The programs that load BPF need their skeletons first.
$(GEN_OUT)/xdpflood.o: $(GEN_OUT)/xdpflood.skel.h
$(GEN_OUT)/xdppass.o: $(GEN_OUT)/xdppass.skel.h
$(GEN_OUT)/rxcount.o: $(GEN_OUT)/rxcount.skel.h

$(BUILD)/xdpflood: $(addprefix $(GEN_OUT)/,xdpflood.o frame.o genutil.o) \
		$(PKT_OBJ) $(GEN_UTIL)
$(BUILD)/xdppass: $(addprefix $(GEN_OUT)/,xdppass.o genutil.o) $(GEN_UTIL)
$(BUILD)/pktsend: $(addprefix $(GEN_OUT)/,pktsend.o frame.o genutil.o) \
		$(PKT_OBJ) $(GEN_UTIL)
$(BUILD)/rxcount: $(addprefix $(GEN_OUT)/,rxcount.o genutil.o) $(GEN_UTIL)
$(GEN_TOOLS):
	$(CC) $(GEN_CFLAGS) -o $@ $^ $(GEN_LDLIBS)
