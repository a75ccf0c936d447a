// SPDX-License-Identifier: BSD-2-Clause
/*
 * --sort by a GPU column on a job without GPU activity: sorted by self
 * time (total under --sample) and said why; every other key as asked.
 */
#include "check.h"
#include "export/table_sort.h"

static struct trace t;

static enum sort_key key(enum sort_key asked, char *why, size_t len)
{
	return table_sort_key(&t, asked, why, len);
}

TEST(gpu_keys_without_gpu_activity_fall_back_and_say_so)
{
	static const enum sort_key gpu[] = {
		SORT_CUDA, SORT_SELF_CUDA, SORT_KERNELS,
	};
	char why[256];

	trace_init(&t, 1);
	for (size_t i = 0; i < 3; i++) {
		CHECK_EQ_U64(key(gpu[i], why, sizeof(why)), SORT_SELF);
		CHECK(strstr(why, sort_key_name(gpu[i])) != NULL);
		CHECK(strstr(why, "no GPU activity") != NULL);
		CHECK(strstr(why, "sorted by self time instead") != NULL);
	}
	t.gpu.counts.agent_seen = true;		/* the agent, no kernel */
	CHECK_EQ_U64(key(SORT_CUDA, why, sizeof(why)), SORT_SELF);
	CHECK(strstr(why, "no GPU kernel") != NULL);
	t.gpu.counts.activities = 3;
	CHECK_EQ_U64(key(SORT_CUDA, why, sizeof(why)), SORT_CUDA);
	CHECK_STR(why, "");
	t.sample_prob = 0.5;	/* GPU columns are not kept then */
	CHECK_EQ_U64(key(SORT_KERNELS, why, sizeof(why)), SORT_TOTAL);
	CHECK(strstr(why, "--sample") != NULL);
	CHECK(strstr(why, "by total time") != NULL);
	trace_free(&t);
}

TEST(cpu_keys_are_kept_and_silent)
{
	static const enum sort_key cpu[] = {
		SORT_TOTAL, SORT_CALLS, SORT_AVG, SORT_MIN, SORT_MAX,
		SORT_NAME, SORT_SELF,
	};
	char why[256];

	trace_init(&t, 1);
	for (size_t i = 0; i < sizeof(cpu) / sizeof(*cpu); i++) {
		CHECK_EQ_U64(key(cpu[i], why, sizeof(why)), cpu[i]);
		CHECK_STR(why, "");
	}
	/* Self time under --sample: total, told by the table's footer. */
	t.sample_prob = 0.1;
	CHECK_EQ_U64(key(SORT_SELF, why, sizeof(why)), SORT_TOTAL);
	CHECK_STR(why, "");
	trace_free(&t);
}

TEST(names_are_the_option_words)
{
	CHECK_STR(sort_key_name(SORT_SELF_CUDA), "self_cuda");
	CHECK_STR(sort_key_name(SORT_GPU_WAIT), "gpu_wait");
	CHECK_STR(sort_key_name(SORT_NAME), "name");
}

RUN_TESTS()
