// SPDX-License-Identifier: BSD-2-Clause
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "ptrace_denied.h"
#include "target.h"

/* lsm_list_modules(2), Linux 6.8; the same number on every arch. */
#ifndef __NR_lsm_list_modules
#define __NR_lsm_list_modules 461
#endif

/* include/uapi/linux/lsm.h: the modules that can refuse a process. */
static const char *lsm_name(uint64_t id)
{
	switch (id) {
	case 101: return "selinux";
	case 102: return "smack";
	case 103: return "tomoyo";
	case 104: return "apparmor";
	case 109: return "bpf";
	case 110: return "landlock";
	default: return NULL;	/* capability, yama (named apart), others */
	}
}

static void read_lsms(char *buf, size_t len)
{
	uint64_t ids[32];
	uint32_t size = sizeof(ids);
	long n = syscall(__NR_lsm_list_modules, ids, &size, 0);
	size_t used = 0;

	buf[0] = 0;
	for (long i = 0; i < n && i < 32; i++) {
		const char *name = lsm_name(ids[i]);

		if (name && used < len)
			used += snprintf(buf + used, len - used, "%s%s",
					 used ? ", " : "", name);
	}
}

static bool has_cap_sys_ptrace(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2] = {};

	return !syscall(SYS_capget, &hdr, data) &&
	       (data[0].effective & (1u << CAP_SYS_PTRACE));
}

void ptrace_facts_read(pid_t pid, struct ptrace_facts *f)
{
	char val[64];
	FILE *yama;

	memset(f, 0, sizeof(*f));
	f->pid = pid;
	f->cap_sys_ptrace = has_cap_sys_ptrace();
	/* Uid: real effective ...; an unreadable status says nothing. */
	f->same_user = target_status(pid, 0, "Uid", val, sizeof(val)) &&
		       (uid_t)strtoul(val, NULL, 10) == geteuid();
	f->yama_scope = -1;
	yama = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (yama) {
		if (fscanf(yama, "%d", &f->yama_scope) != 1)
			f->yama_scope = -1;
		fclose(yama);
	}
	read_lsms(f->lsms, sizeof(f->lsms));
}

void ptrace_denied_why(const struct ptrace_facts *f, bool attach, char *buf,
		       size_t len)
{
	if (attach && f->yama_scope == 3)
		snprintf(buf, len, "kernel.yama.ptrace_scope is 3, which "
			 "forbids every ptrace until reboot; rfbpf needs it "
			 "at most 2 (or trace with --no-activate)");
	else if (!f->cap_sys_ptrace && !f->same_user)
		snprintf(buf, len, "process %d belongs to another user, which "
			 "needs CAP_SYS_PTRACE; run rfbpf with sudo", f->pid);
	else if (!f->cap_sys_ptrace && attach && f->yama_scope >= 1)
		snprintf(buf, len, "kernel.yama.ptrace_scope is %d, which "
			 "lets only CAP_SYS_PTRACE trace a process that is not "
			 "a child; run rfbpf with sudo", f->yama_scope);
	else if (!f->cap_sys_ptrace)
		snprintf(buf, len, "process %d is yours but not dumpable (a "
			 "setuid program, or prctl(PR_SET_DUMPABLE, 0)), which "
			 "needs CAP_SYS_PTRACE; run rfbpf with sudo", f->pid);
	else
		snprintf(buf, len, "rfbpf has CAP_SYS_PTRACE, so a security "
			 "module refused%s%s%s: rfbpf likely runs in a sandbox "
			 "or container that may not look into process %d; run "
			 "rfbpf where that process runs (its container, or the "
			 "host)", f->lsms[0] ? " (active here: " : "", f->lsms,
			 f->lsms[0] ? ")" : "", f->pid);
}
