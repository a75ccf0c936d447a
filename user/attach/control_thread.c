// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "model/clocks.h"
#include "control_thread.h"
#include "safe_point.h"
#include "target.h"

_Static_assert(sizeof(struct control_block) <= STUB_CONTROL_MAX,
	       "the control block must fit the page's data");

#define CALL_MS 2000
#define FIELD(f) offsetof(struct control_block, f)

static int io(pid_t pid, uint64_t addr, void *buf, size_t len, bool write)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)addr, len };
	ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0) :
			    process_vm_readv(pid, &local, 1, &remote, 1, 0);

	return n == (ssize_t)len ? 0 : -EFAULT;
}

static int read_u64(pid_t pid, uint64_t block, size_t off, uint64_t *v)
{
	return io(pid, block + off, v, sizeof(*v), false);
}

static int write_u64(pid_t pid, uint64_t block, size_t off, uint64_t v)
{
	return io(pid, block + off, &v, sizeof(v), true);
}

static uint32_t read_state(pid_t pid, uint64_t block)
{
	uint32_t v = CONTROL_NONE;

	io(pid, block + FIELD(state), &v, sizeof(v), false);
	return v;
}

/* Waits up to wait_ms for the thread at block to leave CONTROL_RUNNING
 * (exited, parked by the job's exit, or never started). */
static int wait_gone(pid_t pid, uint64_t block, int wait_ms)
{
	uint64_t until = monotonic_ns() + wait_ms * 1000000ull;

	for (;;) {
		if (read_state(pid, block) != CONTROL_RUNNING ||
		    !target_alive(pid))
			return 0;
		if (monotonic_ns() >= until)
			return -ETIMEDOUT;
		usleep(2000);
	}
}

int control_thread_reap(pid_t pid, const struct stub_page *page,
			int wait_ms)
{
	uint64_t block = page->addr + STUB_CONTROL;

	int ret;

	if (!page->addr || read_state(pid, block) != CONTROL_RUNNING)
		return 0;
	write_u64(pid, block, FIELD(lease_ns), 0);
	ret = wait_gone(pid, block, wait_ms);
	return ret ? ret : 1;
}

enum {
	F_ATTR_INIT, F_ATTR_STACK, F_ATTR_DETACH, F_CREATE, F_ATTR_DESTROY,
	F_ATFORK, F_ATEXIT, F_NR
};

static const char *const libc_fns[F_NR] = {
	"pthread_attr_init", "pthread_attr_setstacksize",
	"pthread_attr_setdetachstate", "pthread_create",
	"pthread_attr_destroy", "__register_atfork", "__cxa_atexit",
};

/* fn(args) on the held thread; its int result must be 0. */
static int call0(struct held_thread *h, uint64_t fn, const char *name,
		 uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		 char *err, size_t len)
{
	uint64_t args[6] = { a0, a1, a2, a3 }, ret = 0;
	int e = remote_call_function(h, fn, args, NULL, 0, CALL_MS, &ret, err,
				     len);

	if (e)
		return e;
	if ((int)ret)
		return snprintf(err, len, "%s failed in process %d: %s", name,
				h->pid, strerror((int)ret > 0 ? (int)ret :
						 -(int)ret)), -EINVAL;
	return 0;
}

/* The block as the thread must find it, written around the two words
 * the job's fork and exit handlers may be using (gate, and whether they
 * are registered). */
static int init_block(pid_t pid, uint64_t page,
		      const struct rf_callback_abi *cb, uint64_t add_fn,
		      uint64_t remove_fn, uint64_t lease_ns)
{
	uint64_t block = page + STUB_CONTROL;
	struct control_block b;
	int ret;

	_Static_assert(offsetof(struct control_block, ops) ==
		       STUB_OPS - STUB_CONTROL, "the stubs' op count");
	memset(&b, 0, sizeof(b));
	b.lease_ns = lease_ns;
	b.add_fn = add_fn;
	b.remove_fn = remove_fn;
	b.cb = *cb;
	b.cb.sampling_prob = 1.0;	/* a burst is a full trace */
	/* ...and one that counts only: the same ops, the page's count
	 * callbacks, nothing for PyTorch to record for them */
	b.cb_count = b.cb;
	b.cb_count.start = page + STUB_COUNT_START_OFFSET;
	b.cb_count.end = page + STUB_COUNT_END_OFFSET;
	b.cb_count.needs_inputs = b.cb_count.needs_outputs = 0;
	b.cb_count.needs_ids = 0;
	ret = io(pid, block, &b, FIELD(gate), true);
	if (!ret)
		ret = io(pid, block + FIELD(handle), &b.handle,
			 FIELD(atfork_registered) - FIELD(handle), true);
	return ret;
}

int control_thread_start(struct control_thread *ct, struct held_thread *h,
			 const struct stub_page *page,
			 const struct rf_callback_abi *cb, uint64_t add_fn,
			 uint64_t remove_fn, char *err, size_t len)
{
	uint64_t block = page->addr + STUB_CONTROL, code = page->addr;
	uint64_t fn[F_NR], attr = block + FIELD(attr);
	uint32_t registered = 0, gate = 0;
	int ret;

	memset(ct, 0, sizeof(*ct));
	ct->pid = h->pid;
	if (read_state(h->pid, block) == CONTROL_RUNNING)
		return snprintf(err, len, "a control thread already runs in "
				"process %d", h->pid), -EBUSY;
	io(h->pid, block + FIELD(gate), &gate, sizeof(gate), false);
	if (gate & GATE_CLOSED)
		return snprintf(err, len, "process %d is exiting", h->pid),
		       -ESRCH;
	if ((ret = target_libc_functions(h->pid, libc_fns, F_NR, fn, err,
					 len)))
		return ret;
	ct->lease_ns = monotonic_ns() + CONTROL_LEASE_NS;
	if ((ret = init_block(h->pid, page->addr, cb, add_fn, remove_fn,
			      ct->lease_ns)))
		return snprintf(err, len, "cannot write the control block: "
				"%s", strerror(-ret)), ret;
	io(h->pid, block + FIELD(atfork_registered), &registered,
	   sizeof(registered), false);
	if (!registered) {
		ret = call0(h, fn[F_ATFORK], "__register_atfork",
			    code + STUB_CONTROL_PREPARE,
			    code + STUB_CONTROL_PARENT, 0, 0, err, len);
		if (!ret)
			ret = call0(h, fn[F_ATEXIT], "__cxa_atexit",
				    code + STUB_CONTROL_EXIT, 0, 0, 0, err,
				    len);
		if (ret)
			return ret;
		registered = 1;
		io(h->pid, block + FIELD(atfork_registered), &registered,
		   sizeof(registered), true);
	}
	ret = call0(h, fn[F_ATTR_INIT], "pthread_attr_init", attr, 0, 0, 0,
		    err, len);
	if (ret)
		return ret;
	ret = call0(h, fn[F_ATTR_STACK], "pthread_attr_setstacksize", attr,
		    CONTROL_STACK_SIZE, 0, 0, err, len);
	if (!ret)
		ret = call0(h, fn[F_ATTR_DETACH], "pthread_attr_setdetachstate",
			    attr, 1 /* PTHREAD_CREATE_DETACHED */, 0, 0, err,
			    len);
	if (!ret)
		ret = call0(h, fn[F_CREATE], "pthread_create",
			    block + FIELD(pthread), attr,
			    code + STUB_CONTROL_MAIN, 0, err, len);
	if (!ret)
		safe_point_release_new_threads(h);
	call0(h, fn[F_ATTR_DESTROY], "pthread_attr_destroy", attr, 0, 0, 0,
	      err, len);
	if (ret)
		return ret;
	ct->block = block;
	return 0;
}

bool control_thread_lapsed(const struct control_thread *ct)
{
	return ct->block && read_state(ct->pid, ct->block) == CONTROL_EXITED;
}

int control_thread_renew(struct control_thread *ct, uint64_t now_ns)
{
	if (!ct->block)
		return -ENOENT;
	if (ct->lease_ns > now_ns + CONTROL_LEASE_NS / 2)
		return 0;
	ct->lease_ns = now_ns + CONTROL_LEASE_NS;
	return write_u64(ct->pid, ct->block, FIELD(lease_ns), ct->lease_ns);
}

size_t control_thread_room(struct control_thread *ct)
{
	uint64_t done = 0;

	if (!ct->block || read_u64(ct->pid, ct->block, FIELD(done), &done))
		return 0;
	return done + CONTROL_BURSTS > ct->written ?
	       done + CONTROL_BURSTS - ct->written : 0;
}

int control_thread_add_burst(struct control_thread *ct, uint64_t on_ns,
			     uint64_t off_ns, bool count_only)
{
	struct control_burst b = { on_ns, off_ns, count_only };
	int ret;

	if (!ct->block)
		return -ENOENT;
	/* the burst first, then the count that hands it over */
	ret = io(ct->pid, ct->block + FIELD(burst) +
		 (ct->written % CONTROL_BURSTS) * sizeof(b), &b, sizeof(b),
		 true);
	if (!ret)
		ret = write_u64(ct->pid, ct->block, FIELD(written),
				ct->written + 1);
	if (!ret)
		ct->written++;
	return ret;
}

int control_thread_end_burst(struct control_thread *ct, uint64_t seq,
			     uint64_t off_ns)
{
	uint64_t done = 0;

	if (!ct->block || !seq || seq > ct->written)
		return -ENOENT;
	if (read_u64(ct->pid, ct->block, FIELD(done), &done))
		return -ESRCH;
	if (done >= seq)
		return 0;	/* over already */
	return write_u64(ct->pid, ct->block, FIELD(burst) +
			 ((seq - 1) % CONTROL_BURSTS) *
			 sizeof(struct control_burst) +
			 offsetof(struct control_burst, off_ns), off_ns);
}

int control_thread_results(struct control_thread *ct,
			   struct control_result *out, size_t max)
{
	uint64_t done = 0;
	size_t n = 0;
	int ret;

	if (!ct->block)
		return -ENOENT;
	if ((ret = read_u64(ct->pid, ct->block, FIELD(done), &done)))
		return ret;
	while (ct->done < done && n < max) {
		ret = io(ct->pid, ct->block + FIELD(result) +
			 (ct->done % CONTROL_BURSTS) * sizeof(*out), &out[n],
			 sizeof(*out), false);
		if (ret)
			return ret;
		ct->done++;
		n++;
	}
	return (int)n;
}

int control_thread_cpu(struct control_thread *ct, uint64_t *cpu_ns,
		       uint64_t *switches)
{
	unsigned long long ns = 0;
	uint64_t tid = 0;
	char path[96];
	FILE *f;
	int n;

	*cpu_ns = *switches = 0;
	if (!ct->block || read_u64(ct->pid, ct->block, FIELD(tid), &tid) ||
	    !tid || read_u64(ct->pid, ct->block, FIELD(switches), switches))
		return -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/task/%llu/schedstat", ct->pid,
		 (unsigned long long)tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fscanf(f, "%llu", &ns);
	fclose(f);
	*cpu_ns = ns;
	return n == 1 ? 0 : -EINVAL;
}

int control_thread_stop(struct control_thread *ct, int wait_ms)
{
	int ret;

	if (!ct->block)
		return 0;
	write_u64(ct->pid, ct->block, FIELD(lease_ns), 0);
	ret = wait_gone(ct->pid, ct->block, wait_ms);
	if (!ret)
		ct->block = 0;
	return ret;
}
