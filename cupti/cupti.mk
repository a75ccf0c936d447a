# librfbpf_cupti.so, the CUDA side of rfbpf (see cupti/agent.h), and its
# tests. Included by the top Makefile; built only when the CUDA toolkit is
# found (CUDA_HOME, default /usr/local/cuda), otherwise every target here
# says so and succeeds.
#
#   cupti/*.c cupti/probes.S --cc -fPIC--> build/cupti/*.o
#       --link (libcupti is opened at run time: cupti/cupti_lib.h)-->
#       build/cupti/librfbpf_cupti.so
#   tests/gpu/cupti_driver.c --link the agent--> build/cupti/cupti_driver
#   tests/gpu/test_agent_logic.c + the agent's objects
#       --> build/cupti/test_agent_logic
#   tests/gpu/fake_libtorch_cpu.cpp --g++--> build/cupti/fake/libtorch_cpu.so
#   tests/gpu/gpu_synth.c --link the agent--> build/cupti/libgpu_synth.so
#
# The same again with ASan+UBSan in build/cupti-asan (make cupti-asan).
#
#   make cupti        build the agent, the driver and the unit test
#   make cupti-unit   run the unit test and the driver (lease, no lease)
#   make cupti-asan   the same under AddressSanitizer + UBSan
#   make cupti-test   both

CUDA_HOME ?= /usr/local/cuda
CUPTI_FOUND := $(wildcard $(CUDA_HOME)/include/cupti.h)
CUPTI_SKIP_MSG := cupti: CUDA toolkit not found (set CUDA_HOME): skipping \
	librfbpf_cupti.so and the GPU tests

CUPTI_SRCS := agent.c control.c clock.c callbacks.c activity.c \
	devices.c torch_activation.c cupti_lib.c
CUPTI_HDRS := $(wildcard cupti/*.h) bpf/rfbpf_gpu.h \
	user/attach/record_function_abi.h
CUPTI_BASE_CFLAGS := -Wall -Wextra -Werror -fPIC -g -std=gnu11 \
	-D_GNU_SOURCE -I$(CUDA_HOME)/include -Icupti -Ibpf -Iuser/attach
# No -lcupti, no RUNPATH into the toolkit: the agent opens the job's own
# CUPTI, or the toolkit's, at run time (cupti/cupti_lib.h).
CUPTI_LIBS := -ldl -lpthread
CUPTI_ASAN := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all

.PHONY: cupti cupti-unit cupti-asan cupti-test cupti-all

ifeq ($(CUPTI_FOUND),)

cupti cupti-unit cupti-asan cupti-test cupti-all:
	@echo "$(CUPTI_SKIP_MSG)"

else

# $(1): output directory, $(2): optimisation and sanitizer flags, $(3):
# extra libraries for the test programs (below).
define cupti_variant
$(1)/%.o: cupti/%.c $(CUPTI_HDRS)
	$$(call msg,CC,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -fvisibility=hidden -c $$< -o $$@

$(1)/probes.o: cupti/probes.S
	$$(call msg,AS,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(CC) -fPIC -c $$< -o $$@

$(1)/librfbpf_cupti.so: $(addprefix $(1)/,$(CUPTI_SRCS:.c=.o)) $(1)/probes.o
	$$(call msg,LINK,$$@)
	$$(Q)$$(CC) $(2) -shared -Wl,-z,defs -Wl,-soname,librfbpf_cupti.so \
		$$^ $(CUPTI_LIBS) -o $$@

# The driver links the agent as the CUDA driver would load it: a separate
# library, reached through its exported names only.
$(1)/cupti_driver: tests/gpu/cupti_driver.c tests/gpu/cupti_sim.h \
		$(1)/librfbpf_cupti.so $(CUPTI_HDRS)
	$$(call msg,CC,$$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -rdynamic $$< \
		-L$(1) -lrfbpf_cupti -Wl,-rpath,'$$$$ORIGIN' $(CUPTI_LIBS) $(3) \
		-o $$@

# The unit test links the agent's objects, to reach its internal functions.
$(1)/test_agent_logic: tests/gpu/test_agent_logic.c tests/unit/check.h \
		$(addprefix $(1)/,$(CUPTI_SRCS:.c=.o)) $(1)/probes.o \
		$(1)/fake/libtorch_cpu.so
	$$(call msg,CC,$$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -Itests/unit $$< \
		$(addprefix $(1)/,$(CUPTI_SRCS:.c=.o)) $(1)/probes.o \
		$(CUPTI_LIBS) $(3) -lm -o $$@

# A stand-in libcupti.so.13 that enforces CUPTI's process-wide rules, and
# the agent next to another subscriber on it (the program links the
# stand-in first, so the agent's own libcupti.so.13 is the stand-in too).
$(1)/sim/libcupti.so.13: tests/gpu/sim_libcupti.c tests/gpu/sim_libcupti.map
	$$(call msg,CC,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -fvisibility=hidden -shared \
		-Wl,-soname,libcupti.so.13 \
		-Wl,--version-script,tests/gpu/sim_libcupti.map $$< -o $$@

$(1)/cupti_coexist: tests/gpu/cupti_coexist.c tests/unit/check.h \
		$(1)/sim/libcupti.so.13 $(1)/librfbpf_cupti.so $(CUPTI_HDRS)
	$$(call msg,CC,$$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -Itests/unit $$< \
		$(1)/sim/libcupti.so.13 -L$(1) -lrfbpf_cupti \
		-Wl,-rpath,'$$$$ORIGIN/sim:$$$$ORIGIN' -o $$@

# The same stand-in and test as a CUDA 12 job has them: libcupti.so.12,
# API 22, no cuptiSubscribe_v2.
$(1)/sim12/libcupti.so.12: tests/gpu/sim_libcupti.c tests/gpu/sim_libcupti12.map
	$$(call msg,CC,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -DSIM_CUDA12 -fvisibility=hidden \
		-shared -Wl,-soname,libcupti.so.12 \
		-Wl,--version-script,tests/gpu/sim_libcupti12.map $$< -o $$@

$(1)/cupti_coexist12: tests/gpu/cupti_coexist.c tests/unit/check.h \
		$(1)/sim12/libcupti.so.12 $(1)/librfbpf_cupti.so $(CUPTI_HDRS)
	$$(call msg,CC,$$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -DSIM_CUDA12 -Itests/unit $$< \
		$(1)/sim12/libcupti.so.12 -L$(1) -lrfbpf_cupti \
		-Wl,-rpath,'$$$$ORIGIN/sim12:$$$$ORIGIN' -o $$@

# The agent with CUDA 12's real CUPTI (tools/fetch-cupti12.sh), mapped at
# start as a job's own would be. Built only where it was unpacked.
$(1)/cupti12_records: tests/gpu/cupti12_records.c tests/unit/check.h \
		$(addprefix $(1)/,$(CUPTI_SRCS:.c=.o)) $(1)/probes.o \
		$(CUPTI12_LIB)
	$$(call msg,CC,$$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) -Itests/unit $$< \
		$(addprefix $(1)/,$(CUPTI_SRCS:.c=.o)) $(1)/probes.o \
		$(CUPTI_LIBS) -Wl,--no-as-needed $(CUPTI12_LIB) -Wl,--as-needed \
		-Wl,-rpath,$(dir $(CUPTI12_LIB)) -o $$@

# The agent opens the stand-in itself (not linked): exit ordering.
$(1)/cupti_exit_order: tests/gpu/cupti_exit_order.c $(1)/sim/libcupti.so.13 \
		$(1)/librfbpf_cupti.so $(CUPTI_HDRS)
	$$(call msg,CC,$$@)
	$$(Q)$$(CC) $(CUPTI_BASE_CFLAGS) $(2) $$< -L$(1) -lrfbpf_cupti \
		-Wl,-rpath,'$$$$ORIGIN' -o $$@

# A stand-in for libtorch_cpu's callback registry, built with the real
# C++ types so the op stubs are called through the real C++ ABI.
$(1)/fake/libtorch_cpu.so: tests/gpu/fake_libtorch_cpu.cpp \
		user/attach/record_function_abi.h
	$$(call msg,CXX,$$@)
	$$(Q)mkdir -p $$(dir $$@)
	$$(Q)$$(CXX) -std=c++17 -Wall -Wextra -Werror -fPIC -shared -g $(2) \
		$$< -o $$@
endef

# $(3): extra libraries for the test programs. The ASan ones map the
# toolkit's libcupti at start (the agent then finds it already there),
# because LeakSanitizer crashes at exit walking the dynamic TLS of a
# libcupti opened with dlopen (gcc 12); the plain ones test dlopen.
CUPTI_MAPPED := -Wl,--no-as-needed $(CUDA_HOME)/lib64/libcupti.so.13 \
	-Wl,--as-needed -Wl,-rpath,$(CUDA_HOME)/lib64
# CUDA 12.4's CUPTI, unpacked from Debian's packages by make deps.
CUPTI12_DIR ?= /var/cache/rfbpf/cupti12
CUPTI12_LIB := $(CUPTI12_DIR)/usr/lib/x86_64-linux-gnu/libcupti.so.12
CUPTI12_FOUND := $(wildcard $(CUPTI12_LIB))
$(eval $(call cupti_variant,build/cupti,-O2,))
$(eval $(call cupti_variant,build/cupti-asan,-O1 $(CUPTI_ASAN),$(CUPTI_MAPPED)))

CUPTI_BINS = $(1)/librfbpf_cupti.so $(1)/cupti_driver $(1)/test_agent_logic \
	$(1)/cupti_coexist $(1)/cupti_coexist12 $(1)/cupti_exit_order \
	$(if $(CUPTI12_FOUND),$(1)/cupti12_records)

# For the end-to-end GPU tests: the same simulation as a library a Python
# workload calls from inside real PyTorch ops (tests/e2e/test_gpu.py).
build/cupti/libgpu_synth.so: tests/gpu/gpu_synth.c tests/gpu/cupti_sim.h \
		build/cupti/librfbpf_cupti.so $(CUPTI_HDRS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CUPTI_BASE_CFLAGS) -O2 -shared $< -Lbuild/cupti \
		-lrfbpf_cupti -Wl,-rpath,'$$ORIGIN' $(CUPTI_LIBS) -o $@

# A stand-in libcudart: a job that loads it is a CUDA job to rfbpf, which
# loads its agent into it (tests/e2e/test_gpu_inject.py). It needs the
# stand-in driver beside it, as the real one needs libcuda.so.1.
build/cupti/sim/libcudart.so.12: tests/gpu/sim_libcudart.c \
		build/cupti/sim/libcuda.so.1
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CUPTI_BASE_CFLAGS) -O2 -fvisibility=hidden -shared \
		-Wl,-soname,libcudart.so.12 $< -Lbuild/cupti/sim \
		-Wl,--no-as-needed -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN' -o $@

# Ops run inside the dynamic loader (a constructor's): the agent must not
# be loaded from there (test_gpu_inject.py).
build/cupti/ctor/libops_in_constructor.so: tests/gpu/ops_in_constructor.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CUPTI_BASE_CFLAGS) -O2 -shared $< -o $@

# A stand-in shared NVTX library (bpf/nvtx.bpf.c probes its ranges).
build/cupti/sim/libnvToolsExt.so.1: tests/gpu/sim_libnvtx.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CUPTI_BASE_CFLAGS) -O2 -fvisibility=hidden -shared \
		-Wl,-soname,libnvToolsExt.so.1 $< -o $@

build/cupti/sim/libcuda.so.1: tests/gpu/sim_libcuda.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CUPTI_BASE_CFLAGS) -O2 -fvisibility=hidden -shared \
		-Wl,-soname,libcuda.so.1 $< -o $@

# What the agent costs a job, with no tracer and traced by rfbpf's own
# BPF programs (run by make bench): rfbpf's loading code comes along.
build/cupti/agent_cost: bench/agent_cost.c bench/stats.h \
		tests/gpu/cupti_sim.h build/cupti/librfbpf_cupti.so $(CUPTI_HDRS) \
		$(PROBES_SRCS) $(LOGIC_SRCS) $(USER_HDRS) $(OUT)/rfbpf.skel.h \
		$(OUT)/thread_exits.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -Icupti -Itests/gpu $< \
		$(PROBES_SRCS) $(LOGIC_SRCS) -Lbuild/cupti \
		-lrfbpf_cupti -Wl,-rpath,'$$ORIGIN' $(LDLIBS) -ldl -o $@

cupti: $(call CUPTI_BINS,build/cupti) build/cupti/libgpu_synth.so \
	build/cupti/agent_cost build/cupti/sim/libcudart.so.12 \
	build/cupti/ctor/libops_in_constructor.so \
	build/cupti/sim/libnvToolsExt.so.1

# The driver's own checks make it exit non-zero on a wrong count.
define cupti_run
	$(Q)tests/gpu/check_nop5.sh $(1)/librfbpf_cupti.so
	$(Q)tests/gpu/check_no_cupti_link.sh $(1)/librfbpf_cupti.so
	$(Q)$(1)/test_agent_logic $(1)/fake/libtorch_cpu.so
	$(Q)$(1)/cupti_coexist
	$(Q)SIM_CUPTI_VERSION=22 SIM_CUPTI_DROPPED=7 $(1)/cupti_coexist
	$(Q)RFBPF_CUPTI_CLOCK=callback $(1)/cupti_coexist
	$(Q)$(1)/cupti_coexist --yield
	$(Q)$(1)/cupti_coexist --yield-in-call
	$(Q)SIM_CUPTI_DROPPED=3 $(1)/cupti_coexist12
	$(Q)$(1)/cupti_coexist12 --yield
	$(Q)$(1)/cupti_coexist12 --yield-in-call
	$(Q)RFBPF_CUPTI_LIB=$(CURDIR)/$(1)/sim/libcupti.so.13 \
		SIM_CUPTI_EXIT_CHECK=1 $(1)/cupti_exit_order
	@echo "cupti: the agent gave CUPTI back at exit, before its teardown"
	$(Q)RFBPF_CUPTI_LIB=$(CURDIR)/$(1)/no/libcupti.so \
		$(1)/cupti_exit_order --no-cupti
	$(Q)SIM_CUPTI_VERSION=18 $(1)/cupti_coexist
	$(Q)SIM_CUPTI_VERSION=140000 $(1)/cupti_coexist
	$(Q)$(if $(CUPTI12_FOUND),tests/gpu/check_cupti12_layouts.sh \
		$(CUPTI12_DIR) $(CUDA_HOME) $(1) && $(1)/cupti12_records,$(if $(CI),\
		echo "cupti: no CUDA 12 CUPTI in $(CUPTI12_DIR) (make deps)" \
		>&2; exit 1,echo "cupti: skipping cupti12_records: no CUDA 12 \
		CUPTI in $(CUPTI12_DIR) (make deps unpacks it)"))
	$(Q)$(1)/cupti_driver --threads 3 --launches 200 --graph-every 7 \
		--lease-ns 30000000000 >$(1)/driver-lease.json
	$(Q)$(1)/cupti_driver --threads 2 --launches 100 \
		>$(1)/driver-nolease.json
	@echo "cupti: driver ok (lease, no lease); summaries in $(1)/driver-*.json"
endef

cupti-unit: cupti
	$(call cupti_run,build/cupti)

cupti-asan: $(call CUPTI_BINS,build/cupti-asan)
	$(call cupti_run,build/cupti-asan)

cupti-test: cupti-unit cupti-asan

# For `make all`: a failed agent build is reported but does not fail the
# loader's build.
# After rfbpf: agent_cost needs rfbpf's skeletons, and a second make
# writing them beside the first (make -j) crashed bpftool (SIGBUS).
cupti-all: rfbpf
	@$(MAKE) --no-print-directory cupti || \
		echo "cupti: librfbpf_cupti.so failed to build (above); rfbpf is unaffected"

endif
