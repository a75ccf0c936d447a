// SPDX-License-Identifier: BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "state_dir.h"
#include "target.h"

const char *state_dir(void)
{
	const char *dir = getenv(STATE_DIR_ENV);

	return dir && *dir ? dir : STATE_DIR_DEFAULT;
}

void state_dir_path(pid_t pid, const char *ext, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%d.%s", state_dir(), pid, ext);
}

/* One directory of the path; chmod after mkdir, so that the umask of
 * whoever runs rfbpf (077 under some sudo setups) does not decide whether
 * other users can reach a parent. */
static int make_one(const char *path, mode_t mode)
{
	if (mkdir(path, mode)) {
		if (errno != EEXIST)
			return -errno;
		return 0;
	}
	return chmod(path, mode) ? -errno : 0;
}

int state_dir_create(const char *dir, char *err, size_t len)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);
	int ret = 0;

	if (!n || n >= sizeof(path))
		return snprintf(err, len, "cannot create the state directory "
				"'%s': %s", dir, strerror(ENAMETOOLONG)),
		       -ENAMETOOLONG;
	memcpy(path, dir, n + 1);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = 0;
	/* Each parent in turn, then the directory itself. */
	for (char *p = path + 1; !ret && (p = strchr(p, '/')); p++) {
		*p = 0;
		ret = make_one(path, 0755);
		if (ret)
			break;
		*p = '/';
	}
	if (!ret)
		ret = make_one(path, 0700);
	if (ret)
		snprintf(err, len, "cannot create %s: %s (set %s to a "
			 "directory rfbpf may write)", path, strerror(-ret),
			 STATE_DIR_ENV);
	return ret;
}

bool state_file_stale(const char *content, unsigned long long start_now)
{
	unsigned long long start;

	if (!start_now)
		return true;
	return sscanf(content, "start_time=%llu ", &start) == 1 &&
	       start != start_now;
}

/* "1234.state" -> 1234 and "state"; false for other names. */
static bool parse_name(const char *name, pid_t *pid, const char **ext)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(name, &end, 10);
	if (errno || end == name || *end != '.' || v <= 0 || v > 0x7fffffff)
		return false;
	*pid = v;
	*ext = end + 1;
	return true;
}

static bool remove_stale_state(const char *path, unsigned long long start)
{
	char text[512] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n > 0)
		text[n] = 0;
	return state_file_stale(text, start) && !unlink(path);
}

/* A lock file of a dead process, unless an rfbpf still holds it (it is
 * about to find its target gone and remove the file itself). */
static bool remove_dead_lock(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	bool removed = false;

	if (fd < 0)
		return false;
	if (!flock(fd, LOCK_EX | LOCK_NB))
		removed = !unlink(path);
	close(fd);
	return removed;
}

int state_dir_clean(const char *dir, const char *proc_root)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int removed = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		unsigned long long start;
		const char *ext;
		pid_t pid;

		if (!parse_name(e->d_name, &pid, &ext))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		start = target_alive_at(proc_root, pid) ?
			target_start_time_at(proc_root, pid) : 0;
		if (!strcmp(ext, "state"))
			removed += remove_stale_state(path, start);
		else if (!strcmp(ext, "lock") && !start)
			removed += remove_dead_lock(path);
	}
	closedir(d);
	return removed;
}

int state_dir_prepare(char *err, size_t len)
{
	int ret = state_dir_create(state_dir(), err, len);

	if (!ret)
		state_dir_clean(state_dir(), "/proc");
	return ret;
}
