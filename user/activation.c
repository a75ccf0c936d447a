// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "activation.h"
#include "elf_symbols.h"
#include "record_function_abi.h"
#include "remote_call.h"
#include "target.h"
#include "torch_symbols.h"

static const char *const functions[] = {
	RF_SYM_ADD_GLOBAL_CALLBACK,
	RF_SYM_REMOVE_CALLBACK,
};

/* Long enough for addGlobalCallback to find a blocked thread in a busy
 * process; a target with none gets a clear error after this. */
#define FIND_MS 3000
#define CALL_MS 2000

static void state_path(pid_t pid, const char *ext, char *buf, size_t len)
{
	snprintf(buf, len, ACTIVATION_STATE_DIR "/%d.%s", pid, ext);
}

int activation_lock(struct activation *a, pid_t pid, char *err, size_t len)
{
	char path[128];

	memset(a, 0, sizeof(*a));
	a->pid = pid;
	a->lock_fd = -1;
	if (mkdir(ACTIVATION_STATE_DIR, 0700) && errno != EEXIST)
		return snprintf(err, len, "cannot create " ACTIVATION_STATE_DIR
				": %s", strerror(errno)), -errno;
	state_path(pid, "lock", path, sizeof(path));
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
	char path[128];

	if (a->lock_fd < 0)
		return;
	state_path(a->pid, "lock", path, sizeof(path));
	unlink(path);
	close(a->lock_fd);
	a->lock_fd = -1;
}

int activation_prepare(struct activation *a, const char *lib, char *err,
		       size_t len)
{
	uint64_t off[2];
	struct torch_symbols s;
	bool old_api, new_api;
	int n = elf_find_functions(lib, functions, 2, off);

	snprintf(a->lib, sizeof(a->lib), "%s", lib);
	if (n < 0 || torch_symbols_resolve(lib, &s) < 0)
		return snprintf(err, len, "%s: %s", lib,
				elf_symbols_strerror(n)), -EINVAL;
	old_api = s.offset[RF_V_CSTR] || s.offset[RF_V_STRING] ||
		  s.offset[RF_V_STRING_OLD] || s.offset[RF_V_SCHEMA];
	new_api = s.offset[RF_V_DESCRIPTOR] || s.offset[RF_V_DESCRIPTOR_DK];
	if (n != 2 || old_api == new_api || !s.offset[RF_V_END])
		return snprintf(err, len, "%s: not a PyTorch build whose "
				"RecordFunctionCallback layout rfbpf knows "
				"(1.13 to 2.14); nothing was changed (use "
				"--no-activate)", lib), -EINVAL;
	a->add_off = off[0];
	a->remove_off = off[1];
	return 0;
}

static int call(struct activation *a, uint64_t off, uint64_t arg,
		const void *stack, size_t stack_len, uint64_t *ret, char *err,
		size_t len)
{
	struct remote_call c = {
		.args = { arg }, .stack_arg = stack, .stack_len = stack_len,
		.find_ms = FIND_MS, .call_ms = CALL_MS,
		.idle = a->idle, .idle_ctx = a->idle_ctx,
		.verbose = a->verbose, .traced_tid = a->traced_tid,
	};
	uint64_t dummy;

	if (target_addr_of_offset(a->pid, a->lib, off, &c.fn))
		return snprintf(err, len, "%s is not mapped in process %d",
				a->lib, a->pid), -ENOENT;
	return remote_call(a->pid, &c, ret ? ret : &dummy, err, len);
}

/* A callback left by an rfbpf that was killed: its handle, if the record
 * is about this very process (same start time). */
static bool read_leftover(struct activation *a, uint64_t *handle)
{
	unsigned long long start = 0, h = 0;
	char path[128];
	FILE *f;
	int n;

	state_path(a->pid, "state", path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fscanf(f, "start_time=%llu handle=%llu", &start, &h);
	fclose(f);
	if (n != 2 || start != target_start_time(a->pid)) {
		unlink(path);	/* about an earlier process with this pid */
		return false;
	}
	*handle = h;
	return true;
}

static int write_state(struct activation *a)
{
	char path[128];
	FILE *f;

	state_path(a->pid, "state", path, sizeof(path));
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f, "start_time=%llu handle=%llu lib=%s\n",
		target_start_time(a->pid), (unsigned long long)a->handle,
		a->lib);
	return fclose(f) ? -errno : 0;
}

static void clear_state(struct activation *a)
{
	char path[128];

	state_path(a->pid, "state", path, sizeof(path));
	unlink(path);
}

int activation_start(struct activation *a, double sample_prob,
		     unsigned scopes, uint64_t start_fn, uint64_t end_fn,
		     char *err, size_t len)
{
	struct rf_callback_abi cb = {
		.start = start_fn, .end = end_fn, .sampling_prob = sample_prob,
	};
	uint64_t old;
	int ret;

	if (read_leftover(a, &old)) {
		fprintf(stderr, "rfbpf: replacing the callback (handle %llu) a "
			"killed rfbpf left in process %d\n",
			(unsigned long long)old, a->pid);
		ret = call(a, a->remove_off, old, NULL, 0, NULL, err, len);
		if (ret)
			return ret;
		clear_state(a);
	}
	for (int i = 0; i < RF_NUM_SCOPES; i++)
		cb.scopes[i] = !!(scopes & (1u << i));
	ret = call(a, a->add_off, 0, &cb, sizeof(cb), &a->handle, err, len);
	if (ret)
		return ret;
	if (!a->handle)
		return snprintf(err, len, "addGlobalCallback returned no "
				"handle"), -EINVAL;
	if (a->verbose)
		fprintf(stderr, "rfbpf: registered RecordFunction callback "
			"%llu in process %d (p=%g)\n",
			(unsigned long long)a->handle, a->pid, sample_prob);
	if ((ret = write_state(a)))
		fprintf(stderr, "rfbpf: warning: cannot record the callback "
			"in " ACTIVATION_STATE_DIR ": %s\n", strerror(-ret));
	return 0;
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
	ret = call(a, a->remove_off, a->handle, NULL, 0, NULL, err, len);
	if (!ret) {
		clear_state(a);
		a->handle = 0;
	}
	return ret;
}

int activation_remove_leftover(struct activation *a, bool *found, char *err,
			       size_t len)
{
	*found = read_leftover(a, &a->handle);
	if (!*found)
		return 0;
	return activation_stop(a, err, len);
}
