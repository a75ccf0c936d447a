// SPDX-License-Identifier: BSD-2-Clause
/*
 * RFBPF_SAMPLE=P: the agent registers the RecordFunction callback itself,
 * so ops are observable from the job's start without rfbpf injecting code
 * through ptrace. The callback is {start = rfbpf_probe_op_start, end =
 * rfbpf_probe_op_end, sampling_prob = P, every scope, no inputs/outputs/
 * ids}: PyTorch samples, and rfbpf's uprobes on the two stubs see the ops.
 *
 * The CUDA driver loads the agent when CUDA initialises, normally after
 * libtorch_cpu is loaded, but not always (a job may init CUDA first, or
 * load torch later), so the agent's thread retries every ~100 ms until it
 * finds the library. The removal is registered with atexit() right after
 * the callback is added: libtorch is loaded by then, so our handler runs
 * before libtorch's static destructors tear the callback registry down.
 */
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "control.h"
#include "probes.h"
#include "torch_activation.h"
#include "record_function_abi.h"

enum { TORCH_OFF, TORCH_WAITING, TORCH_DONE };
static int state = TORCH_OFF;		/* the agent's thread only */
static double sample_prob;
static void *torch_lib;
static uint64_t handle;
static pid_t registered_by;

int rf_parse_sample(const char *text, double *p)
{
	char *end;
	double v;

	if (!text)
		return 0;
	v = strtod(text, &end);
	if (end == text || *end || !isfinite(v) || !(v > 0.0) || v > 1.0)
		return -1;
	*p = v;
	return 1;
}

struct find_torch {
	char path[4096];
};

static int match_torch(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_torch *f = data;
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	/* libtorch_cpu.so or libtorch_cpu.so.<version> */
	if (strncmp(base, "libtorch_cpu.so", 15) ||
	    (base[15] && base[15] != '.'))
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", info->dlpi_name);
	return 1;
}

/* A handle on libtorch_cpu if the process already has it; never loads. */
static void *find_torch(void)
{
	struct find_torch f = { .path = "" };
	void *lib = dlopen("libtorch_cpu.so", RTLD_NOLOAD | RTLD_LAZY);

	if (lib)
		return lib;
	/* dlopen may not be called from inside dl_iterate_phdr. */
	if (dl_iterate_phdr(match_torch, &f) && f.path[0])
		lib = dlopen(f.path, RTLD_NOLOAD | RTLD_LAZY);
	return lib;
}

static void remove_callback(void)
{
	void (*remove)(uint64_t);

	/* A forked child inherits the registration; only the process that
	 * made it takes it back, the child's exit leaves it alone. */
	if (!handle || getpid() != registered_by)
		return;
	*(void **)&remove = dlsym(torch_lib, RF_SYM_REMOVE_CALLBACK);
	if (remove)
		remove(handle);
	handle = 0;
	__atomic_store_n(&rfbpf_gpu_control.torch_callback_handle, 0,
			 __ATOMIC_RELEASE);
}

static void register_callback(void *lib)
{
	static int once;
	uint64_t (*add)(struct rf_callback_abi);
	struct rf_callback_abi cb = {
		.start = (uintptr_t)rf_probe_op_start,
		.end = (uintptr_t)rf_probe_op_end,
		.sampling_prob = sample_prob,
	};

	*(void **)&add = dlsym(lib, RF_SYM_ADD_GLOBAL_CALLBACK);
	if (!add) {
		rf_warn_once(&once, "RFBPF_SAMPLE: libtorch_cpu has no %s: "
			     "not activated", RF_SYM_ADD_GLOBAL_CALLBACK);
		dlclose(lib);
		return;
	}
	memset(cb.scopes, 1, sizeof(cb.scopes));
	torch_lib = lib;
	handle = add(cb);
	registered_by = getpid();
	atexit(remove_callback);
	__atomic_store(&rfbpf_gpu_control.sample_prob, &sample_prob,
		       __ATOMIC_RELAXED);
	__atomic_store_n(&rfbpf_gpu_control.torch_callback_handle, handle,
			 __ATOMIC_RELEASE);
}

bool rf_torch_activation_poll(void)
{
	void *lib;

	if (state != TORCH_WAITING)
		return true;
	lib = find_torch();
	if (!lib)
		return false;
	register_callback(lib);
	state = TORCH_DONE;
	return true;
}

void rf_torch_activation_init(void)
{
	static int once;
	const char *text = getenv("RFBPF_SAMPLE");

	switch (rf_parse_sample(text, &sample_prob)) {
	case 1:
		state = TORCH_WAITING;
		rf_torch_activation_poll();
		break;
	case -1:
		rf_warn_once(&once, "RFBPF_SAMPLE=%s is not a probability in "
			     "(0, 1]: no activation", text);
		break;
	}
}
