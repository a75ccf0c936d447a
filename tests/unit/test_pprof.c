// SPDX-License-Identifier: BSD-2-Clause
/*
 * The stack profile (rows keyed by process, thread and op stack) and the
 * pprof encoder: profiles are decoded back with the same generated
 * protobuf-c code and, when a Go toolchain is installed, read by
 * `go tool pprof` itself, the reader that matters.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "check.h"
#include "export/pprof.h"
#include "gen/profile.pb-c.h"
#include "model/names.h"
#include "model/stack_profile.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;

static uint32_t intern(struct names *n, const char *s)
{
	return names_intern(n, s, strlen(s));
}

static int add(struct stack_profile *p, uint32_t pid, uint32_t tid,
	       uint32_t thread, const uint32_t *frames, uint32_t depth,
	       uint64_t calls, uint64_t self_ns, uint64_t gpu_ns)
{
	struct stack_key k = { .pid = pid, .tid = tid, .thread_name = thread,
			       .frames = frames, .depth = depth };
	struct stack_values v = { .calls = calls, .self_ns = self_ns,
				  .gpu_ns = gpu_ns };

	return stack_profile_add(p, &k, &v);
}

TEST(stack_profile_same_key_merges)
{
	struct stack_profile p;
	uint32_t frames[] = { 1, 2, 3 };

	stack_profile_init(&p);
	CHECK(!add(&p, 10, 11, 5, frames, 3, 1, 100, 7));
	frames[2] = 99;		/* the profile owns its copy */
	CHECK(!add(&p, 10, 11, 5, (uint32_t[]){ 1, 2, 3 }, 3, 2, 50, 0));
	CHECK_EQ_U64(p.nr, 1);
	CHECK_EQ_U64(p.rows[0].v.calls, 3);
	CHECK_EQ_U64(p.rows[0].v.self_ns, 150);
	CHECK_EQ_U64(p.rows[0].v.gpu_ns, 7);
	CHECK_EQ_U64(p.rows[0].depth, 3);
	CHECK(p.rows[0].frames != frames);
	CHECK_EQ_U64(p.rows[0].frames[2], 3);
	stack_profile_free(&p);
}

TEST(stack_profile_any_key_difference_is_a_new_row)
{
	struct stack_profile p;
	uint32_t f[] = { 1, 2, 3 };

	stack_profile_init(&p);
	CHECK(!add(&p, 10, 11, 5, f, 3, 1, 1, 0));
	CHECK(!add(&p, 12, 11, 5, f, 3, 1, 1, 0));	/* pid */
	CHECK(!add(&p, 10, 12, 5, f, 3, 1, 1, 0));	/* tid */
	CHECK(!add(&p, 10, 11, 6, f, 3, 1, 1, 0));	/* thread name */
	CHECK(!add(&p, 10, 11, 5, f, 2, 1, 1, 0));	/* a prefix */
	CHECK(!add(&p, 10, 11, 5, (uint32_t[]){ 1, 2, 4 }, 3, 1, 1, 0));
	CHECK(!add(&p, 10, 11, 5, (uint32_t[]){ 3, 2, 1 }, 3, 1, 1, 0));
	CHECK(!add(&p, 10, 11, 5, NULL, 0, 0, 0, 9));	/* depth 0 */
	CHECK(!add(&p, 10, 11, 5, NULL, 0, 0, 0, 1));
	CHECK_EQ_U64(p.nr, 8);
	CHECK_EQ_U64(p.rows[0].v.calls, 1);	/* first sight order */
	CHECK_EQ_U64(p.rows[1].pid, 12);
	CHECK_EQ_U64(p.rows[4].depth, 2);
	CHECK_EQ_U64(p.rows[7].depth, 0);
	CHECK_EQ_U64(p.rows[7].v.gpu_ns, 10);
	stack_profile_free(&p);
}

/* Stack s of a family of 3000 distinct stacks, depths 1..8. */
static uint32_t make_stack(uint32_t s, uint32_t *frames)
{
	uint32_t depth = 1 + s % 8;

	for (uint32_t i = 0; i < depth; i++)
		frames[i] = s * 7 + i;
	return depth;
}

#define MANY 3000

static int add_many(struct stack_profile *p, bool reversed)
{
	uint32_t frames[8];
	int failed = 0;

	for (uint32_t i = 0; i < MANY; i++) {
		uint32_t s = reversed ? MANY - 1 - i : i;
		uint32_t depth = make_stack(s, frames);

		failed |= add(p, 1, 1 + s % 3, 0, frames, depth, 1, s, 0);
	}
	return failed;
}

TEST(stack_profile_grows_and_finds_every_row_again)
{
	struct stack_profile p;
	uint32_t frames[8];

	stack_profile_init(&p);
	CHECK(!add_many(&p, false));
	CHECK(!add_many(&p, true));
	CHECK_EQ_U64(p.nr, MANY);
	CHECK(p.index_cap >= 2 * p.nr);
	for (uint32_t s = 0; s < MANY; s++) {
		uint32_t depth = make_stack(s, frames);

		CHECK_EQ_U64(p.rows[s].depth, depth);
		CHECK(!memcmp(p.rows[s].frames, frames, depth * 4));
		CHECK_EQ_U64(p.rows[s].v.calls, 2);
		CHECK_EQ_U64(p.rows[s].v.self_ns, 2 * s);
	}
	stack_profile_free(&p);
}

TEST(stack_profile_reset_reuses_memory)
{
	static uint32_t *buffers[2 * MANY];
	struct stack_profile p;
	const struct stack_row *rows;
	uint32_t *frames0;
	size_t cap, index_cap, moved = 0;

	stack_profile_init(&p);
	CHECK(!add_many(&p, false));
	cap = p.cap;
	index_cap = p.index_cap;
	rows = p.rows;
	frames0 = p.rows[0].frames;

	stack_profile_reset(&p);
	CHECK_EQ_U64(p.nr, 0);
	CHECK(!add(&p, 1, 1, 0, (uint32_t[]){ 5 }, 1, 1, 1, 0));
	CHECK_EQ_U64(p.nr, 1);		/* nothing of the old interval left */
	CHECK_EQ_U64(p.rows[0].v.self_ns, 1);
	CHECK(p.rows[0].frames == frames0);	/* fits: same buffer */

	/* Once both orders have passed, every slot's buffer fits whatever
	 * stack lands in it: many more intervals allocate nothing. */
	stack_profile_reset(&p);
	CHECK(!add_many(&p, true));
	CHECK(p.cap <= 2 * MANY);
	for (size_t i = 0; i < p.cap; i++)
		buffers[i] = p.rows[i].frames;
	for (int interval = 0; interval < 20; interval++) {
		stack_profile_reset(&p);
		CHECK(!add_many(&p, interval % 2));
		CHECK_EQ_U64(p.nr, MANY);
	}
	CHECK_EQ_U64(p.cap, cap);
	CHECK_EQ_U64(p.index_cap, index_cap);
	CHECK(p.rows == rows);
	for (size_t i = 0; i < p.cap; i++)
		moved += p.rows[i].frames != buffers[i];
	CHECK_EQ_U64(moved, 0);
	CHECK_EQ_U64(p.rows[0].v.self_ns, MANY - 1);	/* reversed last */
	stack_profile_free(&p);
}

TEST(stack_profile_free_and_reset_are_safe_on_any_state)
{
	struct stack_profile p;

	stack_profile_init(&p);
	stack_profile_reset(&p);	/* never used */
	stack_profile_free(&p);
	stack_profile_free(&p);		/* free leaves an empty profile */
	CHECK(!add(&p, 1, 2, 3, (uint32_t[]){ 4 }, 1, 1, 1, 1));
	stack_profile_reset(&p);
	stack_profile_reset(&p);
	CHECK_EQ_U64(p.nr, 0);
	stack_profile_free(&p);
	CHECK(p.rows == NULL && p.index == NULL && p.nr == 0);
}

/* --- pprof --- */

static uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len)
{
	z_stream zs = {};
	size_t cap = 1 << 16;
	uint8_t *out = malloc(cap);
	int rc = Z_OK;

	if (!out || inflateInit2(&zs, 15 + 16) != Z_OK) {
		free(out);
		return NULL;
	}
	zs.next_in = (Bytef *)in;
	zs.avail_in = len;
	while (rc != Z_STREAM_END) {
		if (zs.total_out == cap) {
			uint8_t *bigger = realloc(out, cap *= 2);

			if (!bigger)
				break;
			out = bigger;
		}
		zs.next_out = out + zs.total_out;
		zs.avail_out = cap - zs.total_out;
		rc = inflate(&zs, Z_NO_FLUSH);
		if (rc != Z_OK && rc != Z_STREAM_END)
			break;
	}
	*out_len = zs.total_out;
	inflateEnd(&zs);
	if (rc != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	return out;
}

static pb_profile *decode(const uint8_t *gz, size_t len)
{
	size_t raw_len;
	uint8_t *raw = gunzip(gz, len, &raw_len);
	pb_profile *pr;

	if (!raw)
		return NULL;
	pr = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	free(raw);
	return pr;
}

static pb_profile *encode(const struct stack_profile *p,
			  const struct names *n, const struct pprof_meta *m)
{
	uint8_t *gz;
	size_t len;
	pb_profile *pr;

	if (pprof_encode(p, n, m, &gz, &len))
		return NULL;
	CHECK(len > 2 && gz[0] == 0x1f && gz[1] == 0x8b);	/* gzip */
	pr = decode(gz, len);
	free(gz);
	return pr;
}

static const char *str(const pb_profile *pr, int64_t i)
{
	return i >= 0 && (size_t)i < pr->n_string_table ?
	       pr->string_table[i] : "(bad index)";
}

static const char *function_of(const pb_profile *pr, uint64_t location_id)
{
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];

		if (l->id != location_id || l->n_line != 1)
			continue;
		for (size_t j = 0; j < pr->n_function; j++)
			if (pr->function[j]->id == l->line[0]->function_id)
				return str(pr, pr->function[j]->name);
	}
	return "(no function)";
}

/* "leaf;caller;...", as pprof would print it. */
static const char *stack_of(const pb_profile *pr, const pb_sample *s)
{
	static char buf[512];
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < s->n_location_id; i++)
		used += snprintf(buf + used, sizeof(buf) - used, "%s%s",
				 i ? ";" : "",
				 function_of(pr, s->location_id[i]));
	return buf;
}

static const Perftools__Profiles__Label *label(const pb_profile *pr,
					       const pb_sample *s,
					       const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (!strcmp(str(pr, s->label[i]->key), key))
			return s->label[i];
	return NULL;
}

static const pb_sample *sample_with_stack(const pb_profile *pr,
					  const char *stack, uint64_t pid)
{
	for (size_t i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Label *l =
			label(pr, pr->sample[i], "pid");

		if (!strcmp(stack_of(pr, pr->sample[i]), stack) && l &&
		    (uint64_t)l->num == pid)
			return pr->sample[i];
	}
	return NULL;
}

/* A little training step: two processes, one of them unnamed. */
struct fixture {
	struct names names;
	struct stack_profile p;
	struct pprof_process proc;
	char cmdline[256];
	uint32_t linear, addmm, mm;
};

static const struct pprof_process *lookup_process(void *ctx, uint32_t pid)
{
	struct fixture *f = ctx;

	return pid == 100 ? &f->proc : NULL;
}

static void fixture_init(struct fixture *f)
{
	uint32_t main_thread;

	memset(f, 0, sizeof(*f));
	stack_profile_init(&f->p);
	f->linear = intern(&f->names, "aten::linear");
	f->addmm = intern(&f->names, "aten::addmm");
	f->mm = intern(&f->names, "aten::mm");
	main_thread = intern(&f->names, "pt_main_thread");
	/* 199 ASCII bytes, then a 2-byte "é" across the 200-byte cut. */
	memset(f->cmdline, 'a', 199);
	strcpy(f->cmdline + 199, "\xc3\xa9 --epochs 3");
	f->proc = (struct pprof_process){ "python3", "ctr-abc", f->cmdline,
					  "2.14.1", true, 3 };

	add(&f->p, 100, 101, main_thread,
	    (uint32_t[]){ f->linear, f->addmm }, 2, 3, 1000, 500);
	add(&f->p, 100, 101, main_thread, (uint32_t[]){ f->linear }, 1,
	    2, 300, 0);
	add(&f->p, 100, 102, main_thread, (uint32_t[]){ f->mm }, 1, 0, 0, 0);
	add(&f->p, 200, 201, UINT32_MAX, (uint32_t[]){ f->mm }, 1, 1, 7, 0);
	add(&f->p, 100, 101, main_thread, NULL, 0, 0, 0, 250);
}

static void fixture_free(struct fixture *f)
{
	stack_profile_free(&f->p);
	names_free(&f->names);
}

static struct pprof_meta meta_of(struct fixture *f, double scale, bool gpu)
{
	return (struct pprof_meta){
		.time_nanos = 1700000000123456789ll,
		.duration_nanos = 10000000000ll, .scale = scale, .gpu = gpu,
		.comment = "estimator: test", .process = lookup_process,
		.ctx = f,
	};
}

TEST(pprof_header_types_and_string_table)
{
	struct fixture f;
	struct pprof_meta m;
	pb_profile *pr;

	fixture_init(&f);
	m = meta_of(&f, 1.0, true);
	pr = encode(&f.p, &f.names, &m);
	CHECK(pr != NULL);
	if (!pr)
		goto out;
	CHECK(pr->n_string_table > 0);
	CHECK_STR(str(pr, 0), "");
	for (size_t i = 0; i < pr->n_string_table; i++)
		for (size_t j = i + 1; j < pr->n_string_table; j++)
			CHECK(strcmp(pr->string_table[i],
				     pr->string_table[j]));
	CHECK_EQ_U64(pr->n_sample_type, 3);
	if (pr->n_sample_type == 3) {
		CHECK_STR(str(pr, pr->sample_type[0]->type), "calls");
		CHECK_STR(str(pr, pr->sample_type[0]->unit), "count");
		CHECK_STR(str(pr, pr->sample_type[1]->type), "self_cpu");
		CHECK_STR(str(pr, pr->sample_type[1]->unit), "nanoseconds");
		CHECK_STR(str(pr, pr->sample_type[2]->type), "gpu");
		CHECK_STR(str(pr, pr->sample_type[2]->unit), "nanoseconds");
	}
	CHECK_STR(str(pr, pr->default_sample_type), "self_cpu");
	CHECK(pr->period_type != NULL);
	if (pr->period_type) {
		CHECK_STR(str(pr, pr->period_type->type), "cpu");
		CHECK_STR(str(pr, pr->period_type->unit), "nanoseconds");
	}
	CHECK_EQ_U64(pr->period, 1);
	CHECK_EQ_U64(pr->time_nanos, 1700000000123456789ll);
	CHECK_EQ_U64(pr->duration_nanos, 10000000000ll);
	CHECK_EQ_U64(pr->n_comment, 1);
	if (pr->n_comment)
		CHECK_STR(str(pr, pr->comment[0]), "estimator: test");
	/* One function and one location per op name, plus the depth-0 row's
	 * marker; each location is one line of its function. */
	CHECK_EQ_U64(pr->n_function, 4);
	CHECK_EQ_U64(pr->n_location, 4);
	for (size_t i = 0; i < pr->n_location; i++) {
		CHECK(pr->location[i]->id != 0);
		CHECK_EQ_U64(pr->location[i]->n_line, 1);
		CHECK(strcmp(function_of(pr, pr->location[i]->id),
			     "(no function)"));
	}
	for (size_t i = 0; i < pr->n_function; i++)
		CHECK_EQ_U64(pr->function[i]->name,
			     pr->function[i]->system_name);
	perftools__profiles__profile__free_unpacked(pr, NULL);
out:
	fixture_free(&f);
}

TEST(pprof_samples_leaf_first_scaled_labelled)
{
	struct fixture f;
	struct pprof_meta m;
	const pb_sample *s;
	const Perftools__Profiles__Label *l;
	pb_profile *pr;

	fixture_init(&f);
	m = meta_of(&f, 2.5, true);
	pr = encode(&f.p, &f.names, &m);
	CHECK(pr != NULL);
	if (!pr)
		goto out;
	CHECK_EQ_U64(pr->n_sample, 4);	/* the all-zero row is skipped */
	CHECK(sample_with_stack(pr, "aten::mm", 100) == NULL);

	s = sample_with_stack(pr, "aten::addmm;aten::linear", 100);
	CHECK(s != NULL);
	if (s) {
		CHECK_EQ_U64(s->n_value, 3);
		CHECK_EQ_U64(s->value[0], 8);		/* 3 * 2.5 = 7.5 */
		CHECK_EQ_U64(s->value[1], 2500);
		CHECK_EQ_U64(s->value[2], 1250);
		CHECK((l = label(pr, s, "pid")) && l->num == 100 && !l->str);
		CHECK((l = label(pr, s, "tid")) && l->num == 101);
		CHECK((l = label(pr, s, "process")) &&
		      !strcmp(str(pr, l->str), "python3"));
		CHECK((l = label(pr, s, "thread")) &&
		      !strcmp(str(pr, l->str), "pt_main_thread"));
		CHECK((l = label(pr, s, "container")) &&
		      !strcmp(str(pr, l->str), "ctr-abc"));
		/* Cut before the "é" that straddles byte 200. */
		l = label(pr, s, "cmdline");
		CHECK(l && strlen(str(pr, l->str)) == 199);
		CHECK(l && !strncmp(str(pr, l->str), f.cmdline, 199));
		CHECK((l = label(pr, s, "torch_version")) &&
		      !strcmp(str(pr, l->str), "2.14.1"));
		CHECK((l = label(pr, s, "rank")) && l->num == 3);
	}
	s = sample_with_stack(pr, "aten::linear", 100);
	CHECK(s && s->value[0] == 5 && s->value[1] == 750 && !s->value[2]);

	/* Unknown process and thread name: only the ids. */
	s = sample_with_stack(pr, "aten::mm", 200);
	CHECK(s != NULL);
	if (s) {
		CHECK_EQ_U64(s->n_label, 2);
		CHECK((l = label(pr, s, "tid")) && l->num == 201);
		CHECK(!label(pr, s, "process") && !label(pr, s, "thread"));
		CHECK_EQ_U64(s->value[1], 18);		/* 7 * 2.5 = 17.5 */
	}
	s = sample_with_stack(pr, "[outside any op]", 100);
	CHECK(s && s->value[2] == 625 && !s->value[0] && !s->value[1]);
	perftools__profiles__profile__free_unpacked(pr, NULL);
out:
	fixture_free(&f);
}

TEST(pprof_without_gpu_or_process_labels)
{
	struct fixture f;
	struct pprof_meta m;
	pb_profile *pr;

	fixture_init(&f);
	m = meta_of(&f, 1.0, false);
	m.process = NULL;
	m.comment = NULL;
	pr = encode(&f.p, &f.names, &m);
	CHECK(pr != NULL);
	if (!pr)
		goto out;
	CHECK_EQ_U64(pr->n_sample_type, 2);
	CHECK_EQ_U64(pr->n_comment, 0);
	/* The GPU-only row has nothing left to show. */
	CHECK_EQ_U64(pr->n_sample, 3);
	CHECK_EQ_U64(pr->n_function, 3);
	for (size_t i = 0; i < pr->n_sample; i++) {
		CHECK_EQ_U64(pr->sample[i]->n_value, 2);
		CHECK(!label(pr, pr->sample[i], "process"));
		CHECK(!label(pr, pr->sample[i], "cmdline"));
		CHECK(!label(pr, pr->sample[i], "torch_version"));
		CHECK(!label(pr, pr->sample[i], "rank"));
		CHECK(label(pr, pr->sample[i], "pid"));
	}
	perftools__profiles__profile__free_unpacked(pr, NULL);
out:
	fixture_free(&f);
}

/* --shapes in fleet mode: rows of one stack split by input dims, each
 * sample labelled with its dims for pprof -tagfocus. */
TEST(pprof_input_dims_label)
{
	struct fixture f;
	struct pprof_meta m;
	uint32_t small, big;
	struct stack_values v = { .calls = 1, .self_ns = 10 };
	struct stack_key k;
	pb_profile *pr;
	int labelled = 0;

	fixture_init(&f);
	small = intern(&f.names, "[[2, 3], [3, 4]]");
	big = intern(&f.names, "[[64, 512], [512, 512]]");
	k = (struct stack_key){ .pid = 300, .tid = 301,
				.thread_name = UINT32_MAX,
				.frames = &f.mm, .depth = 1,
				.shapes = small + 1 };
	CHECK(!stack_profile_add(&f.p, &k, &v));
	k.shapes = big + 1;
	CHECK(!stack_profile_add(&f.p, &k, &v));
	CHECK(!stack_profile_add(&f.p, &k, &v));
	m = meta_of(&f, 1.0, false);
	pr = encode(&f.p, &f.names, &m);
	CHECK(pr != NULL);
	if (!pr)
		goto out;
	for (size_t i = 0; i < pr->n_sample; i++) {
		const pb_sample *s = pr->sample[i];
		const Perftools__Profiles__Label *l = label(pr, s, "input_dims");
		const Perftools__Profiles__Label *pid = label(pr, s, "pid");

		if (!pid || pid->num != 300) {
			CHECK(!l);	/* rows without shapes: no label */
			continue;
		}
		CHECK(l != NULL);
		if (!l)
			continue;
		labelled++;
		if (!strcmp(str(pr, l->str), "[[2, 3], [3, 4]]"))
			CHECK_EQ_U64(s->value[0], 1);
		else
			CHECK(!strcmp(str(pr, l->str),
				      "[[64, 512], [512, 512]]") &&
			      s->value[0] == 2);
	}
	CHECK_EQ_U64(labelled, 2);
	perftools__profiles__profile__free_unpacked(pr, NULL);
out:
	fixture_free(&f);
}

/* --off-cpu in fleet mode: an "off_cpu" sample type after the others,
 * scaled like them. */
TEST(pprof_off_cpu_sample_type)
{
	struct fixture f;
	struct pprof_meta m;
	struct stack_values v = { .calls = 2, .self_ns = 100,
				  .off_cpu_ns = 4000 };
	struct stack_key k;
	pb_profile *pr;
	const pb_sample *s;

	fixture_init(&f);
	k = (struct stack_key){ .pid = 400, .tid = 401,
				.thread_name = UINT32_MAX,
				.frames = &f.mm, .depth = 1 };
	CHECK(!stack_profile_add(&f.p, &k, &v));
	m = meta_of(&f, 2.0, false);
	m.off_cpu = true;
	pr = encode(&f.p, &f.names, &m);
	CHECK(pr != NULL);
	if (!pr)
		goto out;
	CHECK_EQ_U64(pr->n_sample_type, 3);
	CHECK(!strcmp(str(pr, pr->sample_type[2]->type), "off_cpu"));
	CHECK(!strcmp(str(pr, pr->sample_type[2]->unit), "nanoseconds"));
	s = sample_with_stack(pr, "aten::mm", 400);
	CHECK(s != NULL);
	if (s) {
		CHECK_EQ_U64(s->n_value, 3);
		CHECK_EQ_U64(s->value[2], 8000);
	}
	perftools__profiles__profile__free_unpacked(pr, NULL);
out:
	fixture_free(&f);
}

TEST(pprof_empty_profile)
{
	struct stack_profile p;
	struct names n = {};
	struct pprof_meta m = { .scale = 1.0 };
	pb_profile *pr;

	stack_profile_init(&p);
	pr = encode(&p, &n, &m);
	CHECK(pr != NULL);
	if (pr) {
		CHECK_EQ_U64(pr->n_sample, 0);
		CHECK_STR(str(pr, 0), "");
		CHECK_EQ_U64(pr->n_sample_type, 2);
		perftools__profiles__profile__free_unpacked(pr, NULL);
	}
}

/* Op and thread names are the target's bytes; profile.proto's strings
 * are proto3 strings, UTF-8 (the pprof fuzz target found these raw). */
TEST(pprof_strings_are_utf8)
{
	struct stack_profile p;
	struct names n = {};
	struct pprof_meta m = { .scale = 1.0 };
	uint32_t bad = intern(&n, "aten::\xff\xc0\x80mm\xe2\x82");
	uint32_t ok = intern(&n, "aten::\xe2\x82\xac");
	pb_profile *pr;

	stack_profile_init(&p);
	CHECK(!add(&p, 1, 1, ok, (uint32_t[]){ bad, ok }, 2, 1, 10, 0));
	pr = encode(&p, &n, &m);
	CHECK(pr != NULL);
	if (pr) {
		CHECK(sample_with_stack(pr, "aten::\xe2\x82\xac;aten::"
			"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdmm"
			"\xef\xbf\xbd\xef\xbf\xbd", 1) != NULL);
		perftools__profiles__profile__free_unpacked(pr, NULL);
	}
	stack_profile_free(&p);
	names_free(&n);
}

/* --- files --- */

static char *make_temp_dir(void)
{
	char tmpl[] = "/tmp/rfbpf-pprof-XXXXXX";

	return mkdtemp(tmpl) ? strdup(tmpl) : NULL;
}

static void remove_dir(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "  could not remove %s\n", dir);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static bool exists(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return !access(path, F_OK);
}

static void touch(const char *dir, const char *name, time_t mtime)
{
	char path[512];
	struct timespec t[2] = { { mtime, 0 }, { mtime, 0 } };
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK(!futimens(fd, t));
		close(fd);
	}
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = malloc(1 << 20);

	*len = f && buf ? fread(buf, 1, 1 << 20, f) : 0;
	if (f)
		fclose(f);
	return buf;
}

TEST(pprof_write_file_is_atomic)
{
	struct fixture f;
	struct pprof_meta m;
	char *dir = make_temp_dir(), path[512];
	struct stat st;
	uint8_t *buf;
	size_t len;
	pb_profile *pr;

	CHECK(dir != NULL);
	if (!dir)
		return;
	fixture_init(&f);
	m = meta_of(&f, 1.0, true);
	snprintf(path, sizeof(path), "%s/profile-1.pb.gz", dir);
	CHECK(!pprof_write_file(path, &f.p, &f.names, &m));
	CHECK(!pprof_write_file(path, &f.p, &f.names, &m));	/* replaces */
	CHECK_EQ_U64(count_entries(dir), 1);	/* no temporary left */
	buf = read_file(path, &len);
	pr = decode(buf, len);
	CHECK(pr && pr->n_sample == 4);
	if (pr)
		perftools__profiles__profile__free_unpacked(pr, NULL);
	free(buf);

	snprintf(path, sizeof(path), "%s/missing/profile-2.pb.gz", dir);
	CHECK_EQ_U64(pprof_write_file(path, &f.p, &f.names, &m), -ENOENT);
	CHECK_EQ_U64(count_entries(dir), 1);

	/* A node that is not a file is not renamed over (as /dev/full
	 * would have been): a FIFO stays a FIFO, a directory a directory. */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK(!mkfifo(path, 0600));
	CHECK_EQ_U64(pprof_write_file(path, &f.p, &f.names, &m), -EINVAL);
	CHECK(!stat(path, &st) && S_ISFIFO(st.st_mode));
	unlink(path);
	snprintf(path, sizeof(path), "%s/sub", dir);
	CHECK(!mkdir(path, 0700));
	CHECK_EQ_U64(pprof_write_file(path, &f.p, &f.names, &m), -EISDIR);
	rmdir(path);
	CHECK_EQ_U64(count_entries(dir), 1);	/* no temporary left */
	fixture_free(&f);
	remove_dir(dir);
	free(dir);
}

TEST(pprof_prune_keeps_the_newest)
{
	char *dir = make_temp_dir();

	CHECK(dir != NULL);
	if (!dir)
		return;
	/* Names in a different order than times: times decide. */
	touch(dir, "profile-c.pb.gz", 1000);
	touch(dir, "profile-a.pb.gz", 4000);
	touch(dir, "profile-d.pb.gz", 2000);
	touch(dir, "profile-b.pb.gz", 3000);
	touch(dir, "other.pb.gz", 1);			/* not ours */
	touch(dir, "profile-e.pb.gz.123.tmp", 1);	/* being written */
	CHECK(!mkdir(strcat(strcpy((char[512]){}, dir), "/profile-f.pb.gz"),
		     0755));				/* not a file */

	CHECK(!pprof_prune(dir, 2));
	CHECK(exists(dir, "profile-a.pb.gz"));
	CHECK(exists(dir, "profile-b.pb.gz"));
	CHECK(!exists(dir, "profile-c.pb.gz"));
	CHECK(!exists(dir, "profile-d.pb.gz"));
	CHECK(exists(dir, "other.pb.gz"));
	CHECK(exists(dir, "profile-e.pb.gz.123.tmp"));
	CHECK(exists(dir, "profile-f.pb.gz"));

	CHECK(!pprof_prune(dir, 5));		/* fewer than keep */
	CHECK_EQ_U64(count_entries(dir), 5);
	CHECK(!pprof_prune(dir, 0));
	CHECK(!exists(dir, "profile-a.pb.gz"));
	CHECK(!exists(dir, "profile-b.pb.gz"));
	CHECK_EQ_U64(pprof_prune("/nonexistent-rfbpf-dir", 1), -ENOENT);
	remove_dir(dir);
	free(dir);
}

/* The reader people use: `go tool pprof -raw` prints every sample's
 * values and every location's function name. */
TEST(pprof_go_tool_reads_it)
{
	struct fixture f;
	struct pprof_meta m;
	char *dir, path[512], cmd[2048], line[1024];
	bool saw_name = false, saw_values = false;
	FILE *out;

	if (access("/usr/bin/go", X_OK)) {
		printf("pprof_go_tool_reads_it: /usr/bin/go missing, "
		       "go tool pprof check skipped\n");
		return;
	}
	dir = make_temp_dir();
	CHECK(dir != NULL);
	if (!dir)
		return;
	fixture_init(&f);
	m = meta_of(&f, 1.0, true);
	snprintf(path, sizeof(path), "%s/profile-1.pb.gz", dir);
	CHECK(!pprof_write_file(path, &f.p, &f.names, &m));
	snprintf(cmd, sizeof(cmd),
		 "HOME=%s GOCACHE=%s/gocache PPROF_TMPDIR=%s "
		 "/usr/bin/go tool pprof -raw %s 2>&1", dir, dir, dir, path);
	out = popen(cmd, "r");
	CHECK(out != NULL);
	while (out && fgets(line, sizeof(line), out)) {
		long long calls, self_ns, gpu_ns;

		/* A location: "     1: 0x0 M=1 aten::addmm :0 s=0". */
		saw_name |= strstr(line, " aten::addmm ") != NULL;
		/* A sample, values first: "  3  1000  500: 1 2". addmm's is
		 * the only one with these. */
		saw_values |= sscanf(line, "%lld %lld %lld:", &calls, &self_ns,
				     &gpu_ns) == 3 && calls == 3 &&
			      self_ns == 1000 && gpu_ns == 500;
	}
	CHECK(out && pclose(out) == 0);
	CHECK(saw_name);
	CHECK(saw_values);
	fixture_free(&f);
	remove_dir(dir);
	free(dir);
}

/* Python frames (--python-stacks): a location per line, the function
 * named with its file once for all its lines; `go tool pprof` shows
 * them as file:line. */
TEST(pprof_python_frames_have_file_and_line)
{
	struct stack_profile p;
	struct names n = {};
	struct py_frames py = {};
	struct pprof_meta m = { .scale = 1.0, .py = &py };
	uint32_t main15 = py_frames_add_loc(&py, &n, "main", "/srv/train.py",
					    15);
	uint32_t main16 = py_frames_add_loc(&py, &n, "main", "/srv/train.py",
					    16);
	uint32_t fwd = py_frames_add_loc(&py, &n, "Model.forward",
					 "/srv/model.py", 42);
	uint32_t mm = intern(&n, "aten::mm");
	size_t lines_seen = 0, with_file = 0;
	pb_profile *pr;
	char *dir, path[512], cmd[2048], line[1024];
	bool saw_line = false;
	FILE *out;

	stack_profile_init(&p);
	CHECK(!add(&p, 1, 1, 0, (uint32_t[]){ main15, fwd, mm }, 3, 1, 100,
		   0));
	CHECK(!add(&p, 1, 1, 0, (uint32_t[]){ main16, mm }, 2, 3, 300, 0));
	pr = encode(&p, &n, &m);
	CHECK(pr != NULL);
	if (!pr)
		goto out;
	CHECK_EQ_U64(pr->n_location, 4);
	CHECK_EQ_U64(pr->n_function, 3);	/* main once for its 2 lines */
	for (size_t i = 0; i < pr->n_function; i++)
		if (*str(pr, pr->function[i]->filename))
			with_file++;
	CHECK_EQ_U64(with_file, 2);		/* not aten::mm */
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Line *l = pr->location[i]->line[0];

		lines_seen += l->line == 15 || l->line == 16 || l->line == 42;
	}
	CHECK_EQ_U64(lines_seen, 3);
	CHECK(sample_with_stack(pr, "aten::mm;Model.forward;main", 1) !=
	      NULL);
	CHECK(sample_with_stack(pr, "aten::mm;main", 1) != NULL);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	if (access("/usr/bin/go", X_OK))
		goto out;
	dir = make_temp_dir();
	if (!dir)
		goto out;
	snprintf(path, sizeof(path), "%s/profile-1.pb.gz", dir);
	CHECK(!pprof_write_file(path, &p, &n, &m));
	snprintf(cmd, sizeof(cmd),
		 "HOME=%s GOCACHE=%s/gocache PPROF_TMPDIR=%s "
		 "/usr/bin/go tool pprof -raw %s 2>&1", dir, dir, dir, path);
	out = popen(cmd, "r");
	while (out && fgets(line, sizeof(line), out))
		saw_line |= strstr(line, " Model.forward /srv/model.py:42") !=
			    NULL;
	CHECK(out && pclose(out) == 0);
	CHECK(saw_line);
	remove_dir(dir);
	free(dir);
out:
	stack_profile_free(&p);
	py_frames_free(&py);
	names_free(&n);
}

RUN_TESTS()
