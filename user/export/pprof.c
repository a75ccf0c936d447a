// SPDX-License-Identifier: BSD-2-Clause
/*
 * The Profile message is built in protobuf-c's structs, packed, and
 * gzipped (pprof readers expect gzip on disk and over HTTP).
 *
 * Memory: a profile has one sample per row, so every per-sample part (the
 * sample, its values, at most LABELS_MAX labels, one location id per
 * frame) is carved out of arrays sized from the profile before the first
 * row is looked at: a handful of allocations however many rows there are,
 * and pointers into them never move. Functions and locations, one per
 * distinct op name, grow as names are met; the pointer arrays protobuf-c
 * wants for them are filled in at the end, once they stop moving. Strings
 * are interned in a struct names whose first entry is "", which makes its
 * ids the string table's indices.
 *
 * Values are not samples of a periodic event: each is a sum of measured
 * (or, with scale != 1, estimated) op times and calls. So the period is 1
 * nanosecond of CPU, i.e. a value stands for itself and pprof must not
 * multiply it by anything.
 *
 * Functions get no file name: an op name (aten::mm) is not a place in a
 * source file, and an invented one ("[pytorch op]") would only show up as
 * a fake file in pprof's -lines/-files views and in `list`. A Python
 * frame is one: its function is named by its qualified name and file, and
 * each line of it is a location of its own (as Go's own profiles have a
 * location per program counter).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "atomic_file.h"
#include "gen/profile.pb-c.h"
#include "model/u64map.h"
#include "pprof.h"
#include "utf8.h"

/* protobuf-c's names for the messages, shortened. */
typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

/* pid, process, tid, thread, container, cmdline, input_dims,
 * torch_version. */
#define LABELS_MAX 9
/* Stacks of depth 0 (GPU work launched outside any op) get this frame, so
 * their time shows in pprof's views instead of only in the total. The
 * marker profile_sink.c gives GPU kernels launched outside any op. */
#define OUTSIDE_ANY_OP "[outside any op]"

/* --memory adds Go's heap profile types, so Parca, Pyroscope and pprof
 * read them as they read a Go heap profile. */
enum sample_type { TYPE_CALLS, TYPE_SELF_CPU, TYPE_GPU, TYPE_OFF_CPU,
		   TYPE_ALLOC_OBJECTS, TYPE_ALLOC_SPACE, TYPE_INUSE_OBJECTS,
		   TYPE_INUSE_SPACE, TYPES_MAX };

/* One op name: its function, its location, the location's single line. */
struct op_frame {
	pb_function function;
	pb_location location;
	pb_line line;
	pb_line *line_ptr;	/* location.line points here */
};

/* Label keys, as string indices. */
struct label_keys {
	int64_t pid, process, tid, thread, container, cmdline, input_dims,
		torch_version, rank;
};

struct builder {
	const struct names *names;	/* op and thread names */
	const struct pprof_meta *m;
	struct names strings;		/* the string table; "" is 0 */
	bool nomem;			/* sticky: an allocation failed */
	struct label_keys keys;
	size_t nr_types;		/* the types this profile has */
	enum sample_type order[TYPES_MAX];	/* ... which, in order */
	pb_value_type types[TYPES_MAX], *type_ptrs[TYPES_MAX], period_type;
	int64_t default_type, comment;
	/* Per sample, sized up front. */
	pb_sample *samples, **sample_ptrs;
	size_t nr_samples;
	int64_t *values;		/* TYPES_MAX slots per sample */
	pb_label *labels, **label_ptrs;
	size_t nr_labels;
	uint64_t *location_ids;
	size_t nr_location_ids;
	/* Per op name, grown as met; frames[i] has location and function
	 * id i + 1. */
	struct op_frame *frames;
	size_t nr_frames, cap_frames;
	struct u64map location_of_frame;	/* frame id + 1 -> location id */
	/* Python functions: (name id, file id) + 1 -> function id */
	struct u64map function_of_py;
	uint64_t outside_location;		/* 0 until needed */
	pb_location **location_ptrs;
	pb_function **function_ptrs;
};

/* profile.proto is proto3, whose strings must be UTF-8: Pyroscope and
 * Parca decode it so, and refuse a whole profile for one op name, thread
 * name or command line that is not. Those come from the target as bytes;
 * invalid ones become U+FFFD here. */
static int64_t intern_len(struct builder *b, const char *s, size_t len)
{
	char *valid = NULL;
	uint32_t id;

	if (!utf8_valid(s, len)) {
		valid = utf8_repair(s, len, &len);
		if (!valid) {
			b->nomem = true;
			return 0;
		}
		s = valid;
	}
	id = names_intern(&b->strings, s, len);
	free(valid);
	if (id == UINT32_MAX) {
		b->nomem = true;
		return 0;
	}
	return id;
}

static int64_t intern(struct builder *b, const char *s)
{
	return intern_len(b, s, strlen(s));
}

static int64_t scaled(uint64_t raw, double scale)
{
	double v;

	if (scale == 1.0)	/* exact, even past 2^53 */
		return raw > INT64_MAX ? INT64_MAX : (int64_t)raw;
	v = round((double)raw * scale);
	if (!(v > 0))		/* also NaN */
		return 0;
	return v >= 0x1p63 ? INT64_MAX : (int64_t)v;
}

static void *alloc_array(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

static void set_value_type(pb_value_type *t, int64_t type, int64_t unit)
{
	*t = (pb_value_type)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	t->type = type;
	t->unit = unit;
}

/* The strings every profile has, interned first so that "" is index 0. */
static void intern_fixed(struct builder *b)
{
	int64_t ns;

	intern(b, "");
	ns = intern(b, "nanoseconds");
	set_value_type(&b->types[TYPE_CALLS], intern(b, "calls"),
		       intern(b, "count"));
	set_value_type(&b->types[TYPE_SELF_CPU], intern(b, "self_cpu"), ns);
	set_value_type(&b->types[TYPE_GPU], intern(b, "gpu"), ns);
	set_value_type(&b->types[TYPE_OFF_CPU], intern(b, "off_cpu"), ns);
	set_value_type(&b->types[TYPE_ALLOC_OBJECTS], intern(b, "alloc_objects"),
		       intern(b, "count"));
	set_value_type(&b->types[TYPE_ALLOC_SPACE], intern(b, "alloc_space"),
		       intern(b, "bytes"));
	set_value_type(&b->types[TYPE_INUSE_OBJECTS], intern(b, "inuse_objects"),
		       intern(b, "count"));
	set_value_type(&b->types[TYPE_INUSE_SPACE], intern(b, "inuse_space"),
		       intern(b, "bytes"));
	set_value_type(&b->period_type, intern(b, "cpu"), ns);
	b->default_type = b->types[TYPE_SELF_CPU].type;
	b->keys = (struct label_keys){
		.pid = intern(b, "pid"), .process = intern(b, "process"),
		.tid = intern(b, "tid"), .thread = intern(b, "thread"),
		.container = intern(b, "container"),
		.cmdline = intern(b, "cmdline"),
		.input_dims = intern(b, "input_dims"),
		.torch_version = intern(b, "torch_version"),
		.rank = intern(b, "rank"),
	};
	if (b->m->comment && *b->m->comment)
		b->comment = intern(b, b->m->comment);
}

static int builder_init(struct builder *b, const struct stack_profile *p,
			const struct names *names, const struct pprof_meta *m)
{
	size_t rows = p->nr, ids = 0;

	memset(b, 0, sizeof(*b));
	b->names = names;
	b->m = m;
	b->order[b->nr_types++] = TYPE_CALLS;
	b->order[b->nr_types++] = TYPE_SELF_CPU;
	if (m->gpu)
		b->order[b->nr_types++] = TYPE_GPU;
	if (m->off_cpu)
		b->order[b->nr_types++] = TYPE_OFF_CPU;
	for (int k = TYPE_ALLOC_OBJECTS; m->memory && k <= TYPE_INUSE_SPACE;
	     k++)
		b->order[b->nr_types++] = k;
	for (size_t i = 0; i < b->nr_types; i++)
		b->type_ptrs[i] = &b->types[b->order[i]];
	for (size_t i = 0; i < rows; i++)
		ids += p->rows[i].depth ? p->rows[i].depth : 1;
	b->samples = alloc_array(rows, sizeof(*b->samples));
	b->sample_ptrs = alloc_array(rows, sizeof(*b->sample_ptrs));
	b->values = alloc_array(rows * TYPES_MAX, sizeof(*b->values));
	b->labels = alloc_array(rows * LABELS_MAX, sizeof(*b->labels));
	b->label_ptrs = alloc_array(rows * LABELS_MAX, sizeof(*b->label_ptrs));
	b->location_ids = alloc_array(ids, sizeof(*b->location_ids));
	if (!b->samples || !b->sample_ptrs || !b->values || !b->labels ||
	    !b->label_ptrs || !b->location_ids)
		return -1;
	intern_fixed(b);
	return b->nomem ? -1 : 0;
}

static void builder_free(struct builder *b)
{
	names_free(&b->strings);
	free(b->samples);
	free(b->sample_ptrs);
	free(b->values);
	free(b->labels);
	free(b->label_ptrs);
	free(b->location_ids);
	free(b->frames);
	u64map_free(&b->location_of_frame);
	u64map_free(&b->function_of_py);
	free(b->location_ptrs);
	free(b->function_ptrs);
}

/* A new location of a function named name (a new function too, unless
 * function says which: its id); its location id, 0 on ENOMEM. */
static uint64_t new_frame(struct builder *b, const char *name,
			  const char *file, int line, uint64_t function)
{
	struct op_frame *f;
	int64_t name_id = intern(b, name);

	if (b->nr_frames == b->cap_frames) {
		size_t cap = b->cap_frames ? b->cap_frames * 2 : 64;
		struct op_frame *frames = reallocarray(b->frames, cap,
						       sizeof(*frames));

		if (!frames) {
			b->nomem = true;
			return 0;
		}
		b->frames = frames;
		b->cap_frames = cap;
	}
	f = &b->frames[b->nr_frames++];
	f->function = (pb_function)PERFTOOLS__PROFILES__FUNCTION__INIT;
	f->function.id = function ? 0 : b->nr_frames;
	f->function.name = name_id;
	f->function.system_name = name_id;
	if (file && *file)
		f->function.filename = intern(b, file);
	f->line = (pb_line)PERFTOOLS__PROFILES__LINE__INIT;
	f->line.function_id = function ? function : b->nr_frames;
	f->line.line = line > 0 ? line : 0;
	f->location = (pb_location)PERFTOOLS__PROFILES__LOCATION__INIT;
	f->location.id = b->nr_frames;
	return b->nr_frames;
}

static uint64_t new_op_frame(struct builder *b, const char *name)
{
	return new_frame(b, name, NULL, 0, 0);
}

/* A Python frame's location: the function (name and file) made once, a
 * location per line of it. */
static uint64_t python_location(struct builder *b, const struct py_loc *l)
{
	const char *func = names_get(b->names, l->func);
	const char *file = names_get(b->names, l->file);
	uint64_t key = ((uint64_t)l->func << 32 | l->file) + 1;
	uint64_t *fn = u64map_get(&b->function_of_py, key), id;

	if (fn)
		return new_frame(b, func, file, l->line, *fn);
	id = new_frame(b, func, file, l->line, 0);
	if (id && !u64map_put(&b->function_of_py, key, id))
		b->nomem = true;
	return id;
}

static uint64_t location_of(struct builder *b, uint32_t frame)
{
	uint64_t key = (uint64_t)frame + 1, *known, id;

	const struct py_loc *py = b->m->py ? py_frames_loc(b->m->py, frame) :
				  NULL;

	known = u64map_get(&b->location_of_frame, key);
	if (known)
		return *known;
	id = py ? python_location(b, py) :
		  new_op_frame(b, names_get(b->names, frame));
	if (id && !u64map_put(&b->location_of_frame, key, id))
		b->nomem = true;
	return id;
}

/* pprof wants the leaf first; rows hold the outermost op first. */
static void add_locations(struct builder *b, pb_sample *s,
			  const struct stack_row *r)
{
	s->location_id = &b->location_ids[b->nr_location_ids];
	if (!r->depth) {
		if (!b->outside_location)
			b->outside_location = new_op_frame(b, OUTSIDE_ANY_OP);
		s->location_id[s->n_location_id++] = b->outside_location;
	}
	for (uint32_t i = r->depth; i-- > 0;)
		s->location_id[s->n_location_id++] =
			location_of(b, r->frames[i]);
	b->nr_location_ids += s->n_location_id;
}

static void add_label(struct builder *b, pb_sample *s, int64_t key,
		      int64_t str, int64_t num)
{
	pb_label *l = &b->labels[b->nr_labels];

	*l = (pb_label)PERFTOOLS__PROFILES__LABEL__INIT;
	l->key = key;
	l->str = str;
	l->num = num;
	b->label_ptrs[b->nr_labels++] = l;
	s->n_label++;
}

/* A longer cmdline is cut, never inside a UTF-8 character. */
static size_t cmdline_len(const char *cmdline)
{
	return utf8_cut(cmdline, strnlen(cmdline, PPROF_CMDLINE_MAX + 1),
			PPROF_CMDLINE_MAX);
}

static void add_labels(struct builder *b, pb_sample *s,
		       const struct stack_row *r)
{
	const struct pprof_meta *m = b->m;
	const struct pprof_process *proc =
		m->process ? m->process(m->ctx, r->pid) : NULL;

	s->label = &b->label_ptrs[b->nr_labels];
	add_label(b, s, b->keys.pid, 0, r->pid);
	if (proc && proc->name)
		add_label(b, s, b->keys.process, intern(b, proc->name), 0);
	add_label(b, s, b->keys.tid, 0, r->tid);
	/* UINT32_MAX (or any id past the table) means no name is known. */
	if (r->thread_name < b->names->nr)
		add_label(b, s, b->keys.thread,
			  intern(b, names_get(b->names, r->thread_name)), 0);
	if (proc && proc->container && *proc->container)
		add_label(b, s, b->keys.container,
			  intern(b, proc->container), 0);
	if (proc && proc->cmdline && *proc->cmdline)
		add_label(b, s, b->keys.cmdline,
			  intern_len(b, proc->cmdline,
				     cmdline_len(proc->cmdline)), 0);
	/* One daemon may trace several torch builds: each sample says its
	 * own, for pprof -tagfocus torch_version=2.14.1. */
	if (proc && proc->torch_version && *proc->torch_version)
		add_label(b, s, b->keys.torch_version,
			  intern(b, proc->torch_version), 0);
	/* A distributed job's rank, for pprof -tagfocus rank=3. */
	if (proc && proc->has_rank)
		add_label(b, s, b->keys.rank, 0, proc->rank);
	/* --shapes: the op's Input Dims, for pprof -tagfocus/-tags. */
	if (r->shapes && r->shapes - 1 < b->names->nr)
		add_label(b, s, b->keys.input_dims,
			  intern(b, names_get(b->names, r->shapes - 1)), 0);
}

static void add_sample(struct builder *b, const struct stack_row *r)
{
	double scale = b->m->scale;
	const int64_t all[TYPES_MAX] = {
		[TYPE_CALLS] = scaled(r->v.calls, scale),
		[TYPE_SELF_CPU] = scaled(r->v.self_ns, scale),
		[TYPE_GPU] = scaled(r->v.gpu_ns, scale),
		[TYPE_OFF_CPU] = scaled(r->v.off_cpu_ns, scale),
		[TYPE_ALLOC_OBJECTS] = scaled(r->v.alloc_blocks, scale),
		[TYPE_ALLOC_SPACE] = scaled(r->v.alloc_bytes, scale),
		[TYPE_INUSE_OBJECTS] = scaled(r->v.inuse_blocks, scale),
		[TYPE_INUSE_SPACE] = scaled(r->v.inuse_bytes, scale),
	};
	int64_t v[TYPES_MAX];
	bool any = false;
	pb_sample *s;

	for (size_t i = 0; i < b->nr_types; i++) {
		v[i] = all[b->order[i]];
		any |= v[i] != 0;
	}
	if (!any)
		return;
	s = &b->samples[b->nr_samples];
	*s = (pb_sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
	s->value = &b->values[b->nr_samples * TYPES_MAX];
	s->n_value = b->nr_types;
	memcpy(s->value, v, b->nr_types * sizeof(*v));
	add_locations(b, s, r);
	add_labels(b, s, r);
	b->sample_ptrs[b->nr_samples++] = s;
}

/* Points the profile at the builder's parts; 0, or -1 on ENOMEM. */
static int builder_finish(struct builder *b, pb_profile *pr)
{
	const struct pprof_meta *m = b->m;
	size_t nr_functions = 0;

	b->location_ptrs = alloc_array(b->nr_frames, sizeof(*b->location_ptrs));
	b->function_ptrs = alloc_array(b->nr_frames, sizeof(*b->function_ptrs));
	if (!b->location_ptrs || !b->function_ptrs)
		return -1;
	for (size_t i = 0; i < b->nr_frames; i++) {
		struct op_frame *f = &b->frames[i];

		f->line_ptr = &f->line;
		f->location.line = &f->line_ptr;
		f->location.n_line = 1;
		b->location_ptrs[i] = &f->location;
		/* Another line of a Python function has none of its own. */
		if (f->function.id)
			b->function_ptrs[nr_functions++] = &f->function;
	}
	*pr = (pb_profile)PERFTOOLS__PROFILES__PROFILE__INIT;
	pr->n_sample_type = b->nr_types;
	pr->sample_type = b->type_ptrs;
	pr->n_sample = b->nr_samples;
	pr->sample = b->sample_ptrs;
	pr->n_location = b->nr_frames;
	pr->location = b->location_ptrs;
	pr->n_function = nr_functions;
	pr->function = b->function_ptrs;
	pr->n_string_table = b->strings.nr;
	pr->string_table = b->strings.strs;
	pr->time_nanos = m->time_nanos;
	pr->duration_nanos = m->duration_nanos;
	pr->period_type = &b->period_type;
	pr->period = 1;
	pr->default_sample_type = b->default_type;
	if (b->comment) {
		pr->n_comment = 1;
		pr->comment = &b->comment;
	}
	return 0;
}

static int gzip(const uint8_t *in, size_t len, uint8_t **out,
		size_t *out_len)
{
	z_stream zs = {};
	uLong bound;
	uint8_t *buf, *fit;
	int rc;

	/* windowBits 15 + 16: a 32 KiB window, with a gzip header and
	 * trailer instead of zlib's. */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	bound = deflateBound(&zs, len);
	/* One deflate call: both sizes must fit zlib's 32-bit counters. */
	if (len > UINT32_MAX || bound > UINT32_MAX) {
		deflateEnd(&zs);
		return -EFBIG;
	}
	buf = malloc(bound);
	if (!buf) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = len;
	zs.next_out = buf;
	zs.avail_out = bound;
	rc = deflate(&zs, Z_FINISH);
	deflateEnd(&zs);
	if (rc != Z_STREAM_END) {	/* cannot happen with deflateBound */
		free(buf);
		return -EIO;
	}
	fit = realloc(buf, zs.total_out);
	*out = fit ? fit : buf;
	*out_len = zs.total_out;
	return 0;
}

int pprof_encode(const struct stack_profile *p, const struct names *names,
		 const struct pprof_meta *m, uint8_t **out, size_t *len)
{
	struct builder b;
	pb_profile pr;
	uint8_t *packed = NULL;
	size_t packed_len;
	int err = -ENOMEM;

	*out = NULL;
	*len = 0;
	if (builder_init(&b, p, names, m))
		goto out;
	for (size_t i = 0; i < p->nr && !b.nomem; i++)
		add_sample(&b, &p->rows[i]);
	if (b.nomem || builder_finish(&b, &pr))
		goto out;
	packed_len = perftools__profiles__profile__get_packed_size(&pr);
	packed = malloc(packed_len ? packed_len : 1);
	if (!packed)
		goto out;
	perftools__profiles__profile__pack(&pr, packed);
	err = gzip(packed, packed_len, out, len);
out:
	free(packed);
	builder_free(&b);
	return err;
}

int pprof_write_file(const char *path, const struct stack_profile *p,
		     const struct names *names, const struct pprof_meta *m)
{
	uint8_t *buf;
	size_t len;
	int err = pprof_encode(p, names, m, &buf, &len);

	if (err)
		return err;
	err = atomic_write_file(path, buf, len);
	free(buf);
	return err;
}

struct profile_file {
	char *name;
	struct timespec mtime;
};

static int newest_first(const void *a, const void *b)
{
	const struct profile_file *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec > y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec > y->mtime.tv_nsec ? -1 : 1;
	/* Same time: names usually carry a timestamp; the greater is newer. */
	return -strcmp(x->name, y->name);
}

/* The regular files in d named like profiles; 0 or -errno. */
static int list_profiles(DIR *d, struct profile_file **files, size_t *nr)
{
	size_t cap = 0;
	struct dirent *e;
	struct stat st;

	for (errno = 0; (e = readdir(d)); errno = 0) {
		struct profile_file *f;

		if (fnmatch("profile-*.pb.gz", e->d_name, 0) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;	/* not a profile, or already gone */
		if (*nr == cap) {
			cap = cap ? cap * 2 : 16;
			f = reallocarray(*files, cap, sizeof(*f));
			if (!f)
				return -ENOMEM;
			*files = f;
		}
		f = &(*files)[*nr];
		f->name = strdup(e->d_name);
		if (!f->name)
			return -ENOMEM;
		f->mtime = st.st_mtim;
		++*nr;
	}
	return errno ? -errno : 0;
}

int pprof_prune(const char *dir, unsigned keep)
{
	struct profile_file *files = NULL;
	size_t nr = 0;
	DIR *d = opendir(dir);
	int err;

	if (!d)
		return -errno;
	err = list_profiles(d, &files, &nr);
	if (!err) {
		qsort(files, nr, sizeof(*files), newest_first);
		/* Goes on past a failure: each removal frees space. */
		for (size_t i = keep; i < nr; i++)
			if (unlinkat(dirfd(d), files[i].name, 0) &&
			    errno != ENOENT && !err)
				err = -errno;
	}
	for (size_t i = 0; i < nr; i++)
		free(files[i].name);
	free(files);
	closedir(d);
	return err;
}
