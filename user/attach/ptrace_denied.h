/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Why the kernel refused rfbpf a process (its /proc/PID/maps, or ptrace).
 * "Permission denied" has several causes, and the one to name depends on
 * who asks: a user without CAP_SYS_PTRACE reading another user's process;
 * a process that made itself undumpable; Yama's ptrace_scope (attach
 * only: it does not guard /proc/PID/maps); and, for root, which has
 * CAP_SYS_PTRACE, only a security module is left: a Landlock sandbox or a
 * container's policy that may not look outside itself (rfbpf -p 1 from
 * inside a sandbox), SELinux, AppArmor, a BPF LSM. The facts are read
 * apart from the sentence, so that each case is tested.
 */
#ifndef RFBPF_PTRACE_DENIED_H
#define RFBPF_PTRACE_DENIED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ptrace_facts {
	pid_t pid;
	bool cap_sys_ptrace;	/* in rfbpf's effective set */
	bool same_user;		/* the target's uid is rfbpf's euid */
	int yama_scope;		/* kernel.yama.ptrace_scope, -1: no Yama */
	char lsms[128];		/* active security modules beyond
				 * capability and Yama, "landlock, bpf";
				 * "" if unknown */
};

/* Reads the facts about pid from the kernel. */
void ptrace_facts_read(pid_t pid, struct ptrace_facts *f);
/* The reason, a clause to follow "Permission denied" ("; ..."), naming
 * what to do. attach: the refusal was of ptrace itself (Yama applies). */
void ptrace_denied_why(const struct ptrace_facts *f, bool attach, char *buf,
		       size_t len);

#endif
