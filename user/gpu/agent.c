// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "model/clocks.h"
#include "attach/elf_symbols.h"
#include "agent.h"
#include "attach/target.h"

int gpu_agent_find(struct gpu_agent *g, pid_t pid, char *err, size_t len)
{
	static const char *const funcs[] = {
		RF_GPU_SYM_LAUNCH, RF_GPU_SYM_ACTIVITY,
		RF_GPU_SYM_OP_START, RF_GPU_SYM_OP_END, RF_GPU_SYM_SYNC,
		RF_GPU_SYM_SYNC_RECORD, RF_GPU_SYM_DEVICE,
	};
	static const char *const objs[] = { RF_GPU_SYM_CONTROL };
	uint64_t off[7], ctl_off;
	struct rf_gpu_control c;
	char mem[64];
	int ret;

	memset(g, 0, sizeof(*g));
	g->pid = pid;
	g->mem_fd = -1;
	ret = target_find_library(pid, is_cupti_agent_name, g->path,
				  sizeof(g->path));
	if (ret)
		return ret;
	target_mapped_name(g->path, g->shown, sizeof(g->shown));
	if (elf_find_functions(g->path, funcs, 7, off) < 2 ||
	    !off[0] || !off[1] || elf_find_objects(g->path, objs, 1,
						   &ctl_off) != 1)
		return snprintf(err, len, "%s: not an rfbpf CUPTI agent (no "
				"%s/%s/%s)", g->shown, RF_GPU_SYM_LAUNCH,
				RF_GPU_SYM_ACTIVITY, RF_GPU_SYM_CONTROL),
		       -EINVAL;
	g->probes.launch = off[0];
	g->probes.activity = off[1];
	g->op_start_off = off[2];
	g->op_end_off = off[3];
	/* 0: an agent from before syncs, or before their records. */
	g->probes.sync = off[4];
	g->probes.sync_record = off[5];
	g->probes.device = off[6];
	if ((ret = target_addr_of_data_offset(pid, g->path, ctl_off,
					      &g->control_addr)))
		return snprintf(err, len, "%s: its control block is not "
				"mapped in process %d", g->shown, pid), ret;
	snprintf(mem, sizeof(mem), "/proc/%d/mem", pid);
	g->mem_fd = open(mem, O_RDWR | O_CLOEXEC);
	if (g->mem_fd < 0)
		return ret = -errno, snprintf(err, len, "cannot open %s: %s",
					      mem, strerror(-ret)), ret;
	if (gpu_agent_read_control(g, &c) ||
	    c.magic != RF_GPU_CONTROL_MAGIC ||
	    c.abi_version != RF_GPU_ABI_VERSION)
		return snprintf(err, len, "%s: control block has ABI version "
				"%u, rfbpf speaks %u", g->shown,
				c.magic == RF_GPU_CONTROL_MAGIC ?
				c.abi_version : 0, RF_GPU_ABI_VERSION),
		       -EPROTO;
	return 0;
}

int gpu_agent_read_control(const struct gpu_agent *g,
			   struct rf_gpu_control *c)
{
	ssize_t n = pread(g->mem_fd, c, sizeof(*c), (off_t)g->control_addr);

	if (n == (ssize_t)sizeof(*c))
		return 0;
	memset(c, 0, sizeof(*c));
	return n < 0 ? -errno : -EIO;
}

static int write_lease(struct gpu_agent *g, uint64_t until_ns)
{
	off_t at = (off_t)(g->control_addr +
			   offsetof(struct rf_gpu_control, lease_until_ns));

	/* One aligned 8-byte write: the agent never sees half a value. */
	if (pwrite(g->mem_fd, &until_ns, sizeof(until_ns), at) !=
	    (ssize_t)sizeof(until_ns))
		return -errno;
	return 0;
}

int gpu_agent_request_yield(struct gpu_agent *g)
{
	off_t at = (off_t)(g->control_addr +
			   offsetof(struct rf_gpu_control, yield_request));
	uint32_t one = 1;

	if (pwrite(g->mem_fd, &one, sizeof(one), at) != (ssize_t)sizeof(one))
		return -errno;
	return 0;
}

int gpu_agent_renew(struct gpu_agent *g, double now_s)
{
	int ret;

	if (g->renewed_s && now_s - g->renewed_s < GPU_RENEW_S)
		return 0;
	ret = gpu_agent_renew_now(g, now_s);
	return ret ? ret : 1;
}

int gpu_agent_renew_now(struct gpu_agent *g, double now_s)
{
	int ret;

	if (g->mem_fd < 0)
		return -EBADF;
	ret = write_lease(g, monotonic_ns() + GPU_LEASE_NS);
	if (!ret) {
		g->renewed_s = now_s;
		g->leased = true;
	}
	return ret;
}

int gpu_agent_request_flush(struct gpu_agent *g, uint64_t *request)
{
	off_t at = (off_t)(g->control_addr +
			   offsetof(struct rf_gpu_control, flush_request));
	struct rf_gpu_control c;
	int ret = gpu_agent_read_control(g, &c);

	if (ret)
		return ret;
	*request = c.flush_request + 1;
	if (pwrite(g->mem_fd, request, sizeof(*request), at) !=
	    (ssize_t)sizeof(*request))
		return -errno;
	return 0;
}

void gpu_agent_release(struct gpu_agent *g)
{
	if (g->mem_fd >= 0 && g->leased && !write_lease(g, 0))
		g->leased = false;
}

void gpu_agent_close(struct gpu_agent *g)
{
	gpu_agent_release(g);
	if (g->mem_fd >= 0)
		close(g->mem_fd);
	g->mem_fd = -1;
}
