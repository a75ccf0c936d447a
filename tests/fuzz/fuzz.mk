# Fuzzing: libFuzzer targets built with clang, ASan and UBSan. Included by
# the top Makefile.
#
#   $(LOGIC_SRCS) --clang -fsanitize=fuzzer-no-link,address,undefined-->
#       $(OUT)/fuzz/obj/**/*.o --ar--> $(OUT)/fuzz/liblogic.a (once)
#   tests/fuzz/fuzz_NAME.c + $(FUZZ_EXTRA_NAME) + that archive
#       --clang -fsanitize=fuzzer,address,undefined--> $(OUT)/fuzz/fuzz_NAME
#
# Each target's seed corpus is tests/fuzz/corpus/NAME/ (in the tree, read
# only: new inputs go to $(OUT)/fuzz/corpus-NAME/), and every input that
# once crashed it is kept in tests/fuzz/regressions/NAME/ and replayed
# before each run.
#
#   make fuzz          each target for FUZZ_SECONDS (default 60)
#   make fuzz-smoke    each target for a few seconds (part of make test)
#   make fuzz-build    build them only

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 3
FUZZ_SANITIZE := -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer
# The loader's flags, but clang's sanitizers and no -O2 surprises in
# stack traces. The protobuf-c sources are generated (not ours to warn on).
FUZZ_CFLAGS := -g -O1 $(FUZZ_SANITIZE) $(WARN) -std=gnu11 -D_GNU_SOURCE \
	-I$(OUT) -Ibpf -Iuser -Itests/fuzz
# The archive's objects: instrumented for coverage, but not given
# libFuzzer's main (only a target's link is). Its own variable, so that
# what one target adds to FUZZ_CFLAGS does not reach the shared objects.
comma := ,
FUZZ_OBJ_CFLAGS := $(subst -fsanitize=fuzzer$(comma),\
	-fsanitize=fuzzer-no-link$(comma),$(FUZZ_CFLAGS)) -MMD -MP
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
# fuzz_cupti needs CUDA's headers (as cupti/cupti.mk does): without them
# it is left out, said once by each fuzz goal.
CUDA_HOME ?= /usr/local/cuda
ifeq ($(wildcard $(CUDA_HOME)/include/cupti.h),)
FUZZ_NAMES := $(filter-out cupti,$(FUZZ_NAMES))
FUZZ_SKIPPED = @echo "fuzz cupti: CUDA toolkit not found (set CUDA_HOME): skipped"
endif
FUZZ_BINS := $(addprefix $(OUT)/fuzz/fuzz_,$(FUZZ_NAMES))

.PHONY: fuzz fuzz-smoke fuzz-build
fuzz-build: $(FUZZ_BINS)
	$(FUZZ_SKIPPED)

FUZZ_OBJ := $(OUT)/fuzz/obj
FUZZ_LOGIC_OBJS := $(patsubst user/%.c,$(FUZZ_OBJ)/%.o,\
	$(filter user/%,$(LOGIC_SRCS))) $(FUZZ_OBJ)/gen/profile.pb-c.o
$(FUZZ_OBJ)/%.o: user/%.c | $(GEN_HDRS)
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -c $< -o $@
$(FUZZ_OBJ)/gen/%.o: $(OUT)/gen/%.c $(GEN_HDRS)
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -c $< -o $@
$(OUT)/fuzz/liblogic.a: $(FUZZ_LOGIC_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@
	$(Q)$(AR) rcs $@ $^

# Extra sources a target needs beyond the archive: FUZZ_EXTRA_NAME.
.SECONDEXPANSION:
$(OUT)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(OUT)/fuzz/liblogic.a \
		$$(FUZZ_EXTRA_$$*)
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP $< $(FUZZ_EXTRA_$*) \
		$(OUT)/fuzz/liblogic.a $(LDLIBS) -ldl -o $@

fuzz: $(FUZZ_BINS)
	$(FUZZ_SKIPPED)
	$(Q)tests/fuzz/run.sh $(FUZZ_SECONDS) $(OUT) $(FUZZ_NAMES)

fuzz-smoke: $(FUZZ_BINS)
	$(FUZZ_SKIPPED)
	$(Q)tests/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(OUT) $(FUZZ_NAMES)

# fuzz_python reads the input as the target's memory: its target_read
# (user/attach/target.c) is swapped for the fuzzer's own.
$(OUT)/fuzz/fuzz_python: FUZZ_CFLAGS += -Wl,--wrap=target_read

# fuzz_cupti: the agent's sources (not its CUPTI loader or probes, which
# the fuzzer stands in for), with cupti/cupti.mk's include paths.
# The agent's loop (agent.c) is linked for its handshake; CUDA 13's
# libcupti is linked for its record iterator, and CUDA 12's is opened
# from CUPTI12_LIB (cupti/cupti.mk) by the inputs flagged CUDA 12.
FUZZ_EXTRA_cupti := $(addprefix cupti/,activity.c control.c clock.c \
	callbacks.c devices.c torch_activation.c agent.c)
$(OUT)/fuzz/fuzz_cupti: FUZZ_CFLAGS += -I$(CUDA_HOME)/include -Icupti \
	-Iuser/attach -DCUPTI12_LIB='"$(CUPTI12_LIB)"' $(CUPTI_MAPPED)
