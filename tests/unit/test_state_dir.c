// SPDX-License-Identifier: BSD-2-Clause
/*
 * The state directory: made with its parents on a fresh machine, and rid
 * of what dead processes left, judged against a fake proc tree (the same
 * stat lines the kernel writes) so that pid reuse can be staged.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "attach/state_dir.h"

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static bool exists(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return !access(path, F_OK);
}

/* proc_root/PID/stat of a sleeping process that started at ticks. */
static void fake_process(const char *proc_root, pid_t pid,
			 unsigned long long ticks)
{
	char dir[512], text[256];

	snprintf(dir, sizeof(dir), "%s/%d", proc_root, pid);
	CHECK(!mkdir(dir, 0755));
	snprintf(text, sizeof(text), "%d (python3) S 1 %d %d 0 -1 4194560 "
		 "100 0 0 0 5 3 0 0 20 0 4 0 %llu 123456789 2000\n", pid, pid,
		 pid, ticks);
	put(dir, "stat", text);
}

TEST(creates_missing_parents_with_sane_modes)
{
	char root[] = "/tmp/rfbpf-state-XXXXXX", dir[256], err[256];
	struct stat st;

	CHECK(mkdtemp(root) != NULL);
	snprintf(dir, sizeof(dir), "%s/a/b/rfbpf/", root);
	umask(077);	/* parents must be reachable whatever the umask */
	CHECK_EQ_U64(state_dir_create(dir, err, sizeof(err)), 0);
	umask(022);
	snprintf(dir, sizeof(dir), "%s/a/b", root);
	CHECK(!stat(dir, &st) && (st.st_mode & 07777) == 0755);
	snprintf(dir, sizeof(dir), "%s/a/b/rfbpf", root);
	CHECK(!stat(dir, &st) && (st.st_mode & 07777) == 0700);
	/* Again: it exists, which is no error. */
	CHECK_EQ_U64(state_dir_create(dir, err, sizeof(err)), 0);
	snprintf(dir, sizeof(dir), "rm -rf %s", root);
	CHECK(!system(dir));
}

TEST(an_uncreatable_directory_is_one_line_naming_it)
{
	char err[256];

	CHECK(state_dir_create("/proc/self/no/such", err, sizeof(err)) < 0);
	CHECK(strstr(err, "cannot create /proc/self/no") != NULL);
	CHECK(strstr(err, STATE_DIR_ENV) != NULL);
	CHECK(!strchr(err, '\n'));
}

TEST(stale_is_gone_or_another_start_time)
{
	const char *text = "start_time=4242 handle=7 page=0x1000 lib=/x\n";

	CHECK(state_file_stale(text, 0));		/* gone */
	CHECK(state_file_stale(text, 4243));		/* pid reused */
	CHECK(!state_file_stale(text, 4242));		/* the same process */
	CHECK(!state_file_stale("", 4242));	/* being written: kept */
	CHECK(state_file_stale("", 0));
}

TEST(clean_removes_what_dead_and_reused_pids_left)
{
	char root[] = "/tmp/rfbpf-clean-XXXXXX", proc[256], dir[256];
	char path[512];
	int held;

	CHECK(mkdtemp(root) != NULL);
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(dir, sizeof(dir), "%s/state", root);
	CHECK(!mkdir(proc, 0755) && !mkdir(dir, 0700));
	fake_process(proc, 100, 5000);	/* alive, same start: kept */
	fake_process(proc, 200, 6000);	/* alive, but pid reused */
	fake_process(proc, 300, 7000);
	put(dir, "100.state", "start_time=5000 handle=1 page=0x0 lib=/l\n");
	put(dir, "200.state", "start_time=1234 handle=1 page=0x0 lib=/l\n");
	put(dir, "400.state", "start_time=1 handle=1 page=0x0 lib=/l\n");
	put(dir, "300.lock", "");	/* alive: kept */
	put(dir, "500.lock", "");	/* dead, free: removed */
	put(dir, "600.lock", "");	/* dead, but an rfbpf holds it: kept */
	put(dir, "notes.txt", "not rfbpf's");
	snprintf(path, sizeof(path), "%s/600.lock", dir);
	held = open(path, O_RDWR);
	CHECK(held >= 0 && !flock(held, LOCK_EX));

	CHECK_EQ_U64(state_dir_clean(dir, proc), 3);
	CHECK(exists(dir, "100.state"));
	CHECK(!exists(dir, "200.state"));
	CHECK(!exists(dir, "400.state"));
	CHECK(exists(dir, "300.lock"));
	CHECK(!exists(dir, "500.lock"));
	CHECK(exists(dir, "600.lock"));
	CHECK(exists(dir, "notes.txt"));
	close(held);
	snprintf(path, sizeof(path), "rm -rf %s", root);
	CHECK(!system(path));
}

TEST(the_default_and_the_override)
{
	char path[256];

	unsetenv(STATE_DIR_ENV);
	CHECK_STR(state_dir(), "/run/rfbpf");
	setenv(STATE_DIR_ENV, "", 1);
	CHECK_STR(state_dir(), "/run/rfbpf");
	setenv(STATE_DIR_ENV, "/tmp/x/y", 1);
	state_dir_path(42, "state", path, sizeof(path));
	CHECK_STR(path, "/tmp/x/y/42.state");
	unsetenv(STATE_DIR_ENV);
}

RUN_TESTS()
