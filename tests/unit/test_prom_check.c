// SPDX-License-Identifier: BSD-2-Clause
/*
 * The strict text-format checker of the prom_text fuzz target
 * (tests/fuzz/prom_check.h) against promtool, the reference parser: what
 * promtool refuses the checker refuses, what the checker takes promtool
 * takes (lint remarks aside), and each case gets the verdict expected.
 * The checker may refuse more (timestamps, untyped samples without TYPE):
 * rfbpf writes neither.
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "promtool.h"
#include "../fuzz/prom_check.h"

#define HEAD "# HELP m_total h\n# TYPE m_total counter\n"

static const struct {
	const char *text;
	bool valid;
} cases[] = {
	{ HEAD "m_total{a=\"x\\\\ \\\" \\n \xe2\x82\xac\",b=\"\"} 1\n", true },
	{ HEAD "m_total NaN\n", true },
	{ "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n"
	  "h_bucket{le=\"+Inf\"} 2\nh_sum -Inf\nh_count 2e+300\n", true },
	{ "# HELP g h \\\\ \\n \"q\"\n# TYPE g gauge\ng -0.5e-3\n", true },
	{ HEAD "m_total{a=\"1\",a=\"2\"} 1\n", false },	/* label twice */
	{ HEAD HEAD "m_total 1\n", false },		/* HELP twice */
	{ HEAD "m_total{a=\"\\t\"} 1\n", false },	/* bad escape */
	{ HEAD "m_total{a=\"x\ny\"} 1\n", false },	/* raw newline */
	{ HEAD "m_total{a=\"\xff\"} 1\n", false },	/* not UTF-8 */
	{ HEAD "m_total{1a=\"x\"} 1\n", false },	/* label name */
	{ HEAD "m_total one\n", false },		/* value */
	{ HEAD "m_total 1", false },			/* no newline */
	{ "# TYPE m_total counter\nm_total 1\n# TYPE m_total counter\n",
	  false },					/* TYPE twice */
	{ HEAD "m_total 1 1700000000000\n", false },	/* stricter */
	{ "m 1\n", false },				/* stricter */
	{ HEAD "m_total 1\nm_total 2\n", false },	/* series twice */
	/* An escaped newline is a newline, not an n: two series. */
	{ HEAD "m_total{a=\"a\\nb\"} 1\nm_total{a=\"anb\"} 1\n", true },
	{ HEAD "m_total{a=\"a\\nb\"} 1\nm_total{a=\"a\\nb\"} 1\n",
	  false },					/* series twice */
};

TEST(checker_agrees_with_promtool)
{
	bool have_promtool = !access(PROMTOOL, X_OK);
	char why[160];

	if (!have_promtool)
		printf("  no " PROMTOOL " (Debian package prometheus): the "
		       "checker's verdicts only\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *t = cases[i].text;
		bool ok = !prom_check(t, strlen(t), why, sizeof(why));
		int rc;

		if (ok != cases[i].valid)
			printf("  case %zu: checker says %s\n", i,
			       ok ? "valid" : why);
		CHECK(ok == cases[i].valid);
		if (!have_promtool)
			continue;
		rc = promtool_check(t, strlen(t), true);
		/* 0 valid, 3 valid with lint remarks, 1 refused. */
		if (rc == 1)
			CHECK(!ok);
		if (ok)
			CHECK(rc == 0 || rc == 3);
	}
}

RUN_TESTS()
