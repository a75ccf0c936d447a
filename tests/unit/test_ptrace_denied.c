// SPDX-License-Identifier: BSD-2-Clause
/*
 * Which cause of "Permission denied" rfbpf names, case by case: the one a
 * root user in a sandbox met (-p 1 blamed CAP_SYS_PTRACE, which root has)
 * must not read like the one of a user without sudo.
 */
#include <unistd.h>
#include "check.h"
#include "attach/ptrace_denied.h"

static const char *why(const struct ptrace_facts *f, bool attach)
{
	static char buf[512];

	ptrace_denied_why(f, attach, buf, sizeof(buf));
	return buf;
}

TEST(root_in_a_sandbox_is_told_about_security_modules)
{
	struct ptrace_facts f = {
		.pid = 1, .cap_sys_ptrace = true, .same_user = true,
		.yama_scope = -1, .lsms = "landlock, bpf",
	};

	CHECK(strstr(why(&f, false), "security module") != NULL);
	CHECK(strstr(why(&f, false), "(active here: landlock, bpf)") != NULL);
	CHECK(strstr(why(&f, false), "its container, or the host") != NULL);
	CHECK(!strstr(why(&f, false), "sudo"));
	f.lsms[0] = 0;		/* unknown: no empty parenthesis */
	CHECK(!strstr(why(&f, false), "()"));
	CHECK(!strstr(why(&f, false), "active here"));
}

TEST(another_users_process_without_the_capability_needs_sudo)
{
	struct ptrace_facts f = { .pid = 42, .yama_scope = 1 };

	CHECK(strstr(why(&f, false), "another user") != NULL);
	CHECK(strstr(why(&f, false), "sudo") != NULL);
}

TEST(yama_applies_to_ptrace_only)
{
	struct ptrace_facts f = {
		.pid = 42, .same_user = true, .yama_scope = 1,
	};

	/* Reading maps of one's own process: not Yama's doing. */
	CHECK(strstr(why(&f, false), "not dumpable") != NULL);
	CHECK(strstr(why(&f, true), "ptrace_scope is 1") != NULL);
	f.cap_sys_ptrace = true;
	f.yama_scope = 3;	/* not even root */
	CHECK(strstr(why(&f, true), "ptrace_scope is 3") != NULL);
	CHECK(strstr(why(&f, false), "security module") != NULL);
}

TEST(reads_this_process_facts)
{
	struct ptrace_facts f;

	ptrace_facts_read(getpid(), &f);
	CHECK(f.pid == getpid());
	CHECK(f.same_user);
}

RUN_TESTS()
