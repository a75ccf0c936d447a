// SPDX-License-Identifier: BSD-2-Clause
/* --python-stacks for one session: see session_python.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "python/py_stack.h"
#include "session.h"
#include "session_python.h"

/* Code objects are checked against the target again after this long
 * (py_stack.h): a code object freed and its address reused within it is
 * named as the old one. */
#define EPOCH_S 0.05

/* The reader of process pid, opened on first use (children too). */
static struct py_reader *reader_of(struct session *s, uint32_t pid)
{
	struct py_reader *r;
	char err[256];

	for (int i = 0; i < s->nr_py; i++)
		if ((uint32_t)s->py[i].pid == pid)
			return s->py[i].runtime ? &s->py[i] : NULL;
	if (s->nr_py == s->cap_py) {
		int cap = s->cap_py ? 2 * s->cap_py : 4;
		void *p = realloc(s->py, cap * sizeof(*s->py));

		if (!p)
			return NULL;
		s->py = p;
		s->cap_py = cap;
	}
	r = &s->py[s->nr_py++];
	if (py_reader_open(r, pid, err, sizeof(err))) {
		memset(r, 0, sizeof(*r));
		r->pid = pid;		/* remembered: not tried again */
		return NULL;
	}
	return r;
}

static int code_gen(void *ctx, uint32_t pid, uint64_t code, uint32_t *gen)
{
	struct py_reader *r = reader_of(ctx, pid);

	return r && !py_code_gen(r, code, gen) ? 0 : -1;
}

static int locate(void *ctx, uint32_t pid, uint64_t code, int32_t unit,
		  char *func, size_t func_len, char *file, size_t file_len,
		  int *line)
{
	struct py_reader *r = reader_of(ctx, pid);
	struct py_frame f = { .code = code, .unit = unit };
	struct py_location loc;

	if (!r || py_locate(r, &f, &loc))
		return -1;
	snprintf(func, func_len, "%s", loc.qualname);
	snprintf(file, file_len, "%s", loc.filename);
	*line = loc.line;
	return 0;
}

void session_python_start(struct session *s)
{
	struct rf_py_config cfg;
	struct py_reader *r;
	char err[256];

	if (!s->opt->python_stacks || s->py_started)
		return;
	s->py_started = true;
	r = reader_of(s, s->pid);
	if (!r) {
		struct py_reader probe;

		py_reader_open(&probe, s->pid, err, sizeof(err));
		py_reader_close(&probe);
		status_clear(&s->status);
		fprintf(stderr, "rfbpf: warning: --python-stacks: %s; ops are "
			"traced without Python frames\n", err);
		return;
	}
	py_bpf_config(r, s->opt->python_depth, &cfg);
	probes_set_python(&s->probes, &cfg);
	s->trace.py_resolver = (struct py_resolver){
		.gen = code_gen, .locate = locate, .ctx = s,
	};
	s->py_epoch_s = monotonic_s();
}

void session_python_event(struct session *s,
			  const struct rf_py_stack_event *e, size_t size)
{
	if (!s->trace.py_resolver.gen)
		return;
	if (!(e->py_flags & RF_PY_F_SAME)) {
		double now = monotonic_s();

		if (now - s->py_epoch_s > EPOCH_S) {
			for (int i = 0; i < s->nr_py; i++)
				py_reader_next_epoch(&s->py[i]);
			s->py_epoch_s = now;
		}
	}
	stacks_py_stack(&s->trace, e, size);
}

void session_python_free(struct session *s)
{
	for (int i = 0; i < s->nr_py; i++)
		py_reader_close(&s->py[i]);
	free(s->py);
	s->py = NULL;
	s->nr_py = s->cap_py = 0;
}
