// SPDX-License-Identifier: BSD-2-Clause
/* u64map (open addressing, backward-shift deletion) and names (interning). */
#include <stdint.h>
#include "check.h"
#include "model/names.h"
#include "model/u64map.h"

/* A copy of u64map.c's private slot_of(): the tests build keys that
 * collide on purpose and check the probing invariant with it. If the hash
 * changes, probe_invariant_holds() fails and this copy must follow. */
static size_t home_of(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* Deterministic xorshift64: the same "random" sequence on every run. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Every key must still be reachable from its home slot without crossing
 * an empty slot: the invariant backward-shift deletion has to keep. */
static int probe_invariant_holds(const struct u64map *m)
{
	for (size_t i = 0; i < m->cap; i++) {
		uint64_t k = m->slots[i].key;

		if (!k)
			continue;
		for (size_t j = home_of(k, m->cap); j != i;
		     j = (j + 1) & (m->cap - 1))
			if (!m->slots[j].key)
				return 0;
	}
	return 1;
}

TEST(u64map_put_get_overwrite_delete)
{
	struct u64map m = {};

	CHECK(u64map_get(&m, 5) == NULL);	/* empty map, no slots yet */
	CHECK(!u64map_del(&m, 5));
	CHECK(u64map_put(&m, 5, 50));
	CHECK(u64map_put(&m, 7, 70));
	CHECK_EQ_U64(m.len, 2);
	CHECK(u64map_get(&m, 5) && *u64map_get(&m, 5) == 50);
	CHECK(u64map_get(&m, 7) && *u64map_get(&m, 7) == 70);
	CHECK(u64map_get(&m, 6) == NULL);

	CHECK(u64map_put(&m, 5, 51));		/* overwrite keeps len */
	CHECK_EQ_U64(m.len, 2);
	CHECK(u64map_get(&m, 5) && *u64map_get(&m, 5) == 51);

	*u64map_get(&m, 7) = 71;		/* the pointer is the value */
	CHECK(u64map_get(&m, 7) && *u64map_get(&m, 7) == 71);

	CHECK(u64map_del(&m, 5));
	CHECK(!u64map_del(&m, 5));
	CHECK(u64map_get(&m, 5) == NULL);
	CHECK(u64map_get(&m, 7) && *u64map_get(&m, 7) == 71);
	CHECK_EQ_U64(m.len, 1);
	u64map_free(&m);
	CHECK(m.slots == NULL && m.cap == 0 && m.len == 0);
}

TEST(u64map_key_zero_rejected)
{
	struct u64map m = {};

	CHECK(!u64map_put(&m, 0, 1));
	CHECK_EQ_U64(m.len, 0);
	CHECK(u64map_put(&m, 1, 1));
	CHECK(!u64map_put(&m, 0, 1));
	CHECK(u64map_get(&m, 0) == NULL);
	CHECK(!u64map_del(&m, 0));
	CHECK_EQ_U64(m.len, 1);
	u64map_free(&m);
}

TEST(u64map_growth_keeps_everything)
{
	struct u64map m = {};
	const uint64_t n = 10000;

	/* RecordFunction-like addresses: 16-byte aligned, low bits shared. */
	for (uint64_t i = 1; i <= n; i++)
		CHECK(u64map_put(&m, 0x7f0000000000ull + i * 16, i));
	CHECK_EQ_U64(m.len, n);
	CHECK(m.cap >= 2 * n);			/* load factor <= 1/2 */
	CHECK((m.cap & (m.cap - 1)) == 0);
	for (uint64_t i = 1; i <= n; i++) {
		uint64_t *v = u64map_get(&m, 0x7f0000000000ull + i * 16);

		CHECK(v && *v == i);
	}
	CHECK(probe_invariant_holds(&m));
	u64map_free(&m);
}

/* Many keys with the same home slot form one long cluster; deleting from
 * its head, middle and tail must keep every other key reachable. */
TEST(u64map_backward_shift_colliding_keys)
{
	struct u64map m = {};
	uint64_t keys[20];
	size_t nk = 0, cap;

	CHECK(u64map_put(&m, 1, 1));		/* allocate: cap is now known */
	cap = m.cap;
	CHECK(cap >= 64);
	size_t target = home_of(1, cap);
	/* 20 keys homed at the same slot, and a few homed at the slots right
	 * after it, so the cluster mixes chains (the tricky case). */
	for (uint64_t k = 2; nk < 20 && k < 10000000; k++)
		if (home_of(k, cap) == target)
			keys[nk++] = k;
	CHECK_EQ_U64(nk, 20);
	uint64_t near[6];
	size_t nn = 0;
	for (uint64_t k = 10000000; nn < 6; k++)
		if (home_of(k, cap) == ((target + 1 + nn / 2) & (cap - 1)))
			near[nn++] = k;
	for (size_t i = 0; i < nk; i++)
		CHECK(u64map_put(&m, keys[i], 100 + i));
	for (size_t i = 0; i < nn; i++)
		CHECK(u64map_put(&m, near[i], 200 + i));
	CHECK_EQ_U64(m.cap, cap);	/* 27 keys: no growth, same homes */
	CHECK(probe_invariant_holds(&m));

	/* Delete 1 (head), then every other colliding key, then a near key. */
	CHECK(u64map_del(&m, 1));
	for (size_t i = 0; i < nk; i += 2)
		CHECK(u64map_del(&m, keys[i]));
	CHECK(u64map_del(&m, near[0]));
	CHECK(probe_invariant_holds(&m));
	CHECK(u64map_get(&m, 1) == NULL);
	for (size_t i = 0; i < nk; i++) {
		uint64_t *v = u64map_get(&m, keys[i]);

		if (i % 2)
			CHECK(v && *v == 100 + i);
		else
			CHECK(v == NULL);
	}
	CHECK(u64map_get(&m, near[0]) == NULL);
	for (size_t i = 1; i < nn; i++)
		CHECK(u64map_get(&m, near[i]) &&
		      *u64map_get(&m, near[i]) == 200 + i);
	CHECK_EQ_U64(m.len, nk / 2 + nn - 1);
	u64map_free(&m);
}

/* Wrap-around: a cluster that starts at the last slot continues at 0. */
TEST(u64map_cluster_wraps_around)
{
	struct u64map m = {};
	uint64_t keys[8];
	size_t nk = 0;

	CHECK(u64map_put(&m, 1, 1));
	CHECK(u64map_del(&m, 1));
	for (uint64_t k = 2; nk < 8; k++)
		if (home_of(k, m.cap) >= m.cap - 2)
			keys[nk++] = k;
	for (size_t i = 0; i < nk; i++)
		CHECK(u64map_put(&m, keys[i], i + 1));
	for (size_t i = 0; i < nk; i += 3)
		CHECK(u64map_del(&m, keys[i]));
	CHECK(probe_invariant_holds(&m));
	for (size_t i = 0; i < nk; i++) {
		uint64_t *v = u64map_get(&m, keys[i]);

		CHECK(i % 3 ? v && *v == i + 1 : v == NULL);
	}
	u64map_free(&m);
}

/* Random put/overwrite/delete against a plain array of values. Keys come
 * from a small range so operations hit existing keys and collide often. */
TEST(u64map_random_against_reference)
{
	enum { RANGE = 3000, OPS = 200000 };
	static uint64_t ref[RANGE + 1];	/* 0 = absent (values are never 0) */
	struct u64map m = {};
	size_t present = 0;

	memset(ref, 0, sizeof(ref));
	for (int op = 0; op < OPS; op++) {
		uint64_t r = next_rand(), k = 1 + r % RANGE;

		if ((r >> 32) % 3) {		/* 2/3 puts, 1/3 deletes */
			uint64_t v = (r >> 8) | 1;

			present += !ref[k];
			ref[k] = v;
			CHECK(u64map_put(&m, k, v));
		} else {
			CHECK(u64map_del(&m, k) == (ref[k] != 0));
			present -= ref[k] != 0;
			ref[k] = 0;
		}
		if (op % 20000 == 0)
			CHECK(probe_invariant_holds(&m));
	}
	CHECK_EQ_U64(m.len, present);
	for (uint64_t k = 1; k <= RANGE; k++) {
		uint64_t *v = u64map_get(&m, k);

		if (ref[k])
			CHECK(v && *v == ref[k]);
		else
			CHECK(v == NULL);
	}
	CHECK(probe_invariant_holds(&m));
	/* Empty it completely: every slot must end up free. */
	for (uint64_t k = 1; k <= RANGE; k++)
		CHECK(u64map_del(&m, k) == (ref[k] != 0));
	CHECK_EQ_U64(m.len, 0);
	for (size_t i = 0; i < m.cap; i++)
		CHECK(m.slots[i].key == 0);
	u64map_free(&m);
}

TEST(names_same_and_different)
{
	struct names n = {};
	uint32_t a = names_intern(&n, "aten::add", 9);
	uint32_t b = names_intern(&n, "aten::mul", 9);

	CHECK(a != UINT32_MAX && b != UINT32_MAX);
	CHECK(a != b);
	CHECK_EQ_U64(names_intern(&n, "aten::add", 9), a);
	CHECK_EQ_U64(names_intern(&n, "aten::mul", 9), b);
	CHECK_STR(names_get(&n, a), "aten::add");
	CHECK_STR(names_get(&n, b), "aten::mul");
	CHECK_EQ_U64(n.nr, 2);
	/* A prefix of a known name is a different name. */
	uint32_t c = names_intern(&n, "aten::ad", 8);
	CHECK(c != a && c != b);
	CHECK_STR(names_get(&n, c), "aten::ad");
	/* The empty name is a name too. */
	uint32_t e = names_intern(&n, "", 0);
	CHECK(e != a && e != b && e != c);
	CHECK_STR(names_get(&n, e), "");
	CHECK_EQ_U64(names_intern(&n, "", 0), e);
	/* Unknown id. */
	CHECK_STR(names_get(&n, 1000), "?");
	names_free(&n);
}

/* The loader passes slices of an event buffer: only len bytes count. */
TEST(names_length_slices)
{
	struct names n = {};
	const char buf[] = { 'a', 't', 'e', 'n', ':', ':', 'x', 'Y', 'Z' };
	uint32_t full = names_intern(&n, "aten::xYZ", 9);
	uint32_t s7 = names_intern(&n, buf, 7);		/* "aten::x" */
	uint32_t s4 = names_intern(&n, buf, 4);		/* "aten" */

	CHECK(s7 != full && s4 != full && s4 != s7);
	CHECK_STR(names_get(&n, s7), "aten::x");
	CHECK_STR(names_get(&n, s4), "aten");
	CHECK_EQ_U64(names_intern(&n, "aten::x", 7), s7);
	CHECK_EQ_U64(names_intern(&n, "aten::x and more", 7), s7);
	CHECK_EQ_U64(names_intern(&n, buf, 9), full);
	names_free(&n);
}

/* Short slices of stored names (random hex, so the index hash spreads
 * them): probe runs cross names that begin with the slice, and such a
 * longer name must never be taken for it. */
TEST(names_prefix_slices_among_many)
{
	enum { N = 4000 };
	static char s[N][17];
	struct names n = {};
	int wrong = 0;

	for (int i = 0; i < N; i++) {
		snprintf(s[i], sizeof(s[i]), "%016llx",
			 (unsigned long long)next_rand());
		CHECK_EQ_U64(names_intern(&n, s[i], 16), i);	/* all new */
	}
	for (int i = 0; i < N; i++) {
		for (size_t len = 1; len < 16; len++) {
			uint32_t id = names_intern(&n, s[i], len);

			/* ids below N are the 16-character names */
			if (id < N || id == UINT32_MAX ||
			    strlen(names_get(&n, id)) != len ||
			    strncmp(names_get(&n, id), s[i], len))
				wrong++;
		}
	}
	CHECK_EQ_U64(wrong, 0);
	for (int i = 0; i < N; i++)
		CHECK_EQ_U64(names_intern(&n, s[i], 16), i);
	names_free(&n);
}

TEST(names_thousands)
{
	struct names n = {};
	enum { N = 5000 };
	static uint32_t ids[N];
	char s[32];

	for (int i = 0; i < N; i++) {
		int len = snprintf(s, sizeof(s), "op_%d", i);

		ids[i] = names_intern(&n, s, len);
		CHECK(ids[i] != UINT32_MAX);
	}
	CHECK_EQ_U64(n.nr, N);
	/* Again, after every growth: the same ids, nothing added. */
	for (int i = N - 1; i >= 0; i--) {
		int len = snprintf(s, sizeof(s), "op_%d", i);

		CHECK_EQ_U64(names_intern(&n, s, len), ids[i]);
		CHECK_STR(names_get(&n, ids[i]), s);
	}
	CHECK_EQ_U64(n.nr, N);
	/* All ids distinct: ids are dense, so they are 0..N-1 in some order. */
	static unsigned char seen[N];
	int distinct = 0;
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < N; i++)
		if (ids[i] < N && !seen[ids[i]]++)
			distinct++;
	CHECK_EQ_U64(distinct, N);
	names_free(&n);
}

RUN_TESTS()
