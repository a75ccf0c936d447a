// SPDX-License-Identifier: BSD-2-Clause
/* Which libcupti, and why at run time: cupti_lib.h. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control.h"
#include "cupti_lib.h"

struct rf_cupti rf_cupti;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded;

/* Sonames a CUPTI already in the process answers to; the versioned
 * ones, newest first, are also the ones the agent would load itself (a
 * bare libcupti.so could be any version: taken only when the job has it). */
static const char *const sonames[] = {
	"libcupti.so.13", "libcupti.so.12", "libcupti.so",
};
#define NR_VERSIONED 2

static void *opened_as(void *h, const char *fallback)
{
	struct link_map *lm = NULL;

	if (!h)
		return NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name[0])
		snprintf(rf_cupti.path, sizeof(rf_cupti.path), "%s", fallback);
	else
		snprintf(rf_cupti.path, sizeof(rf_cupti.path), "%s",
			 lm->l_name);
	return h;
}

/* The CUPTI the job already has: by soname, or (a copy loaded by path
 * under another name) by its path in our own maps. */
static void *already_mapped(void)
{
	char line[1024];
	void *h = NULL;
	FILE *f;

	for (size_t i = 0; i < sizeof(sonames) / sizeof(*sonames); i++)
		if ((h = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD)))
			return opened_as(h, sonames[i]);
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (!h && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path || !strstr(path, "/libcupti.so"))
			continue;
		path[strcspn(path, "\n")] = 0;
		h = opened_as(dlopen(path, RTLD_NOW | RTLD_NOLOAD), path);
	}
	fclose(f);
	return h;
}

/* Where a toolkit keeps CUPTI, under CUDA_HOME: lib64 from CUDA 12 on,
 * extras/CUPTI/lib64 in every release (the only place before 12). */
static const char *const toolkit_dirs[] = { "lib64", "extras/CUPTI/lib64" };

/* None mapped: RFBPF_CUPTI_LIB, then CUDA 13's and CUDA 12's by the usual
 * search, then the toolkit's (CUDA_HOME, default /usr/local/cuda). The
 * newer first: a machine with both toolkits and a job that loaded
 * neither has no CUPTI of its own to agree with. */
static void *load_one(void)
{
	const char *env = getenv("RFBPF_CUPTI_LIB");
	const char *home = getenv("CUDA_HOME");
	char path[512];
	void *h;

	if (env && *env)
		return opened_as(dlopen(env, RTLD_NOW | RTLD_LOCAL), env);
	for (size_t i = 0; i < NR_VERSIONED; i++)
		if ((h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL)))
			return opened_as(h, sonames[i]);
	for (size_t d = 0; d < sizeof(toolkit_dirs) / sizeof(*toolkit_dirs); d++) {
		for (size_t i = 0; i < NR_VERSIONED; i++) {
			snprintf(path, sizeof(path), "%s/%s/%s",
				 home && *home ? home : "/usr/local/cuda",
				 toolkit_dirs[d], sonames[i]);
			if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
				return opened_as(h, path);
		}
	}
	return NULL;
}

#define SYM(field, name)						\
	(*(void **)&rf_cupti.field = dlsym(h, name)) ? 0 :		\
	(missing = missing ? missing : name, 1)

static void load(void)
{
	static int warned;
	const char *missing = NULL;
	void *h = already_mapped();
	bool theirs = h != NULL;

	if (!h && !(h = load_one())) {
		rf_warn_once(&warned, "no libcupti found (none in the process, "
			     "none as libcupti.so.13 or .12, none in "
			     "CUDA_HOME; RFBPF_CUPTI_LIB names one): no GPU "
			     "activity");
		return;
	}
	SYM(Subscribe, "cuptiSubscribe");
	SYM(Unsubscribe, "cuptiUnsubscribe");
	SYM(EnableCallback, "cuptiEnableCallback");
	SYM(ActivityEnable, "cuptiActivityEnable");
	SYM(ActivityDisable, "cuptiActivityDisable");
	SYM(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
	SYM(ActivityRegisterTimestampCallback,
	    "cuptiActivityRegisterTimestampCallback");
	SYM(ActivityFlushAll, "cuptiActivityFlushAll");
	SYM(ActivityGetNextRecord, "cuptiActivityGetNextRecord");
	SYM(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
	SYM(GetTimestamp, "cuptiGetTimestamp");
	SYM(GetResultString, "cuptiGetResultString");
	SYM(GetVersion, "cuptiGetVersion");
	/* CUDA 13's: names the holder when CUPTI is taken. */
	*(void **)&rf_cupti.Subscribe_v2 = dlsym(h, "cuptiSubscribe_v2");
	if (!missing && rf_cupti.GetVersion(&rf_cupti.version) != CUPTI_SUCCESS)
		missing = "a version (cuptiGetVersion failed)";
	if (missing) {
		rf_warn_once(&warned, "%s (%s) has no %s: no GPU activity",
			     rf_cupti.path, theirs ? "the job's" : "loaded",
			     missing);
	} else if (!rf_cupti_version_readable(rf_cupti.version)) {
		rf_warn_once(&warned, "%s reports CUPTI API version %u; the "
			     "agent reads the records of CUDA 12 (%u to %u) "
			     "and 13 (%u to %u): no GPU activity",
			     rf_cupti.path, rf_cupti.version,
			     RF_CUPTI12_VERSION_MIN, RF_CUPTI12_VERSION_MAX,
			     RF_CUPTI_VERSION_MIN, RF_CUPTI_VERSION_END - 1);
	} else {
		loaded = true;
		return;
	}
	/* Never half a table: every call or none. */
	memset(&rf_cupti, 0, offsetof(struct rf_cupti, version));
}

bool rf_cupti_load(void)
{
	pthread_once(&once, load);
	return loaded;
}
