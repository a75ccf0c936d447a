/* SPDX-License-Identifier: BSD-2-Clause */
/* Median and spread of a benchmark's repetitions. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v in place; returns its median and sets its min and max. */
static inline double median_spread(double *v, int n, double *min,
				   double *max)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*min = v[0];
	*max = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
