// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/memfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "callback_stubs.h"
#include "remote_call.h"
#include "target.h"

static const unsigned char start_stub[] = {
	0x0f, 0x1f, 0x44, 0x00, 0x00,		/* nop5: the uprobe */
	0x48, 0xc7, 0x07, 0x00, 0x00, 0x00, 0x00, /* mov qword [rdi], 0 */
	0x48, 0x89, 0xf8,			/* mov rax, rdi */
	0xc3,					/* ret */
};
static const unsigned char end_stub[] = {
	0x0f, 0x1f, 0x44, 0x00, 0x00,		/* nop5: the uprobe */
	0xc3,					/* ret */
};
_Static_assert(sizeof(start_stub) <= STUB_END_OFFSET, "stubs overlap");

bool kernel_optimizes_nop_uprobes(void)
{
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, " arch_uprobe_optimize\n") != NULL;
	fclose(f);
	return found;
}

static int inject(struct callback_stubs *st, pid_t pid, long nr,
		  const uint64_t args[6], const char *path, uint64_t *ret,
		  char *err, size_t len)
{
	struct remote_call c = {
		.syscall_nr = nr, .find_ms = 3000, .call_ms = 2000,
		.idle = st->idle, .idle_ctx = st->idle_ctx,
		.traced_tid = st->traced_tid,
	};

	memcpy(c.args, args, sizeof(c.args));
	if (path) {
		c.stack_arg = path;
		c.stack_len = strlen(path) + 1;
		c.stack_arg_ptr = 1;	/* memfd_create(name, flags) */
	}
	return remote_call(pid, &c, ret, err, len);
}

/* Fills the target's memfd through /proc/PID/fd: the bytes never need
 * to exist in the target's memory or filesystem (chroots, containers). */
static int fill_memfd(struct callback_stubs *st, pid_t pid, int fd)
{
	unsigned char page[STUB_SIZE];
	char path[64];
	ssize_t n;

	memset(page, 0xcc, sizeof(page));	/* int3 everywhere else */
	memcpy(page + STUB_START_OFFSET, start_stub, sizeof(start_stub));
	memcpy(page + STUB_END_OFFSET, end_stub, sizeof(end_stub));
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	st->own_fd = open(path, O_RDWR | O_CLOEXEC);
	if (st->own_fd < 0)
		return -errno;
	n = pwrite(st->own_fd, page, sizeof(page), 0);
	/* The uprobes attach through our own descriptor of the memfd. */
	snprintf(st->path, sizeof(st->path), "/proc/%d/fd/%d", getpid(),
		 st->own_fd);
	return n == sizeof(page) ? 0 : -EIO;
}

int stubs_map(struct callback_stubs *st, pid_t pid, char *err, size_t len)
{
	uint64_t fd, addr = 0, dummy;
	int ret;

	st->own_fd = -1;
	ret = inject(st, pid, SYS_memfd_create, (uint64_t[6]){ 0,
		     MFD_CLOEXEC }, "rfbpf-callback-stubs", &fd, err, len);
	if (ret)
		return ret;
	if ((int64_t)fd < 0)
		return snprintf(err, len, "memfd_create in the target failed: "
				"%s", strerror(-(int64_t)fd)), (int)fd;
	ret = fill_memfd(st, pid, fd);
	if (!ret)
		ret = inject(st, pid, SYS_mmap, (uint64_t[6]){ 0, STUB_SIZE,
			     PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0 }, NULL,
			     &addr, err, len);
	else
		snprintf(err, len, "cannot fill the stub memfd: %s",
			 strerror(-ret));
	inject(st, pid, SYS_close, (uint64_t[6]){ fd }, NULL, &dummy, err,
	       len);
	if (ret)
		return ret;
	if ((int64_t)addr < 0 && (int64_t)addr > -4096)
		return snprintf(err, len, "mmap in the target failed: %s",
				strerror(-(int64_t)addr)), (int)addr;
	st->addr = addr;
	return 0;
}

int stubs_unmap(struct callback_stubs *st, pid_t pid, char *err, size_t len)
{
	uint64_t ret = 0;
	int e = 0;

	if (st->addr && target_alive(pid))
		e = inject(st, pid, SYS_munmap, (uint64_t[6]){ st->addr,
			   STUB_SIZE }, NULL, &ret, err, len);
	if (!e)
		st->addr = 0;
	if (st->own_fd >= 0)
		close(st->own_fd);
	st->own_fd = -1;
	return e;
}
