/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Python stack reader (user/python/) on arbitrary memory: a traced
 * interpreter's memory is read while it runs, so anything in it may be
 * half-written, freed or reused, and 3.13+ even takes its offsets from
 * it (_Py_DebugOffsets). Every read must stay inside what it asked for,
 * every loop must end.
 *
 * Input: one byte picking the version (3.11, 3.13, 3.14), then the
 * target's memory from IMAGE_BASE on, _PyRuntime at its start. The
 * reader's target_read is swapped for one that reads the input (the
 * linker's --wrap, set for this target in fuzz.mk): addresses outside it
 * fault, as unmapped memory does. The names found go through the model's
 * py_frames.c as they do in a run, and the image, taken as a location
 * table, through line_table.c directly.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "model/py_frames.h"
#include "python/line_table.h"
#include "python/py_stack.h"

#define IMAGE_BASE 0x10000ull
#define MAX_THREADS 8
#define MAX_FRAMES 64

static const uint8_t *image;
static size_t image_len;

int __wrap_target_read(pid_t pid, uint64_t addr, void *buf, size_t len);

int __wrap_target_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	(void)pid;
	if (addr < IMAGE_BASE || addr - IMAGE_BASE > image_len ||
	    len > image_len - (addr - IMAGE_BASE))
		return -EFAULT;
	memcpy(buf, image + (addr - IMAGE_BASE), len);
	return 0;
}

/* The resolver py_session.c gives the model, over one reader. */
static int code_gen(void *ctx, uint32_t pid, uint64_t code, uint32_t *gen)
{
	(void)pid;
	return py_code_gen(ctx, code, gen) ? -1 : 0;
}

static int locate(void *ctx, uint32_t pid, uint64_t code, int32_t unit,
		  char *func, size_t func_len, char *file, size_t file_len,
		  int *line)
{
	struct py_frame f = { code, unit };
	struct py_location loc;

	(void)pid;
	if (py_locate(ctx, &f, &loc))
		return -1;
	snprintf(func, func_len, "%s", loc.qualname);
	snprintf(file, file_len, "%s", loc.filename);
	*line = loc.line;
	return 0;
}

/* One thread's frames, named by the reader and by the model. */
static void walk_thread(struct py_reader *r, uint64_t tstate)
{
	const struct py_resolver res = { code_gen, locate, r };
	struct py_frame f[MAX_FRAMES];
	struct rf_py_frame bf[MAX_FRAMES];
	struct py_location loc;
	struct py_frames pf = { 0 };
	struct names names = { 0 };
	uint32_t gen;
	int n = py_read_frames(r, tstate, f, MAX_FRAMES);

	for (int i = 0; i < n; i++) {
		py_locate(r, &f[i], &loc);
		py_code_gen(r, f[i].code, &gen);
		bf[i] = (struct rf_py_frame){ .code = f[i].code,
					      .unit = f[i].unit };
	}
	py_reader_next_epoch(r);	/* cached entries are checked again */
	if (n > 0) {
		py_frames_stack(&pf, &names, &res, 1, bf, (uint32_t)n, 0);
		py_frames_stack(&pf, &names, &res, 1, bf, (uint32_t)n,
				RF_PY_F_TRUNCATED);
	}
	py_frames_free(&pf);
	names_free(&names);
}

static void read_interpreter(unsigned minor)
{
	struct py_thread th[MAX_THREADS];
	struct py_thread_name tn[MAX_THREADS];
	struct rf_py_config cfg;
	struct py_reader r;
	uint64_t addr;
	char err[256], s[PY_FILE_MAX];
	int n;

	if (py_reader_at(&r, 1, IMAGE_BASE, minor, "fuzz", err, sizeof(err)))
		return;
	py_gil_address(&r, &addr);
	py_bpf_config(&r, 64, &cfg);
	n = py_list_threads(&r, th, MAX_THREADS);
	for (int i = 0; i < n; i++) {
		if (!py_thread_state(&r, th[i].tid, &addr))
			walk_thread(&r, addr);
	}
	py_thread_names(&r, tn, MAX_THREADS);
	py_read_str(&r, IMAGE_BASE + 8, s, sizeof(s));
	py_reader_close(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned minors[] = { 11, 13, 14 };
	int first;

	if (size < 1)
		return 0;
	image = data + 1;
	image_len = size - 1;
	read_interpreter(minors[data[0] % 3]);
	/* The image as a location table too: every unit up to its end. */
	first = image_len >= 4 ? (int)(image[0] | image[1] << 8) : 1;
	for (uint32_t unit = 0; unit <= image_len * 8 && unit < 4096;
	     unit += 1 + unit / 16)
		py_line_of(image, image_len, first, unit);
	return 0;
}
