/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The pprof encoder (user/export/pprof.c over user/model/stack_profile.c)
 * on profiles built from the input: op and thread names of any bytes,
 * Python frames, stacks with frame ids in and out of the names table,
 * processes with names, containers and command lines, any scale (NaN,
 * negative, infinite) and any values. The output is gunzipped, unpacked
 * by protobuf-c's generated code, and must pass pprof_check.h; with scale
 * 1 each sample's values must be its row's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export/pprof.h"
#include "fuzz_bytes.h"
#include "pprof_check.h"

#define MAX_NAMES 16
#define MAX_ROWS 32
#define MAX_DEPTH 8
#define NR_PROCS 3

struct world {
	struct names names;
	struct py_frames py;
	struct stack_profile profile;
	struct pprof_process procs[NR_PROCS];
	char *strings[NR_PROCS * 3 + 1];
	size_t nr_strings;
};

static char *keep(struct world *w, char *s)
{
	w->strings[w->nr_strings++] = s;
	return s;
}

/* pids 0..NR_PROCS-1 have labels; others none (as a process gone). */
static const struct pprof_process *process_of(void *ctx, uint32_t pid)
{
	struct world *w = ctx;

	return pid < NR_PROCS ? &w->procs[pid] : NULL;
}

static void add_names(struct world *w, struct fuzz_input *in)
{
	unsigned nr = fuzz_u8(in) % (MAX_NAMES + 1);

	for (unsigned i = 0; i < nr; i++) {
		char *s = fuzz_string(in), *file;
		uint8_t kind = fuzz_u8(in);

		if (kind & 1) {		/* a Python frame */
			file = fuzz_string(in);
			py_frames_add_loc(&w->py, &w->names, s, file,
					  (int32_t)fuzz_u32(in));
			free(file);
		} else {
			names_intern(&w->names, s, strlen(s));
		}
		free(s);
	}
}

/* An id in the table mostly, past it sometimes (names_get says "?"). */
static uint32_t some_id(const struct world *w, struct fuzz_input *in)
{
	uint32_t v = fuzz_u32(in);

	if (v >> 31)
		return v;
	return w->names.nr ? v % w->names.nr : v;
}

static void add_rows(struct world *w, struct fuzz_input *in)
{
	unsigned nr = fuzz_u8(in) % (MAX_ROWS + 1);

	w->profile.by_shapes = fuzz_u8(in) & 1;
	for (unsigned i = 0; i < nr; i++) {
		uint32_t frames[MAX_DEPTH];
		struct stack_key k = { .frames = frames };
		struct stack_values v;

		k.pid = fuzz_u8(in) % (NR_PROCS + 1);
		k.tid = fuzz_u32(in);
		k.thread_name = some_id(w, in);
		k.depth = fuzz_u8(in) % (MAX_DEPTH + 1);
		for (uint32_t d = 0; d < k.depth; d++)
			frames[d] = some_id(w, in);
		k.shapes = fuzz_u8(in) & 1 ? some_id(w, in) + 1 : 0;
		v.calls = fuzz_u64(in);
		v.self_ns = fuzz_u64(in);
		v.gpu_ns = fuzz_u64(in);
		v.off_cpu_ns = fuzz_u64(in);
		if (stack_profile_add(&w->profile, &k, &v))
			abort();
	}
}

static uint8_t *gunzip(const uint8_t *gz, size_t len, size_t *out_len)
{
	z_stream zs = {};
	size_t cap = len * 4 + 1024;
	uint8_t *out = malloc(cap);
	int rc = Z_OK;

	if (!out || inflateInit2(&zs, 15 + 16) != Z_OK)
		abort();
	zs.next_in = (Bytef *)gz;
	zs.avail_in = len;
	while (rc != Z_STREAM_END) {
		if (zs.total_out == cap) {
			cap *= 2;
			out = realloc(out, cap);
			if (!out)
				abort();
		}
		zs.next_out = out + zs.total_out;
		zs.avail_out = cap - zs.total_out;
		rc = inflate(&zs, Z_NO_FLUSH);
		if (rc != Z_OK && rc != Z_STREAM_END)
			abort();	/* not gzip */
	}
	*out_len = zs.total_out;
	inflateEnd(&zs);
	return out;
}

static int64_t capped(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Scale 1: the samples are the rows with any value, in order, exactly. */
static void check_values(const pc_profile *pr, const struct stack_profile *p,
			 const struct pprof_meta *m)
{
	size_t s = 0;

	for (size_t i = 0; i < p->nr; i++) {
		const struct stack_values *v = &p->rows[i].v;
		int64_t want[4] = { capped(v->calls), capped(v->self_ns) };
		size_t n = 2;

		if (m->gpu)
			want[n++] = capped(v->gpu_ns);
		if (m->off_cpu)
			want[n++] = capped(v->off_cpu_ns);
		bool any = false;
		for (size_t k = 0; k < n; k++)
			any |= want[k] != 0;
		if (!any)
			continue;
		if (s >= pr->n_sample ||
		    memcmp(pr->sample[s]->value, want, n * sizeof(*want)))
			abort();
		s++;
	}
	if (s != pr->n_sample)
		abort();
}

/* RFBPF_FUZZ_DUMP=FILE keeps the profile of the (last) input run, for a
 * look with `go tool pprof -raw FILE`. */
static void dump(const uint8_t *gz, size_t len)
{
	const char *path = getenv("RFBPF_FUZZ_DUMP");
	FILE *f = path ? fopen(path, "we") : NULL;

	if (f) {
		fwrite(gz, 1, len, f);
		fclose(f);
	}
}

static void encode_and_check(struct world *w, const struct pprof_meta *m)
{
	uint8_t *gz, *raw;
	size_t len, raw_len;
	pc_profile *pr;
	const char *why;

	if (pprof_encode(&w->profile, &w->names, m, &gz, &len))
		abort();	/* no limit is near: only ENOMEM may fail */
	dump(gz, len);
	raw = gunzip(gz, len, &raw_len);
	pr = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	if (!pr)
		abort();
	why = pprof_check(pr);
	if (why) {
		fprintf(stderr, "pprof_check: %s\n", why);
		abort();
	}
	for (size_t i = 0; i < pr->n_sample; i++)
		for (size_t k = 0; k < pr->sample[i]->n_value; k++)
			if (pr->sample[i]->value[k] < 0)
				abort();	/* times and calls */
	if (m->scale == 1.0)
		check_values(pr, &w->profile, m);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(raw);
	free(gz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = { data, size };
	struct world w = { .nr_strings = 0 };
	struct pprof_meta m = { .process = process_of, .ctx = &w };
	uint8_t flags = fuzz_u8(&in);

	stack_profile_init(&w.profile);
	m.scale = flags & 1 ? fuzz_double(&in) : 1.0;
	m.gpu = flags & 2;
	m.off_cpu = flags & 4;
	m.py = flags & 8 ? &w.py : NULL;
	m.comment = flags & 16 ? keep(&w, fuzz_string(&in)) : NULL;
	m.time_nanos = fuzz_u64(&in);
	m.duration_nanos = fuzz_u64(&in);
	for (int i = 0; i < NR_PROCS; i++) {
		w.procs[i].name = keep(&w, fuzz_string(&in));
		w.procs[i].container = keep(&w, fuzz_string(&in));
		w.procs[i].cmdline = keep(&w, fuzz_string(&in));
	}
	add_names(&w, &in);
	add_rows(&w, &in);
	encode_and_check(&w, &m);
	stack_profile_free(&w.profile);
	py_frames_free(&w.py);
	names_free(&w.names);
	for (size_t i = 0; i < w.nr_strings; i++)
		free(w.strings[i]);
	return 0;
}
