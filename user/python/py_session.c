// SPDX-License-Identifier: BSD-2-Clause
/* --python-stacks for one traced process: see py_session.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model/clocks.h"
#include "attach/probes.h"
#include "model/trace.h"
#include "py_session.h"
#include "py_stack.h"

/* Code objects are checked against the target again after this long
 * (py_stack.h): a code object freed and its address reused within it is
 * named as the old one. */
#define EPOCH_S 0.05

/* The reader of process pid, opened on first use (children too). */
static struct py_reader *reader_of(struct py_session *ps, uint32_t pid,
				   char *err, size_t len)
{
	struct py_reader *r;

	for (int i = 0; i < ps->nr; i++)
		if ((uint32_t)ps->readers[i].pid == pid)
			return ps->readers[i].runtime ? &ps->readers[i] : NULL;
	if (ps->nr == ps->cap) {
		int cap = ps->cap ? 2 * ps->cap : 4;
		void *p = realloc(ps->readers, cap * sizeof(*ps->readers));

		if (!p)
			return NULL;
		ps->readers = p;
		ps->cap = cap;
	}
	r = &ps->readers[ps->nr++];
	if (py_reader_open(r, pid, err, len)) {
		memset(r, 0, sizeof(*r));
		r->pid = pid;		/* remembered: not tried again */
		return NULL;
	}
	return r;
}

static int code_gen(void *ctx, uint32_t pid, uint64_t code, uint32_t *gen)
{
	char err[256];
	struct py_reader *r = reader_of(ctx, pid, err, sizeof(err));

	return r && !py_code_gen(r, code, gen) ? 0 : -1;
}

static int locate(void *ctx, uint32_t pid, uint64_t code, int32_t unit,
		  char *func, size_t func_len, char *file, size_t file_len,
		  int *line)
{
	char err[256];
	struct py_reader *r = reader_of(ctx, pid, err, sizeof(err));
	struct py_frame f = { .code = code, .unit = unit };
	struct py_location loc;

	if (!r || py_locate(r, &f, &loc))
		return -1;
	snprintf(func, func_len, "%s", loc.qualname);
	snprintf(file, file_len, "%s", loc.filename);
	*line = loc.line;
	return 0;
}

bool py_session_start(struct py_session *ps, pid_t pid, unsigned depth,
		      struct probes *probes, struct trace *t, char *why,
		      size_t len)
{
	struct rf_py_config cfg;
	struct py_reader *r;

	why[0] = 0;
	if (ps->started)
		return false;
	ps->started = true;
	r = reader_of(ps, pid, why, len);
	if (!r)
		return false;
	py_bpf_config(r, depth, &cfg);
	probes_set_python(probes, &cfg);
	t->py_resolver = (struct py_resolver){
		.gen = code_gen, .locate = locate, .ctx = ps,
	};
	ps->epoch_s = monotonic_s();
	return true;
}

/* Threads named at most this often (a read walks every Thread). */
#define NAMES_EVERY_S 0.05
#define MAX_NAMES 1024
/* A thread whose name is not found after this many reads stays unnamed
 * (a thread made outside threading, a C++ thread calling into Python). */
#define NAME_TRIES 4

/* Thread tid of pid's Python name, into th's label if found. */
static void name_thread(struct py_session *ps, struct trace *t,
			struct thread *th, uint32_t pid, double now)
{
	struct py_reader *r;
	char why[256];
	int n;

	if (ps->names_pid != pid || now - ps->names_s > NAMES_EVERY_S) {
		if (!ps->names &&
		    !(ps->names = calloc(MAX_NAMES, sizeof(*ps->names))))
			return;
		r = reader_of(ps, pid, why, sizeof(why));
		n = r ? py_thread_names(r, ps->names, MAX_NAMES) : -1;
		ps->nr_names = n > 0 ? n : 0;
		ps->names_pid = pid;
		ps->names_s = now;
		th->py_name_tries++;
	}
	for (int i = 0; i < ps->nr_names; i++)
		if ((uint32_t)ps->names[i].tid == th->tid) {
			trace_label_thread(t, th, ps->names[i].name);
			return;
		}
}

void py_session_note(struct py_session *ps, struct trace *t,
		     const struct rf_py_stack_event *e)
{
	struct thread *th = trace_thread(t, e->hdr.tid, NULL);
	double now = monotonic_s();

	if (now - ps->epoch_s > EPOCH_S) {
		for (int i = 0; i < ps->nr; i++)
			py_reader_next_epoch(&ps->readers[i]);
		ps->epoch_s = now;
	}
	if (th && !th->py_named && th->py_name_tries < NAME_TRIES)
		name_thread(ps, t, th, e->hdr.pid, now);
}

void py_session_free(struct py_session *ps)
{
	for (int i = 0; i < ps->nr; i++)
		py_reader_close(&ps->readers[i]);
	free(ps->readers);
	free(ps->names);
	memset(ps, 0, sizeof(*ps));
}
