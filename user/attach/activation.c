// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "model/clocks.h"
#include "activation.h"
#include "control_thread.h"
#include "elf_symbols.h"
#include "record_function_abi.h"
#include "state_dir.h"
#include "target.h"
#include "torch_symbols.h"

#define RF_SYM_OP_ENTRY "_ZN2at27getStepCallbacksUnlessEmptyENS_11RecordScopeE"

static const char *const functions[] = {
	RF_SYM_ADD_GLOBAL_CALLBACK,
	RF_SYM_REMOVE_CALLBACK,
	RF_SYM_OP_ENTRY,
};

/* After this long, say that a call is slow (it is never abandoned). */
#define CALL_MS 2000

int activation_lock(struct activation *a, pid_t pid, char *err, size_t len)
{
	char path[PATH_MAX];
	int ret;

	memset(a, 0, sizeof(*a));
	a->pid = pid;
	a->lock_fd = -1;
	/* Made by every mode at start; again here for callers that lock
	 * first (the benches), with the same code. */
	ret = state_dir_create(state_dir(), err, len);
	if (ret)
		return ret;
	state_dir_path(pid, "lock", path, sizeof(path));
	a->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (a->lock_fd < 0)
		return snprintf(err, len, "cannot open %s: %s", path,
				strerror(errno)), -errno;
	if (flock(a->lock_fd, LOCK_EX | LOCK_NB)) {
		snprintf(err, len, "another rfbpf is already tracing process "
			 "%d; stop it first", pid);
		close(a->lock_fd);
		a->lock_fd = -1;
		return -EBUSY;
	}
	return 0;
}

void activation_unlock(struct activation *a)
{
	char path[PATH_MAX];

	if (a->lock_fd < 0)
		return;
	state_dir_path(a->pid, "lock", path, sizeof(path));
	unlink(path);
	close(a->lock_fd);
	a->lock_fd = -1;
}

int activation_prepare(struct activation *a, const char *lib, char *err,
		       size_t len)
{
	uint64_t off[3];
	struct torch_symbols s;
	bool old_api, new_api;
	int n = elf_find_functions(lib, functions, 3, off);

	snprintf(a->lib, sizeof(a->lib), "%s", lib);
	a->resolved_pid = 0;	/* another library: read maps again */
	/* The error is whichever read failed (the second may fail alone if
	 * the file changed in between). */
	if (n >= 0)
		n = torch_symbols_resolve(lib, &s);
	if (n < 0)
		return snprintf(err, len, "%s: %s", lib,
				elf_symbols_strerror(n)), -EINVAL;
	old_api = s.offset[RF_V_CSTR] || s.offset[RF_V_STRING] ||
		  s.offset[RF_V_STRING_OLD] || s.offset[RF_V_SCHEMA];
	new_api = s.offset[RF_V_DESCRIPTOR] || s.offset[RF_V_DESCRIPTOR_DK];
	if (!off[0] || !off[1] || old_api == new_api || !s.offset[RF_V_END])
		return snprintf(err, len, "%s: not a PyTorch build whose "
				"RecordFunctionCallback layout rfbpf knows "
				"(1.13 to 2.14); nothing was changed (use "
				"--no-activate)", lib), -EINVAL;
	a->add_off = off[0];
	a->remove_off = off[1];
	a->entry_off = off[2];
	return 0;
}

int activation_seccomp_mode(pid_t pid)
{
	char val[16];

	return target_status(pid, 0, "Seccomp", val, sizeof(val)) ? atoi(val) :
	       0;
}

/* Is what was read from maps about this very process? */
static bool resolved(const struct activation *a)
{
	return a->resolved_pid == a->pid &&
	       a->resolved_start == target_start_time(a->pid);
}

/* The functions' addresses in the target, from its maps. */
static void resolve(struct activation *a)
{
	if (target_addr_of_offset(a->pid, a->lib, a->add_off, &a->add_addr))
		a->add_addr = 0;
	if (target_addr_of_offset(a->pid, a->lib, a->remove_off,
				  &a->remove_addr))
		a->remove_addr = 0;
	if (!a->entry_off || target_addr_of_offset(a->pid, a->lib,
						   a->entry_off,
						   &a->entry_addr))
		a->entry_addr = 0;
	a->resolved_pid = a->pid;
	a->resolved_start = target_start_time(a->pid);
}

int activation_begin(struct activation *a, char *err, size_t len)
{
	bool known = resolved(a);
	bool have_page = known && stub_page_still_there(a->pid, &a->page);
	int ret;

	if (!have_page)
		have_page = !stub_page_find(a->pid, &a->page);
	if (!known)
		resolve(a);

	/* Mapping the page means system calls the job never made; a filter
	 * that kills on one of them would kill the job. */
	if (!have_page && activation_seccomp_mode(a->pid))
		return snprintf(err, len, "process %d runs under a seccomp "
				"filter, and rfbpf would have to make system "
				"calls in it that the filter may forbid "
				"(memfd_create, mmap, madvise); trace it with "
				"--no-activate, or start it with rfbpf's CUPTI "
				"agent and RFBPF_SAMPLE", a->pid), -EPERM;
	if (a->probe)
		a->probe->addr = a->entry_addr;
	a->find.probe = a->probe && a->probe->addr ? a->probe : NULL;
	/* The op-entry uprobe traps every op the job runs while it is
	 * looked for, and the kernel takes tens of ms to remove it: with
	 * ops of a few us, each hold cost the job about 0.1 s of its time
	 * (docs/BENCHMARKS.md). Inside rfbpf's own callback only sampled ops
	 * are looked at, by the probe they pay for anyway. */
	if (a->callback_probe && a->handle && have_page) {
		a->callback_probe->addr = a->page.addr + STUB_START_PROBE;
		a->find.probe = a->callback_probe;
	}
	a->find.verbose = a->verbose;
	ret = safe_point_hold(a->pid, &a->find, &a->held, err, len);
	if (ret)
		return ret;
	a->holding = true;
	a->held_since_ms = remote_now_ms();
	/* Tests only: hold the thread longer, so a target killed while held
	 * is tested deterministically. */
	if (getenv("RFBPF_TEST_HOLD_DELAY_MS"))
		usleep(1000 * atoi(getenv("RFBPF_TEST_HOLD_DELAY_MS")));
	if (!have_page)
		ret = stub_page_create(&a->held, &a->page, err, len);
	if (!ret && (ret = remote_protect(&a->held, a->page.addr)))
		snprintf(err, len, "cannot save the thread's state in rfbpf's "
			 "page: %s", strerror(-ret));
	if (ret)
		activation_finish(a);
	else if (a->verbose)
		fprintf(stderr, "rfbpf: %s rfbpf's page at 0x%llx in process "
			"%d\n", a->page.created ? "mapped" : "found",
			(unsigned long long)a->page.addr, a->pid);
	return ret;
}

void activation_finish(struct activation *a)
{
	if (!a->holding)
		return;
	if (remote_restore(&a->held))
		fprintf(stderr, "rfbpf: warning: cannot put thread %d of "
			"process %d back: %s\n", a->held.tid, a->pid,
			strerror(errno));
	safe_point_release(&a->held);
	a->released_ms = remote_now_ms();
	a->holding = false;
	if (a->verbose)
		fprintf(stderr, "rfbpf: thread %d of process %d held %.2f ms\n",
			a->held.tid, a->pid, a->released_ms - a->held_since_ms);
	safe_point_reap();
}

/* Calls fn (a->add_addr or a->remove_addr: 0 when not mapped) on the held
 * thread. */
static int call(struct activation *a, uint64_t fn, uint64_t arg,
		const void *stack, size_t stack_len, uint64_t *ret, char *err,
		size_t len)
{
	uint64_t dummy, args[6] = { arg };

	if (!fn)
		return snprintf(err, len, "%s is not mapped in process %d",
				a->lib, a->pid), -ENOENT;
	return remote_call_function(&a->held, fn, args, stack, stack_len,
				    CALL_MS, ret ? ret : &dummy, err, len);
}

/* What an earlier rfbpf recorded about this very process (same start
 * time): the handle it registered; if it was killed while registering
 * (handle=0 recorded), the page holds the handle the call returned. */
static bool read_state(struct activation *a, uint64_t *handle)
{
	unsigned long long start = 0, h = 0;
	char path[PATH_MAX];
	FILE *f;
	int n;

	state_dir_path(a->pid, "state", path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fscanf(f, "start_time=%llu handle=%llu", &start, &h);
	fclose(f);
	if (n != 2 || start != target_start_time(a->pid)) {
		unlink(path);	/* about an earlier process with this pid */
		return false;
	}
	if (!h && (a->page.addr || !stub_page_find(a->pid, &a->page)))
		stub_page_last_result(a->pid, &a->page, (uint64_t *)&h);
	*handle = h;
	return h != 0;
}

/* handle 0: a registration is about to run (see read_state). */
static int write_state(struct activation *a, uint64_t handle)
{
	char path[PATH_MAX];
	FILE *f;

	state_dir_path(a->pid, "state", path, sizeof(path));
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f, "start_time=%llu handle=%llu page=0x%llx lib=%s\n",
		target_start_time(a->pid), (unsigned long long)handle,
		(unsigned long long)a->page.addr, a->lib);
	return fclose(f) ? -errno : 0;
}

static void clear_state(struct activation *a)
{
	char path[PATH_MAX];

	state_dir_path(a->pid, "state", path, sizeof(path));
	unlink(path);
}

int activation_register(struct activation *a, double sample_prob,
			unsigned scopes, uint64_t start_fn, uint64_t end_fn,
			char *err, size_t len)
{
	struct rf_callback_abi cb = {
		.start = start_fn, .end = end_fn, .sampling_prob = sample_prob,
		.needs_inputs = a->needs_inputs,
	};
	uint64_t old;
	int ret;

	if (read_state(a, &old)) {
		fprintf(stderr, "rfbpf: replacing the callback (handle %llu) a "
			"killed rfbpf left in process %d\n",
			(unsigned long long)old, a->pid);
		ret = call(a, a->remove_addr, old, NULL, 0, NULL, err, len);
		if (ret)
			return ret;
		clear_state(a);
	}
	for (int i = 0; i < RF_NUM_SCOPES; i++)
		cb.scopes[i] = !!(scopes & (1u << i));
	if ((ret = write_state(a, 0)))
		fprintf(stderr, "rfbpf: warning: cannot record the callback "
			"in %s: %s\n", state_dir(), strerror(-ret));
	ret = call(a, a->add_addr, 0, &cb, sizeof(cb), &a->handle, err, len);
	if (ret)
		return ret;
	if (!a->handle)
		return snprintf(err, len, "addGlobalCallback returned no "
				"handle"), -EINVAL;
	if (a->verbose)
		fprintf(stderr, "rfbpf: registered RecordFunction callback "
			"%llu in process %d (p=%g)\n",
			(unsigned long long)a->handle, a->pid, sample_prob);
	write_state(a, a->handle);
	return 0;
}

int activation_replace(struct activation *a, double sample_prob,
		       unsigned scopes, uint64_t start_fn, uint64_t end_fn,
		       struct replace_times *times, char *err, size_t len)
{
	int ret;

	if (!a->handle)
		return snprintf(err, len, "no callback registered"), -EINVAL;
	ret = activation_begin(a, err, len);
	if (ret)
		return ret;
	times->held = (uint64_t)(a->held_since_ms * 1e6);
	/* Removed first, so that a crash in between leaves at most one
	 * callback, which the state file (handle 0) and the page's result
	 * slot let --deactivate find. */
	ret = call(a, a->remove_addr, a->handle, NULL, 0, NULL, err, len);
	times->removed = monotonic_ns();
	if (!ret) {
		clear_state(a);
		a->handle = 0;
		times->adding = monotonic_ns();
		ret = activation_register(a, sample_prob, scopes, start_fn,
					  end_fn, err, len);
	}
	activation_finish(a);
	times->released = (uint64_t)(a->released_ms * 1e6);
	times->tid = a->held.tid;
	return ret;
}

int activation_stop(struct activation *a, char *err, size_t len)
{
	int ret;

	if (!a->handle)
		return 0;
	if (!target_alive(a->pid)) {
		clear_state(a);
		a->handle = 0;
		return 0;
	}
	ret = activation_begin(a, err, len);
	if (!ret) {
		ret = call(a, a->remove_addr, a->handle, NULL, 0, NULL, err,
			   len);
		activation_finish(a);
	}
	if (!ret || !target_alive(a->pid)) {	/* gone: nothing to undo */
		ret = 0;
		clear_state(a);
		a->handle = 0;
	}
	return ret;
}

bool activation_reap_control(struct activation *a)
{
	struct stub_page page;
	int ret;

	if (stub_page_find(a->pid, &page))
		return false;
	ret = control_thread_reap(a->pid, &page,
				  2 * CONTROL_LEASE_NS / 1000000);
	if (ret)
		fprintf(stderr, "rfbpf: %s the control thread a killed rfbpf "
			"left in process %d\n", ret > 0 ? "stopped" :
			"warning: its lease will end", a->pid);
	return ret != 0;
}

int activation_remove_leftover(struct activation *a, bool *found, char *err,
			       size_t len)
{
	bool control = activation_reap_control(a);

	*found = read_state(a, &a->handle) || control;
	if (!*found) {
		clear_state(a);
		return 0;
	}
	return activation_stop(a, err, len);
}
