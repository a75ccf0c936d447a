# rfbpf: every build step in the open.
#
#   bpf/*.bpf.c --clang -target bpf--> build/bpf/*.bpf.o
#   build/bpf/*.bpf.o --bpftool gen object--> build/rfbpf.bpf.o
#   build/rfbpf.bpf.o --bpftool gen skeleton--> build/rfbpf.skel.h
#   build/bpf/{off_cpu,thread_exits}.bpf.o --bpftool gen skeleton--> build/{off_cpu,thread_exits}.skel.h
#   user/**/*.c (+ skeleton) --cc--> build/**/*.o (+ build/**/*.d)
#   the pure logic's objects --ar--> build/liblogic.a (unit tests, benches)
#   build/**/*.o --link libbpf libelf z--> rfbpf
#
# Each object is compiled once per build directory (build/, build-asan/,
# build/fuzz/ for clang's fuzzer flags) and depends on the headers it
# includes, as the compiler lists them (-MMD -MP, in its .d file).
# `make V=1` shows the full commands.

ARCH ?= $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
CLANG ?= clang
BPFTOOL ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
CC ?= cc
OUT := build
VMLINUX := vmlinux/$(ARCH)/vmlinux.h

WARN := -Wall -Wextra -Werror
# OPT and SANITIZE are the knobs (make asan sets them); warnings always apply.
OPT ?= -g -O2
SANITIZE ?=
override CFLAGS := $(OPT) $(SANITIZE) $(WARN) -std=gnu11 -D_GNU_SOURCE \
	-I$(OUT) -Ibpf -Iuser
# -lstdc++: abi::__cxa_demangle for CUDA kernel names (model/demangle.c).
LDLIBS := -lbpf -lelf -ldw -lz -lm -lprotobuf-c -lmicrohttpd -lpthread \
	-lstdc++
# BPF_KPROBE() declares ctx and every argument whether used or not.
BPF_CFLAGS := -g -O2 $(WARN) -Wno-unused-parameter -target bpf -D__TARGET_ARCH_$(ARCH) \
	-I$(dir $(VMLINUX)) -Ibpf

# The loader's sources, and the subset that is pure logic (unit-tested and
# linked into the test binaries without BPF).
# The folders are the pipeline: attach/ (find the target, probe it, switch
# RecordFunction on), model/ (events -> ops -> aggregates), export/ (the
# outputs), gpu/ (the CUPTI agent), python/ (Python frames read from
# outside: issue 13, in progress), with the session and main.c on top.
LOGIC_SRCS := $(addprefix user/model/,u64map.c names.c trace.c stacks.c \
		trace_gpu.c aggregate.c gpu_activity.c gpu_occupancy.c \
		demangle.c \
		profile_sink.c py_frames.c op_inputs.c events.c steps.c \
		per_step.c collectives.c distributed.c rank_summary.c memory.c \
		memory_events.c) \
	$(addprefix user/attach/,elf_symbols.c torch_symbols.c torch_layouts.c \
		target.c state_dir.c ptrace_denied.c c10_allocator.c) \
	$(addprefix user/export/,table.c chrome.c chrome_gpu.c chrome_fwdbwd.c \
		chrome_python.c chrome_off_cpu.c chrome_memory.c flight_recorder.c perfetto.c \
		folded.c json_writer.c utf8.c atomic_file.c text_cell.c \
		table_sort.c table_collectives.c table_ranks.c table_memory.c out_file.c \
		output_file.c) \
	user/python/line_table.c user/python/py_stack.c user/python/py_threads.c
# rfbpf's BPF object and the thread-exit program every object shares: what
# the benches and the agent's cost bench load rfbpf's programs with.
PROBES_SRCS := $(addprefix user/attach/,probes.c exit_hooks.c)
LOADER_SRCS := $(LOGIC_SRCS) user/cli.c user/cli/help.c $(PROBES_SRCS) \
	$(addprefix user/attach/,privileges.c launch.c remote_call.c \
		safe_point.c sigframe.c stub_page.c activation.c \
		control_thread.c off_cpu_hooks.c held_stack.c) \
	user/gpu/agent.c user/gpu/gpu_session.c user/gpu/inject.c \
	user/python/py_session.c \
	$(addprefix user/session/,status.c outputs.c session.c setup.c \
		children.c off_cpu.c) \
	user/all/all_processes.c user/main.c
# Fleet mode's parts (each list owned by one part, so they grow apart).
STACK_PROFILE_SRCS := user/model/stack_profile.c
PPROF_SRCS := user/export/pprof.c
PROM_SRCS := user/export/prom_text.c
HTTP_SRCS := user/fleet/http.c
DISCOVERY_SRCS := user/fleet/discovery.c
BUDGET_SRCS := user/fleet/budget.c
# A job's op counters, the metrics made of them and its windows' self
# time: pure logic over struct job and the trace (job.c's session is not
# touched), so unit-tested.
FLEET_METRICS_SRCS := user/fleet/job_ops.c user/fleet/job_window.c \
	user/fleet/fleet_metrics.c user/fleet/fleet_collectives.c \
	user/fleet/window_self.c
# The daemon itself (needs BPF: not in the unit tests).
FLEET_SRCS := user/fleet/job.c user/fleet/job_bursts.c user/fleet/daemon.c \
	user/fleet/job_capture.c user/fleet/job_recorder.c \
	user/fleet/lease_keeper.c
CALIBRATE_SRCS := user/attach/calibrate.c user/attach/calibrate_target.S
LOGIC_SRCS += $(STACK_PROFILE_SRCS) $(PPROF_SRCS) $(PROM_SRCS) \
	$(HTTP_SRCS) $(DISCOVERY_SRCS) $(BUDGET_SRCS) \
	$(FLEET_METRICS_SRCS)
LOADER_SRCS += $(FLEET_SRCS) $(STACK_PROFILE_SRCS) $(PPROF_SRCS) $(PROM_SRCS) \
	$(HTTP_SRCS) $(DISCOVERY_SRCS) $(BUDGET_SRCS) $(CALIBRATE_SRCS) \
	$(FLEET_METRICS_SRCS)
# pprof's schema (user/export/profile.proto) as C, by protoc-c, in
# $(OUT)/gen/: generated, never edited or committed. It is pure logic, so
# the unit tests and benches compile it with the rest of LOGIC_SRCS.
PROTOC_C ?= protoc-c
GEN_SRCS := $(OUT)/gen/profile.pb-c.c $(OUT)/gen/perfetto_trace.pb-c.c
GEN_HDRS := $(GEN_SRCS:.c=.h)
GEN_OBJS := $(GEN_SRCS:.c=.o)
LOGIC_SRCS += $(GEN_SRCS)
USER_HDRS := $(wildcard user/*.h user/*/*.h)

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.PHONY: all deps demo test unit e2e asan bench clean install tests/fixtures
all: rfbpf rfbpf.8 cupti-all

# The man page, written by rfbpf from the option table --help comes from.
rfbpf.8: rfbpf
	$(call msg,MAN,$@)
	$(Q)./rfbpf --man > $@

# `make install` (PREFIX=/usr/local, DESTDIR for a package's staging
# root): the binary, its man page, the systemd unit of fleet mode (its
# ExecStart made to name the binary installed), and the CUPTI agent where
# it was built (CUDA_INJECTION64_PATH=$(PREFIX)/lib/rfbpf/librfbpf_cupti.so).
PREFIX ?= /usr/local
install: rfbpf rfbpf.8
	install -D -m 0755 rfbpf $(DESTDIR)$(PREFIX)/bin/rfbpf
	install -D -m 0644 rfbpf.8 $(DESTDIR)$(PREFIX)/share/man/man8/rfbpf.8
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system
	sed 's|/usr/local/bin/rfbpf|$(PREFIX)/bin/rfbpf|' tools/rfbpf.service \
		> $(DESTDIR)$(PREFIX)/lib/systemd/system/rfbpf.service
	if [ -f $(OUT)/cupti/librfbpf_cupti.so ]; then \
		install -D -m 0644 $(OUT)/cupti/librfbpf_cupti.so \
			$(DESTDIR)$(PREFIX)/lib/rfbpf/librfbpf_cupti.so; \
	fi

deps:
	$(Q)tools/install-deps.sh

$(VMLINUX):
	$(call msg,BTF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp
	$(Q)mv $@.tmp $@

# One BPF file per feature (bpf/common.bpf.h says what they share), linked
# by bpftool into the one object the skeleton is made from.
# rfbpf.bpf.c, which defines the shared maps, goes first: bpftool 7.1's
# linker fails a map relocation of a file linked before the map's
# definition ("map relo failed to find map").
# --off-cpu's scheduler programs and the thread-exit program are objects
# of their own, loaded once per rfbpf process for every process it traces
# (bpf/off_cpu.bpf.c, bpf/thread_exits.bpf.c).
BPF_OWN_OBJECTS := bpf/off_cpu.bpf.c bpf/thread_exits.bpf.c
BPF_SRCS := bpf/rfbpf.bpf.c $(filter-out bpf/rfbpf.bpf.c $(BPF_OWN_OBJECTS),\
	$(wildcard bpf/*.bpf.c))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))

$(OUT)/bpf/%.bpf.o: bpf/%.bpf.c bpf/common.bpf.h bpf/ids.bpf.h bpf/exit_maps.bpf.h bpf/rfbpf.h bpf/rfbpf_gpu.h $(VMLINUX) | $(OUT)
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUT)/rfbpf.bpf.o: $(BPF_OBJS)
	$(call msg,BPF-LINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUT)/rfbpf.skel.h: $(OUT)/rfbpf.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp
	$(Q)mv $@.tmp $@

$(OUT)/off_cpu.skel.h: $(OUT)/bpf/off_cpu.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name off_cpu_bpf > $@.tmp
	$(Q)mv $@.tmp $@

$(OUT)/thread_exits.skel.h: $(OUT)/bpf/thread_exits.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name thread_exits_bpf > $@.tmp
	$(Q)mv $@.tmp $@

# -MMD -MP: each object's .d names the headers it included (make reads
# them back below), so touching a header rebuilds only its includers.
DEPFLAGS = -MMD -MP
$(OUT)/%.o: user/%.c | $(OUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# rfbpf's page in the target (user/attach/stub_page.S): code as data.
$(OUT)/stub_page_code.o: user/attach/stub_page.S user/attach/stub_page.h \
		$(OUT)/control_loop.bin | $(OUT)
	$(call msg,AS,$@)
	$(Q)$(CC) $(CFLAGS) -DCONTROL_LOOP_BIN='"$(OUT)/control_loop.bin"' \
		-c $< -o $@

# The control thread's code (user/attach/control_loop.c), which runs in
# the job: freestanding, no data, linked at its offset in the page and
# cut out as bytes. Any relocation but a rip-relative one, or any symbol
# but the control block, would be resolved against address 0 and break
# in the job: the build refuses them here, and the link refuses data.
CONTROL_CFLAGS := -O2 -g0 $(WARN) -fPIC -ffreestanding -fno-builtin \
	-fno-stack-protector -fno-asynchronous-unwind-tables \
	-fno-unwind-tables -fno-jump-tables -mgeneral-regs-only \
	-fno-sanitize=all
$(OUT)/control_loop.o: user/attach/control_loop.c \
		user/attach/control_block.h \
		user/attach/record_function_abi.h | $(OUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CONTROL_CFLAGS) -c $< -o $@
	$(Q)if readelf -rW $@ | awk 'NF >= 5 && $$3 ~ /^R_X86_64_/ && \
		$$3 != "R_X86_64_PC32" && $$3 != "R_X86_64_PLT32"' | \
		grep .; then echo "$<: relocation the page cannot have" >&2; \
		rm -f $@; exit 1; fi
$(OUT)/control_loop.lds: user/attach/control_loop.lds.S \
		user/attach/stub_page.h | $(OUT)
	$(Q)$(CC) -E -P -x c -D__ASSEMBLER__ -Iuser/attach $< -o $@
$(OUT)/control_loop.bin: $(OUT)/control_loop.o $(OUT)/control_loop.lds
	$(call msg,LD,$@)
	$(Q)$(LD) -nostdlib -static -T $(OUT)/control_loop.lds \
		$(OUT)/control_loop.o -o $(OUT)/control_loop.elf
	$(Q)objcopy -O binary -j .text $(OUT)/control_loop.elf $@

# One protoc-c run writes each schema's two files (&: makes them one
# grouped target).
$(OUT)/gen/profile.pb-c.c $(OUT)/gen/profile.pb-c.h &: \
		user/export/profile.proto
	$(call msg,PROTOC-C,$@)
	$(Q)mkdir -p $(OUT)/gen
	$(Q)$(PROTOC_C) --proto_path=user/export --c_out=$(OUT)/gen $<
$(OUT)/gen/perfetto_trace.pb-c.c $(OUT)/gen/perfetto_trace.pb-c.h &: \
		user/export/perfetto_trace.proto
	$(call msg,PROTOC-C,$@)
	$(Q)mkdir -p $(OUT)/gen
	$(Q)$(PROTOC_C) --proto_path=user/export --c_out=$(OUT)/gen $<

$(OUT)/gen/%.o: $(OUT)/gen/%.c $(GEN_HDRS)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The encoder includes the generated header; both loaders link the
# generated code (the asan one is built with OUT=build-asan).
$(patsubst user/%.c,$(OUT)/%.o,$(PPROF_SRCS) user/export/perfetto.c): \
	| $(GEN_HDRS)
rfbpf build-asan/rfbpf-asan: $(GEN_OBJS)
# The loader's own objects include the skeleton: it must exist before
# their first build (afterwards their .d files name it).
$(patsubst user/%.c,$(OUT)/%.o,$(filter-out $(LOGIC_SRCS),\
	$(filter %.c,$(LOADER_SRCS)))): | $(OUT)/rfbpf.skel.h $(OUT)/off_cpu.skel.h \
	$(OUT)/thread_exits.skel.h

# The pure logic, compiled once into an archive that the unit tests,
# benches and calibrate_check link (the linker takes only what each
# uses).
LOGIC_OBJS = $(patsubst user/%.c,$(OUT)/%.o,$(filter user/%,$(LOGIC_SRCS))) \
	$(GEN_OBJS)
$(OUT)/liblogic.a: $(LOGIC_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@
	$(Q)$(AR) rcs $@ $^

# The objects a loader links, in directory $(1): user/X.c and user/X.S
# become $(1)/X.o.
loader_objs = $(patsubst user/%.S,$(1)/%.o,\
	$(patsubst user/%.c,$(1)/%.o,$(LOADER_SRCS)))

# The calibration's probe sites (CALIBRATE_SRCS): code that runs in rfbpf.
$(OUT)/attach/calibrate_target.o: user/attach/calibrate_target.S | $(OUT)
	$(call msg,AS,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

rfbpf: $(call loader_objs,$(OUT)) $(OUT)/stub_page_code.o
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(OUT):
	$(Q)mkdir -p $@

# Unit tests: pure logic, no BPF, fast. One binary per tests/unit/test_*.c.
# rfbpf's page and the code that catches threads run in-process too.
UNIT_TESTS := $(patsubst tests/unit/%.c,$(OUT)/tests/%,\
	$(wildcard tests/unit/test_*.c))
UNIT_EXTRA := $(OUT)/stub_page_code.o $(addprefix $(OUT)/attach/,\
	safe_point.o remote_call.o sigframe.o held_stack.o)
# A test's object is kept (not an intermediate file make would delete):
# a change to the logic then only links the tests again.
.PRECIOUS: $(OUT)/tests/%.o
$(OUT)/tests/%.o: tests/unit/%.c | $(GEN_HDRS)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -Itests/unit -c $< -o $@
$(OUT)/tests/%: $(OUT)/tests/%.o $(UNIT_EXTRA) $(OUT)/liblogic.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -ldl -o $@

unit: $(UNIT_TESTS) tests/fixtures
	$(Q)tests/run-unit.sh $(UNIT_TESTS)

tests/fixtures:
	$(Q)$(MAKE) -s -C tests/fixtures

# The GPU tests need the agent and libgpu_synth.so; without a CUDA toolkit
# `make cupti` says so and they skip, by name.
e2e: rfbpf tests/fixtures
	$(Q)$(MAKE) -s -C tests/abi
	$(Q)$(MAKE) -s --no-print-directory cupti
	$(Q)tests/run-e2e.sh

# The start-up calibration (user/attach/calibrate.c) loads BPF and probes
# its own process, so a program of its own checks it, not a unit test:
# `sudo make calibrate-check`.
CALIBRATE_CHECK_OBJS = $(addprefix $(OUT)/attach/,calibrate.o \
	calibrate_target.o probes.o) $(OUT)/liblogic.a
$(OUT)/tests/calibrate/calibrate_check: tests/calibrate/calibrate_check.c \
		$(CALIBRATE_CHECK_OBJS) $(OUT)/rfbpf.skel.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $< $(CALIBRATE_CHECK_OBJS) $(LDLIBS) \
		-o $@
.PHONY: calibrate-check
calibrate-check: $(OUT)/tests/calibrate/calibrate_check
	$(Q)$<

# `sudo make test`: install what is missing, build, run every test. The
# builds use every CPU (the unit tests still run one after the other: the
# runner script is one recipe); the tests that load the machine do not.
JOBS := $(shell nproc 2>/dev/null || echo 2)
test: deps
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) rfbpf
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) unit
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) asan-unit
	$(Q)$(MAKE) --no-print-directory -j$(JOBS) asan
	$(Q)$(MAKE) --no-print-directory cupti-test
	$(Q)$(MAKE) --no-print-directory fuzz-smoke
	$(Q)$(MAKE) --no-print-directory e2e

# AddressSanitizer + UBSan build of the loader and the unit tests.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all
asan:
	$(Q)$(MAKE) --no-print-directory OUT=build-asan OPT="-g -O1" \
		SANITIZE="$(ASAN_FLAGS)" build-asan/rfbpf-asan
build-asan/rfbpf-asan: $(call loader_objs,build-asan) \
		build-asan/stub_page_code.o
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@
asan-unit:
	$(Q)$(MAKE) --no-print-directory OUT=build-asan OPT="-g -O1" \
		SANITIZE="$(ASAN_FLAGS)" unit

# `sudo make demo`: install, build, trace the bundled workload.
demo: deps
	$(Q)$(MAKE) --no-print-directory rfbpf
	$(Q)tools/demo.sh

# `sudo make bench`: measured overheads, written to docs/BENCHMARKS.md.
# The per-event benches probe functions of their own binary
# (bench/probe_target.S) with an empty program (bench/empty.bpf.c, its own
# skeleton) and with rfbpf's programs, loaded by user/attach/probes.c.
BENCH_BINS := $(addprefix $(OUT)/bench/,loader_throughput uprobe_cost \
	uprobe_fanout ring_throughput ring_rate callback_only switch_pingpong)
bench: rfbpf $(BENCH_BINS)
	$(Q)$(MAKE) -s --no-print-directory cupti
	$(Q)bench/run.sh

$(OUT)/bench/%.bpf.o: bench/%.bpf.c bpf/rfbpf.h $(VMLINUX)
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUT)/bench/%.skel.h: $(OUT)/bench/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp
	$(Q)mv $@.tmp $@

# The loader's throughput from a synthetic in-kernel producer.
$(OUT)/bench/ring_rate: bench/ring_rate.c $(OUT)/liblogic.a \
		$(OUT)/bench/ring_producer.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -I$(OUT)/bench $< $(OUT)/liblogic.a \
		$(LDLIBS) -lpthread -o $@

BENCH_PROBE_SRCS := bench/producer.c bench/bench_probes.c \
	bench/probe_target.S $(patsubst user/%.c,$(OUT)/%.o,$(PROBES_SRCS)) \
	$(OUT)/liblogic.a
$(OUT)/bench/uprobe_cost $(OUT)/bench/uprobe_fanout \
		$(OUT)/bench/ring_throughput: $(OUT)/bench/%: \
		bench/%.c $(BENCH_PROBE_SRCS) $(wildcard bench/*.h) \
		$(OUT)/bench/empty.skel.h $(OUT)/rfbpf.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -I$(OUT)/bench $< $(BENCH_PROBE_SRCS) $(LDLIBS) \
		-lpthread -o $@

# Registers rfbpf's callback (and optionally empty uprobes) without
# rfbpf's programs: the cost breakdown of the tiny-op workload.
CALLBACK_ONLY_SRCS := $(addprefix $(OUT)/attach/,activation.o stub_page.o \
	safe_point.o remote_call.o sigframe.o probes.o) \
	$(OUT)/stub_page_code.o $(OUT)/liblogic.a
$(OUT)/bench/callback_only: bench/callback_only.c $(CALLBACK_ONLY_SRCS) \
		$(OUT)/bench/empty.skel.h $(OUT)/rfbpf.skel.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -I$(OUT)/bench $< $(CALLBACK_ONLY_SRCS) $(LDLIBS) \
		-o $@

# Context switches for bench/off_cpu_cost.py: no rfbpf code in it.
$(OUT)/bench/switch_pingpong: bench/switch_pingpong.c | $(OUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -O2 -Wall -Wextra -Werror -pthread $< -o $@

$(OUT)/bench/loader_throughput: bench/loader_throughput.c \
		$(OUT)/liblogic.a | $(OUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) $< $(OUT)/liblogic.a $(LDLIBS) -o $@

# The CUDA side: librfbpf_cupti.so and its tests (cupti-* targets).
include cupti/cupti.mk
# libFuzzer targets (make fuzz, make fuzz-smoke).
include tests/fuzz/fuzz.mk

# Every .d the compiler wrote: each object's and program's headers.
-include $(shell find $(OUT) -name '*.d' 2>/dev/null)

clean:
	$(Q)rm -rf build build-asan rfbpf rfbpf.8 $(VMLINUX)
	$(Q)$(MAKE) -s -C tests/fixtures clean
	$(Q)$(MAKE) -s -C tests/abi clean
