// SPDX-License-Identifier: BSD-2-Clause
/* Python call sites of ops, named and interned: see py_frames.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "py_frames.h"

/* A (process, code object, code unit) already named. */
struct py_site {
	uint64_t code;		/* 0: empty slot */
	int32_t unit;
	uint32_t pid;
	uint32_t gen;
	uint32_t label;
};

/* Past this many, the site cache starts again empty: a job that keeps
 * making code (exec, lambdas in a loop) does not grow it for ever. */
#define MAX_SITES (1u << 18)

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t site_hash(uint32_t pid, uint64_t code, int32_t unit)
{
	return mix(mix(pid, code), (uint32_t)unit);
}

static struct py_site *site_slot(struct py_frames *p, uint32_t pid,
				 uint64_t code, int32_t unit)
{
	size_t mask = p->cap_sites - 1;

	for (size_t i = site_hash(pid, code, unit) & mask;; i = (i + 1) & mask) {
		struct py_site *s = &p->sites[i];

		if (!s->code || (s->code == code && s->unit == unit &&
				 s->pid == pid))
			return s;
	}
}

/* Room for one more site; the cache is emptied when it is full. */
static int sites_reserve(struct py_frames *p)
{
	size_t cap;
	struct py_site *old = p->sites, *s;

	if (p->cap_sites && (p->nr_sites + 1) * 2 <= p->cap_sites)
		return 0;
	if (p->nr_sites >= MAX_SITES) {
		memset(p->sites, 0, p->cap_sites * sizeof(*p->sites));
		p->nr_sites = 0;
		return 0;
	}
	cap = p->cap_sites ? p->cap_sites * 2 : 1024;
	if (!(p->sites = calloc(cap, sizeof(*p->sites)))) {
		p->sites = old;
		return -1;
	}
	p->cap_sites = cap;
	for (size_t i = 0; old && i < cap / 2; i++)
		if (old[i].code) {
			s = site_slot(p, old[i].pid, old[i].code, old[i].unit);
			*s = old[i];
		}
	free(old);
	return 0;
}

uint32_t py_frames_add_loc(struct py_frames *p, struct names *names,
			   const char *func, const char *file, int line)
{
	char label[RF_NAME_MAX + 512];
	uint32_t id, f, fi;
	int n;

	if (file[0])
		n = snprintf(label, sizeof(label), "%s (%s:%d)", func, file,
			     line);
	else
		n = snprintf(label, sizeof(label), "%s", func);
	if (n < 0)
		return UINT32_MAX;
	if ((size_t)n >= sizeof(label))
		n = sizeof(label) - 1;
	id = names_intern(names, label, n);
	if (id == UINT32_MAX || u64map_get(&p->loc_of_label, (uint64_t)id + 1))
		return id;
	f = names_intern(names, func, strlen(func));
	fi = names_intern(names, file, strlen(file));
	if (f == UINT32_MAX || fi == UINT32_MAX)
		return UINT32_MAX;
	if (p->nr_locs == p->cap_locs) {
		size_t cap = p->cap_locs ? p->cap_locs * 2 : 256;
		struct py_loc *l = realloc(p->locs, cap * sizeof(*l));

		if (!l)
			return UINT32_MAX;
		p->locs = l;
		p->cap_locs = cap;
	}
	if (!u64map_put(&p->loc_of_label, (uint64_t)id + 1, p->nr_locs))
		return UINT32_MAX;
	p->locs[p->nr_locs++] = (struct py_loc){ f, fi, line };
	return id;
}

/* The label of one frame, from the cache or the resolver. */
static uint32_t frame_label(struct py_frames *p, struct names *names,
			    const struct py_resolver *r, uint32_t pid,
			    const struct rf_py_frame *f)
{
	char func[256], file[512];
	struct py_site *s;
	uint32_t gen;
	int line;

	if (r->gen(r->ctx, pid, f->code, &gen)) {
		p->unresolved++;
		return py_frames_add_loc(p, names, PY_UNKNOWN_LABEL, "", -1);
	}
	if (sites_reserve(p))
		return UINT32_MAX;
	s = site_slot(p, pid, f->code, f->unit);
	if (s->code && s->gen == gen)
		return s->label;
	if (r->locate(r->ctx, pid, f->code, f->unit, func, sizeof(func),
		      file, sizeof(file), &line)) {
		p->unresolved++;
		return py_frames_add_loc(p, names, PY_UNKNOWN_LABEL, "", -1);
	}
	if (!s->code)
		p->nr_sites++;
	*s = (struct py_site){ .code = f->code, .unit = f->unit, .pid = pid,
			       .gen = gen };
	s->label = py_frames_add_loc(p, names, func, file, line);
	if (s->label == UINT32_MAX)
		s->code = 0, p->nr_sites--;
	return s->label;
}

static uint64_t stack_hash(const uint32_t *l, uint32_t n)
{
	uint64_t h = n;

	for (uint32_t i = 0; i < n; i++)
		h = mix(h, l[i]);
	return h;
}

static int grow_index(struct py_frames *p)
{
	size_t cap = p->stack_index_cap ? p->stack_index_cap * 2 : 256;
	uint32_t *idx = calloc(cap, sizeof(*idx));

	if (!idx)
		return -1;
	for (size_t id = 1; id <= p->nr_stacks; id++) {
		const uint32_t *l = p->pool + p->stacks[id - 1].at;
		size_t i = stack_hash(l, p->stacks[id - 1].n) & (cap - 1);

		while (idx[i])
			i = (i + 1) & (cap - 1);
		idx[i] = id;
	}
	free(p->stack_index);
	p->stack_index = idx;
	p->stack_index_cap = cap;
	return 0;
}

uint32_t py_frames_intern(struct py_frames *p, const uint32_t *l,
			  uint32_t n)
{
	size_t i, mask;

	if ((p->nr_stacks + 1) * 2 > p->stack_index_cap && grow_index(p))
		return 0;
	mask = p->stack_index_cap - 1;
	for (i = stack_hash(l, n) & mask; p->stack_index[i];
	     i = (i + 1) & mask) {
		uint32_t id = p->stack_index[i];

		if (p->stacks[id - 1].n == n &&
		    !memcmp(p->pool + p->stacks[id - 1].at, l, n * sizeof(*l)))
			return id;
	}
	if (p->pool_len + n > p->pool_cap) {
		size_t cap = (p->pool_len + n) * 2;
		uint32_t *pool = realloc(p->pool, cap * sizeof(*pool));

		if (!pool)
			return 0;
		p->pool = pool;
		p->pool_cap = cap;
	}
	if (p->nr_stacks == p->cap_stacks) {
		size_t cap = p->cap_stacks ? p->cap_stacks * 2 : 256;
		void *s = realloc(p->stacks, cap * sizeof(*p->stacks));

		if (!s)
			return 0;
		p->stacks = s;
		p->cap_stacks = cap;
	}
	memcpy(p->pool + p->pool_len, l, n * sizeof(*l));
	p->stacks[p->nr_stacks].at = p->pool_len;
	p->stacks[p->nr_stacks].n = n;
	p->pool_len += n;
	p->stack_index[i] = ++p->nr_stacks;
	return p->nr_stacks;
}

uint32_t py_frames_stack(struct py_frames *p, struct names *names,
			 const struct py_resolver *r, uint32_t pid,
			 const struct rf_py_frame *frames, uint32_t n,
			 uint32_t flags)
{
	uint32_t labels[RF_PY_MAX_FRAMES + 1], k = 0;

	if (n > RF_PY_MAX_FRAMES)
		n = RF_PY_MAX_FRAMES;
	if (flags & RF_PY_F_TRUNCATED) {
		labels[k] = py_frames_add_loc(p, names, PY_TRUNCATED_LABEL, "", -1);
		if (labels[k++] == UINT32_MAX)
			return 0;
	}
	for (uint32_t i = n; i-- > 0;) {	/* outermost first */
		labels[k] = frame_label(p, names, r, pid, &frames[i]);
		if (labels[k++] == UINT32_MAX)
			return 0;
	}
	/* A thread in Python with no frame (between calls): no stack. */
	return k ? py_frames_intern(p, labels, k) : 0;
}

const uint32_t *py_frames_get(const struct py_frames *p, uint32_t id,
			      uint32_t *n)
{
	if (!id || id > p->nr_stacks) {
		*n = 0;
		return NULL;
	}
	*n = p->stacks[id - 1].n;
	return p->pool + p->stacks[id - 1].at;
}

const struct py_loc *py_frames_loc(const struct py_frames *p, uint32_t label)
{
	const uint64_t *i = p->nr_locs ?
		u64map_get(&p->loc_of_label, (uint64_t)label + 1) : NULL;

	return i ? &p->locs[*i] : NULL;
}

bool py_frames_same_function(const struct py_frames *p, uint32_t a,
			     uint32_t b)
{
	const struct py_loc *x, *y;

	if (a == b)
		return true;
	x = py_frames_loc(p, a);
	y = py_frames_loc(p, b);
	return x && y && x->func == y->func && x->file == y->file;
}

uint32_t py_frames_common(const struct py_frames *p, const uint32_t *a,
			  uint32_t na, const uint32_t *b, uint32_t nb)
{
	uint32_t k = 0;

	while (k < na && k < nb && py_frames_same_function(p, a[k], b[k]))
		k++;
	return k;
}

uint32_t py_frames_enter_caller(const struct py_frames *p,
				const struct names *names, const uint32_t *l,
				uint32_t n)
{
	static const char enter[] = "__enter__";

	for (uint32_t i = n; i-- > 0;) {
		const struct py_loc *loc = py_frames_loc(p, l[i]);
		const char *f = loc ? names_get(names, loc->func) : "";
		size_t len = strlen(f);

		if (len >= sizeof(enter) - 1 &&
		    !strcmp(f + len - (sizeof(enter) - 1), enter))
			return i;
	}
	return n;
}

void py_frames_free(struct py_frames *p)
{
	free(p->locs);
	u64map_free(&p->loc_of_label);
	free(p->sites);
	free(p->pool);
	free(p->stacks);
	free(p->stack_index);
	memset(p, 0, sizeof(*p));
}
