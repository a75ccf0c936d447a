// SPDX-License-Identifier: BSD-2-Clause
/*
 * Checking capabilities up front, so a user without them gets one clear
 * line instead of a verifier or perf_event_open errno further down.
 * capget(2) directly: the effective set is all we need, no libcap.
 */
#include <linux/capability.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "privileges.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static bool has_cap(const struct __user_cap_data_struct *d, int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

bool have_tracing_privileges(char *why, size_t len)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0,
	};
	struct __user_cap_data_struct data[2] = {};
	bool bpf, perfmon, admin;

	if (syscall(SYS_capget, &hdr, data)) {
		snprintf(why, len, "cannot read this process's capabilities");
		return false;
	}
	bpf = has_cap(data, CAP_BPF);
	perfmon = has_cap(data, CAP_PERFMON);
	admin = has_cap(data, CAP_SYS_ADMIN);
	if (admin || (bpf && perfmon))
		return true;
	snprintf(why, len, "missing privileges: rfbpf needs CAP_BPF and "
		 "CAP_PERFMON (or CAP_SYS_ADMIN)%s%s; run it with sudo",
		 bpf ? "" : ", CAP_BPF is missing",
		 perfmon ? "" : ", CAP_PERFMON is missing");
	return false;
}
