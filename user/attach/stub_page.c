// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "stub_page.h"

static int page_io(pid_t pid, uint64_t addr, void *buf, size_t len,
		   bool write)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)addr, len };
	ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0) :
			    process_vm_readv(pid, &local, 1, &remote, 1, 0);

	return n == (ssize_t)len ? 0 : -EFAULT;
}

static bool has_magic(pid_t pid, uint64_t addr)
{
	char magic[sizeof(STUB_MAGIC_TEXT)];

	return !page_io(pid, addr + STUB_MAGIC, magic, sizeof(magic), false) &&
	       !memcmp(magic, STUB_MAGIC_TEXT, sizeof(magic));
}

bool stub_page_still_there(pid_t pid, const struct stub_page *p)
{
	return p->addr && has_magic(pid, p->addr);
}

int stub_page_find(pid_t pid, struct stub_page *p)
{
	unsigned long long lo, hi;
	char path[64], line[512];
	FILE *f;

	memset(p, 0, sizeof(*p));
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "/memfd:" STUB_MEMFD_NAME " ") ||
		    sscanf(line, "%llx-%llx", &lo, &hi) != 2 ||
		    !has_magic(pid, lo))
			continue;
		p->addr = lo;
		/* The very file mapped there, whatever the target's mount
		 * namespace: uprobes attach through this path. */
		snprintf(p->path, sizeof(p->path), "/proc/%d/map_files/"
			 "%llx-%llx", pid, lo, hi);
		break;
	}
	fclose(f);
	return p->addr ? 0 : -ENOENT;
}

/* rfbpf writes the code through the target's descriptor of the memfd, so
 * the bytes never need to be in the target's memory or file system. */
static int fill_code(pid_t pid, int64_t fd)
{
	char path[64];
	ssize_t n;
	int own;

	snprintf(path, sizeof(path), "/proc/%d/fd/%lld", pid, (long long)fd);
	own = open(path, O_RDWR | O_CLOEXEC);
	if (own < 0)
		return -errno;
	n = pwrite(own, stub_page_code, STUB_PAGE_SIZE, 0);
	close(own);
	return n == STUB_PAGE_SIZE ? 0 : -EIO;
}

/* One system call on h; a failure, of the injection or of the call
 * itself, is -errno with a reason in err. */
static int run(struct held_thread *h, long nr, const uint64_t args[6],
	       const char *mem, size_t mem_len, int64_t *r, char *err,
	       size_t len)
{
	return remote_syscall_checked(h, nr, args, mem, mem_len, r,
				      "mapping rfbpf's page", err, len);
}

int stub_page_create(struct held_thread *h, struct stub_page *p, char *err,
		     size_t len)
{
	static const char name[] = STUB_MEMFD_NAME;
	char ignored[128];
	int64_t base, fd = -1, r;
	int e;

	memset(p, 0, sizeof(*p));
	/* The whole range first, read+write: the data pages. */
	e = run(h, SYS_mmap, (uint64_t[6]){ 0, STUB_MAP_SIZE, PROT_READ |
		PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1ull, 0 }, NULL, 0,
		&base, err, len);
	if (e)
		return e;
	e = run(h, SYS_memfd_create, (uint64_t[6]){ 0, MFD_CLOEXEC }, name,
		sizeof(name), &fd, err, len);
	/* Tests only: stay between two system calls of the page's making,
	 * so that rfbpf killed there is tested deterministically. */
	if (!e && getenv("RFBPF_TEST_PAGE_DELAY_MS"))
		usleep(1000 * atoi(getenv("RFBPF_TEST_PAGE_DELAY_MS")));
	if (!e && (e = fill_code(h->pid, fd)))
		snprintf(err, len, "cannot write rfbpf's page: %s",
			 strerror(-e));
	/* The code page over the first page of the range, and the data
	 * pages wiped in every child (see stub_page.h). */
	if (!e)
		e = run(h, SYS_mmap, (uint64_t[6]){ base, STUB_PAGE_SIZE,
			PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0 },
			NULL, 0, &r, err, len);
	if (!e)
		e = run(h, SYS_madvise, (uint64_t[6]){ base + STUB_PAGE_SIZE,
			STUB_MAP_SIZE - STUB_PAGE_SIZE, MADV_WIPEONFORK },
			NULL, 0, &r, err, len);
	if (fd >= 0)
		run(h, SYS_close, (uint64_t[6]){ fd }, NULL, 0, &r, ignored,
		    sizeof(ignored));
	if (!e && (e = page_io(h->pid, base + STUB_MAGIC,
			       (void *)STUB_MAGIC_TEXT,
			       sizeof(STUB_MAGIC_TEXT), true)))
		snprintf(err, len, "cannot write rfbpf's page");
	if (e) {
		run(h, SYS_munmap, (uint64_t[6]){ base, STUB_MAP_SIZE }, NULL,
		    0, &r, ignored, sizeof(ignored));
		return e;
	}
	if (stub_page_find(h->pid, p) || p->addr != (uint64_t)base)
		return snprintf(err, len, "rfbpf's page is not where it was "
				"mapped"), -ENOENT;
	p->created = true;
	return 0;
}

int stub_page_set_on(pid_t pid, const struct stub_page *p, bool on)
{
	unsigned char v = on;

	return p->addr ? page_io(pid, p->addr + STUB_ON, &v, 1, true) : 0;
}

int stub_page_set_child_on(pid_t child, const struct stub_page *p, bool on)
{
	unsigned char v = on;

	return p->addr ? page_io(child, p->addr + STUB_CHILD_ON, &v, 1, true) :
	       -ENOENT;
}

int stub_page_mark_in_child(pid_t child, const struct stub_page *p)
{
	return p->addr ? page_io(child, p->addr + STUB_MAGIC,
				 (void *)STUB_MAGIC_TEXT,
				 sizeof(STUB_MAGIC_TEXT), true) : -ENOENT;
}

int stub_page_last_result(pid_t pid, const struct stub_page *p,
			  uint64_t *result)
{
	return page_io(pid, p->addr + STUB_RESULT, result, sizeof(*result),
		       false);
}
