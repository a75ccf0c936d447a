/* SPDX-License-Identifier: BSD-2-Clause */
/* The Chrome writer on an in-memory stream, for tests: begun before the
 * first event, finished into text the test reads. */
#ifndef RFBPF_TEST_CHROME_CAPTURE_H
#define RFBPF_TEST_CHROME_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include "check.h"
#include "export/chrome.h"

struct chrome_capture {
	struct chrome_writer w;
	FILE *f;		/* open until capture_finish() */
	char *text;
	size_t len;
};

static inline void capture_begin(struct chrome_capture *c)
{
	c->f = open_memstream(&c->text, &c->len);
	if (!c->f)
		abort();
	chrome_begin(&c->w, c->f, 0, 0);
}

/* Ends the file (op_stats from a, which may be NULL); its text, owned
 * by c. */
static inline const char *capture_finish(struct chrome_capture *c,
					  const struct trace *t,
					  const struct aggregate *a)
{
	CHECK(!chrome_finish(&c->w, t, a));
	fclose(c->f);
	c->f = NULL;
	CHECK(c->text && strlen(c->text) == c->len);
	return c->text;
}

static inline void capture_free(struct chrome_capture *c,
				const struct trace *t)
{
	if (c->f) {		/* the writer's maps go with finish */
		chrome_finish(&c->w, t, NULL);
		fclose(c->f);
	}
	free(c->text);
}

#endif
