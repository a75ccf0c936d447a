// SPDX-License-Identifier: BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "chrome_fwdbwd.h"

/* Never 0 (the map's empty key); a collision is caught by comparing the
 * entry's fields. */
static uint64_t key_of(uint32_t pid, uint64_t rf_thread, int64_t seq)
{
	uint64_t k = (uint64_t)seq * 0x9e3779b97f4a7c15ull;

	k ^= (rf_thread + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
	k ^= (uint64_t)pid * 0x94d049bb133111ebull;
	return k ? k : 1;
}

static bool same(const struct fwd_op *f, uint32_t pid, uint64_t rf_thread,
		 int64_t seq)
{
	return f->pid == pid && f->rf_thread == rf_thread && f->seq == seq;
}

static void forget_all(struct fwdbwd *m)
{
	m->forgotten += m->nr;
	m->nr = 0;
	u64map_free(&m->index);
}

void fwdbwd_forward(struct fwdbwd *m, uint32_t pid, const struct op *o)
{
	uint64_t key = key_of(pid, o->rf_thread, o->seq);
	uint64_t *i;
	struct fwd_op *f;

	if (o->seq < 0 || !o->rf_thread || o->fwd_thread)
		return;
	i = u64map_get(&m->index, key);
	if (i) {
		f = &m->ops[*i];
		if (!same(f, pid, o->rf_thread, o->seq))
			m->forgotten++;	/* a collision: the older loses */
		else if (o->start_ns < f->start_ns)
			return;		/* the later one launches backward */
	} else {
		if (m->nr == FWDBWD_MAX)
			forget_all(m);
		if (m->nr == m->cap) {
			size_t cap = m->cap ? m->cap * 2 : 256;
			struct fwd_op *ops = realloc(m->ops, cap * sizeof(*ops));

			if (!ops)
				return;
			m->ops = ops;
			m->cap = cap;
		}
		if (!u64map_put(&m->index, key, m->nr))
			return;
		f = &m->ops[m->nr++];
	}
	*f = (struct fwd_op){ .pid = pid, .tid = o->tid,
			      .rf_thread = o->rf_thread, .seq = o->seq,
			      .start_ns = o->start_ns };
}

bool fwdbwd_backward(struct fwdbwd *m, uint32_t pid, const struct op *o,
		     struct fwd_op *fwd)
{
	uint64_t key = key_of(pid, o->fwd_thread, o->seq);
	uint64_t *i = o->fwd_thread && o->seq >= 0 ?
		      u64map_get(&m->index, key) : NULL;
	size_t at, last = m->nr - 1;

	if (!i || !same(&m->ops[*i], pid, o->fwd_thread, o->seq))
		return false;
	at = *i;
	*fwd = m->ops[at];
	u64map_del(&m->index, key);
	if (at != last) {	/* the last entry fills the hole */
		const struct fwd_op *l = &m->ops[last];

		m->ops[at] = *l;
		u64map_put(&m->index, key_of(l->pid, l->rf_thread, l->seq),
			   at);
	}
	m->nr--;
	return true;
}

void fwdbwd_free(struct fwdbwd *m)
{
	u64map_free(&m->index);
	free(m->ops);
	memset(m, 0, sizeof(*m));
}
