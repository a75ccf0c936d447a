/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Loading rfbpf's BPF object and attaching its programs: one uprobe per
 * before() variant the library exports plus end(), all for the target pid
 * only, and the thread-exit tracepoint.
 */
#ifndef RFBPF_PROBES_H
#define RFBPF_PROBES_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "torch_symbols.h"
#include "model/trace.h"

#define PROBES_MAX_LIBS 4
/* Links beyond the libraries' own: callbacks, GPU probes, the watched
 * CUPTI functions (RF_CUPTI_WATCHED_NR) and --memory's allocator probes
 * (PROBES_MEM_NR). */
#define PROBES_MEM_NR 3
#define PROBES_MAX_LINKS (PROBES_MAX_LIBS * RF_V_NR + 6 + 10 + PROBES_MEM_NR)

struct rfbpf_bpf;

struct probes {
	struct rfbpf_bpf *skel;
	struct bpf_link *links[PROBES_MAX_LINKS];
	/* the program of each uprobe link (NULL for others) */
	const struct bpf_program *link_progs[PROBES_MAX_LINKS];
	int nr_links;
	struct { dev_t dev; ino_t ino; } libs[PROBES_MAX_LIBS];
	int nr_libs;
	struct bpf_link *safe_point;	/* armed while looking for one */
	struct bpf_link *safe_point_stale;	/* disarmed, to remove */
	uint32_t exit_slot;	/* its exit_hooks.h slot + 1, 0: none */
};

/* Does this kernel turn uprobes on 5-byte NOPs into trampoline calls
 * (arch_uprobe_optimize)? */
bool probes_kernel_optimizes_nop(void);
/* Opens and loads the BPF object for tgid pid. Returns 0 or -errno, with a
 * one-line reason in err. */
int probes_load(struct probes *p, pid_t pid, unsigned ringbuf_mb,
		bool old_string_abi, double tree_prob, char *err,
		size_t errlen);
/* Tells the programs where this build's RecordFunction keeps what
 * depends on its version (fwd_thread_id_); false if it cannot tell, and
 * backward ops then carry no forward thread. */
bool probes_set_build(struct probes *p, const char *path,
		      const struct torch_symbols *s);
/* Attaches the uprobes of every variant in s to the library at path, for
 * pid only. A library already attached (same inode) is skipped and 0
 * returned. Returns the number of uprobes attached or -errno. */
int probes_attach_lib(struct probes *p, pid_t pid, const char *path,
		      const struct torch_symbols *s, bool verbose);
/* Optimized path: uprobes on start/end callback stubs at these file
 * offsets of path (rfbpf's page, see stub_page.h, or the CUPTI
 * agent's own), for pid only, or for every process mapping path (-1: no
 * perf event bound to a thread of pid, for a file only it maps). */
int probes_attach_callbacks(struct probes *p, pid_t pid, const char *path,
			    uint64_t start_off, uint64_t end_off, bool verbose);
/* --children with callback stubs: the children's side of the stubs
 * (STUB_*_CHILD_CHECK in rfbpf's page at path), for every process that
 * maps it, so a forked child is traced from its first op. */
int probes_attach_child_callbacks(struct probes *p, const char *path,
				  uint64_t start_off, uint64_t end_off,
				  bool verbose);
/* From detach on, a child let go is no child missed. */
void probes_stop_counting_child_misses(struct probes *p);
/* The CUPTI agent's probe functions, as file offsets in the agent (0:
 * an agent from before that probe). */
struct gpu_probe_offsets {
	uint64_t launch, activity;
	uint64_t sync;		/* sync calls */
	uint64_t sync_record;	/* CUPTI's sync records */
	uint64_t device;	/* what the GPUs are */
};
/* The agent's probes (in the agent at path), for pid only; turns on GPU
 * launch tagging. launch and activity are needed, the rest optional. */
int probes_attach_gpu(struct probes *p, pid_t pid, const char *path,
		      const struct gpu_probe_offsets *off, bool verbose);
/* The job's shared NVTX library at path: its nvtxRangePushA and
 * nvtxRangePop (file offsets), for pid only (bpf/nvtx.bpf.c). */
int probes_attach_nvtx(struct probes *p, pid_t pid, const char *path,
		       uint64_t push_off, uint64_t pop_off, bool verbose);
/* The job's libcupti at path: a uprobe on each function of
 * RF_CUPTI_WATCHED found (offs[i], 0 if absent), with i as its cookie,
 * for pid only. Returns how many were attached, or -errno. */
/* The agent's signal and handler for leaving CUPTI inside another tool's
 * cuptiSubscribe (rf_gpu_control.yield_signal), for the watch's probes
 * on cuptiSubscribe to send; sig 0: none. */
/* --memory: the allocator functions of rfbpf.h's rf_mem_source, in its
 * order (file offsets in c10 at path; 0: absent, not attached), for pid
 * only. Returns how many were attached, or -errno. */
int probes_attach_memory(struct probes *p, pid_t pid, const char *path,
			 const uint64_t off[PROBES_MEM_NR], bool verbose);
/* --memory's byte sampling: a sample point per mean bytes on average
 * (bpf/rfbpf.h), before the probes are attached; 0 or -errno. */
int probes_set_memory_sampling(struct probes *p, uint64_t mean);
void probes_set_cupti_yield(struct probes *p, uint32_t sig, uint64_t handler);
int probes_attach_cupti_watch(struct probes *p, pid_t pid, const char *path,
			      const uint64_t *offs, int n, bool verbose);
/* The safe-point probe (safe_point.h): a uprobe at off in lib, for pid,
 * that signals one of tids once with sig. */
int probes_arm_safe_point(struct probes *p, pid_t pid, const char *lib,
			  uint64_t off, int sig, const pid_t *tids, int nr);
/* The same stop from the start-callback probe already attached
 * (probes_attach_callbacks): nothing to attach or remove, and only
 * sampled ops pay for the search. */
int probes_arm_callback_stop(struct probes *p, int sig, const pid_t *tids,
			     int nr);
/* --python-stacks: the target's interpreter as the BPF walk needs it
 * (runtime 0 turns it off). */
struct rf_py_config;
struct rf_inputs_config;
/* The ring buffer the programs write, and the backlog at which they wake
 * its reader: --off-cpu's programs (attach/off_cpu_hooks.h) write there
 * too. */
int probes_ring_fd(const struct probes *p);
uint64_t probes_wakeup_bytes(const struct probes *p);
/* Does rfbpf run in another PID namespace than the kernel's (so BPF
 * translates ids into it)? */
bool probes_pid_namespaced(const struct probes *p);
/* --shapes: read each recorded op's inputs with this build's layout. */
void probes_set_inputs(struct probes *p, const struct rf_inputs_config *cfg);
void probes_set_python(struct probes *p, const struct rf_py_config *cfg);
int probes_allow_stop(struct probes *p, pid_t tid);
void probes_stop_every_thread(struct probes *p);
void probes_disarm_safe_point(struct probes *p);
/* Removes a disarmed safe-point uprobe (slow: after the hold). */
void probes_reap_safe_point(struct probes *p);
/* BPF keeps the events of the children probes_trace_child() names; with
 * wake_on_fork, a traced process forking one wakes the loader. */
int probes_follow_children(struct probes *p, bool wake_on_fork);
/* Adds (on) or removes a child process whose events BPF then keeps. */
int probes_trace_child(struct probes *p, pid_t child, bool on);
/* A traced child's own uprobes, for its pid only, into links[] (at most
 * max): on the page's child probes (path, start_off, end_off) when syms is
 * NULL, else on the library's before()/end() entries. Returns how many
 * or -errno. */
int probes_attach_child(struct probes *p, pid_t child, const char *path,
			const struct torch_symbols *syms, uint64_t start_off,
			uint64_t end_off, struct bpf_link **links, int max);
/* Whether the library at path (by inode) is already probed. */
bool probes_has_lib(const struct probes *p, const char *path);
int probes_events_fd(const struct probes *p);
/* The comm thread tid had as it exited (the BPF side keeps the last few
 * thousand), into buf; false if it is not known. */
bool probes_exited_comm(const struct probes *p, uint32_t tid, char *buf,
			size_t len);
/* Detaching, ends last: the probes that begin ops (and every other) go
 * first, so an op begun before it still ends while the loader drains;
 * then probes_detach_all takes the end probes (and thread exits). */
void probes_detach_starts(struct probes *p);
void probes_detach_all(struct probes *p);
/* Sums the per-CPU BPF counters into c (hits per variant, drops). */
void probes_read_counters(const struct probes *p, struct counts *c);
void probes_destroy(struct probes *p);

#endif
