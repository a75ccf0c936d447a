/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A minimal unit-test harness: TEST(name) defines a case, CHECK(cond) and
 * CHECK_EQ_U64(a, b) record failures with file:line, RUN_TESTS() runs
 * every case registered in the file and prints one closing line
 * "<file>: N passed, N failed". Exit status is non-zero if anything failed.
 */
#ifndef RFBPF_CHECK_H
#define RFBPF_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct check_case {
	const char *name;
	void (*fn)(void);
};

static int check_failures_in_case;
static struct check_case check_cases[128];
static int check_nr_cases;

#define TEST(name)							\
	static void test_##name(void);					\
	__attribute__((constructor)) static void register_##name(void)	\
	{								\
		check_cases[check_nr_cases++] =				\
			(struct check_case){ #name, test_##name };	\
	}								\
	static void test_##name(void)

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n",	\
				__FILE__, __LINE__, #cond);		\
			check_failures_in_case++;			\
		}							\
	} while (0)

#define CHECK_EQ_U64(a, b)						\
	do {								\
		unsigned long long a_ = (a), b_ = (b);			\
		if (a_ != b_) {						\
			fprintf(stderr, "  %s:%d: %s == %llu, expected "\
				"%s == %llu\n", __FILE__, __LINE__, #a,	\
				a_, #b, b_);				\
			check_failures_in_case++;			\
		}							\
	} while (0)

#define CHECK_STR(a, b)							\
	do {								\
		const char *a_ = (a), *b_ = (b);			\
		if (!a_ || !b_ || strcmp(a_, b_)) {			\
			fprintf(stderr, "  %s:%d: %s is \"%s\", expected "\
				"\"%s\"\n", __FILE__, __LINE__, #a,	\
				a_ ? a_ : "(null)", b_ ? b_ : "(null)");\
			check_failures_in_case++;			\
		}							\
	} while (0)

static inline int check_run_all(const char *file)
{
	int passed = 0, failed = 0;

	for (int i = 0; i < check_nr_cases; i++) {
		check_failures_in_case = 0;
		check_cases[i].fn();
		if (check_failures_in_case) {
			fprintf(stderr, "FAIL %s\n", check_cases[i].name);
			failed++;
		} else {
			passed++;
		}
	}
	printf("%s: %d passed, %d failed\n", file, passed, failed);
	return failed ? 1 : 0;
}

#define RUN_TESTS() int main(void) { return check_run_all(__FILE__); }

#endif
