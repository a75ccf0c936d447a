// SPDX-License-Identifier: BSD-2-Clause
/*
 * user/python/py_stack.c against CPython itself:
 *   - py_offsets_311 equals what the interpreter's own headers say
 *     (tests/fixtures/py_offsets.txt, printed by py_offsets.c built
 *     against python3-dev's internal headers);
 *   - a live Debian python3 (tests/fixtures/py_stack_target.py) with three
 *     threads blocked in nested calls: each thread's stack read from
 *     outside, function, file and line, equals the one the process printed
 *     of itself from sys._current_frames();
 *   - a second read hits the code cache; a pid that runs no Python is
 *     refused, saying so.
 */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "python/py_stack.h"
#include "rfbpf.h"

#define FIX "tests/fixtures/"

TEST(offsets_are_the_interpreters_own)
{
	const struct py_offsets *o = &py_offsets_311;
	const struct { const char *name; uint64_t have; } fields[] = {
#define F(f) { #f, o->f }
		F(runtime_interpreters_head), F(interp_threads_head),
		F(tstate_next), F(tstate_native_thread_id), F(tstate_cframe),
		F(cframe_current_frame), F(frame_code), F(frame_previous),
		F(frame_prev_instr), F(frame_owner), F(code_filename),
		F(code_qualname),
		F(code_firstlineno), F(code_linetable),
		F(code_code_adaptive), F(unicode_length), F(unicode_state),
		F(unicode_ascii_data), F(unicode_compact_data),
		F(bytes_size), F(bytes_data), F(interp_modules),
		F(module_dict), F(dict_keys), F(dict_values),
		F(keys_log2_index_bytes), F(keys_kind), F(keys_nentries),
		F(keys_indices), F(entry_general), F(entry_unicode),
		F(type_flags), F(heaptype_cached_keys), F(long_digit),
		F(managed_dict_flag), F(runtime_gil),
		{ "gil_state_size", RF_GIL_STATE_SIZE },
#undef F
	};
	char name[64];
	unsigned major, minor;
	unsigned long v;
	int seen = 0;
	FILE *f = fopen(FIX "py_offsets.txt", "r");

	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fscanf(f, "version %u.%u", &major, &minor) == 2);
	CHECK(major == o->major && minor == o->minor);
	while (fscanf(f, "%63s %lu", name, &v) == 2)
		for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++)
			if (!strcmp(name, fields[i].name)) {
				if (fields[i].have != v)
					fprintf(stderr, "  %s: %llu, the "
						"headers say %lu\n", name,
						(unsigned long long)
						fields[i].have, v);
				CHECK_EQ_U64(fields[i].have, v);
				seen++;
			}
	fclose(f);
	CHECK_EQ_U64(seen, sizeof(fields) / sizeof(*fields));
}

#define MAX_FRAMES 32
#define MAX_THREADS 3

struct expected {
	pid_t tid;
	int n;
	struct py_location at[MAX_FRAMES];
};

/* Starts the target and reads what it says of its threads. */
static pid_t start_target(struct expected *want, int *nr)
{
	static char line[1024];
	int fds[2];
	pid_t pid;
	FILE *out;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/usr/bin/python3", "python3",
		      FIX "py_stack_target.py", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	out = fdopen(fds[0], "r");
	*nr = 0;
	while (out && fgets(line, sizeof(line), out)) {
		struct expected *e = &want[*nr - 1];
		char *tab1, *tab2;

		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "ready"))
			break;
		if (!strncmp(line, "thread ", 7) && *nr < MAX_THREADS) {
			want[*nr].tid = atoi(line + 7);
			want[(*nr)++].n = 0;
			continue;
		}
		tab1 = strchr(line, '\t');
		tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
		if (!*nr || !tab2 || e->n == MAX_FRAMES)
			continue;
		*tab1 = *tab2 = 0;
		snprintf(e->at[e->n].qualname, PY_NAME_MAX, "%.*s",
			 PY_NAME_MAX - 1, line);
		snprintf(e->at[e->n].filename, PY_FILE_MAX, "%.*s",
			 PY_FILE_MAX - 1, tab1 + 1);
		e->at[e->n++].line = atoi(tab2 + 1);
	}
	return pid;
}

TEST(a_live_interpreters_threads_as_it_sees_them)
{
	struct expected want[MAX_THREADS];
	struct py_frame frames[MAX_FRAMES];
	struct py_location loc;
	struct py_reader r;
	char err[256];
	uint64_t ts;
	int nr = 0, ret;
	pid_t pid = start_target(want, &nr);

	CHECK(pid > 0);
	CHECK_EQ_U64(nr, MAX_THREADS);
	ret = py_reader_open(&r, pid, err, sizeof(err));
	if (ret)
		fprintf(stderr, "  %s\n", err);
	CHECK_EQ_U64(ret, 0);
	for (int t = 0; !ret && t < nr; t++) {
		int n;

		CHECK_EQ_U64(py_thread_state(&r, want[t].tid, &ts), 0);
		n = py_read_frames(&r, ts, frames, MAX_FRAMES);
		CHECK_EQ_U64(n, want[t].n);
		CHECK(want[t].n >= 3);
		for (int i = 0; i < n && i < want[t].n; i++) {
			CHECK_EQ_U64(py_locate(&r, &frames[i], &loc), 0);
			if (strcmp(loc.qualname, want[t].at[i].qualname) ||
			    strcmp(loc.filename, want[t].at[i].filename) ||
			    loc.line != want[t].at[i].line)
				fprintf(stderr, "  thread %d frame %d: %s %s:%d"
					", Python says %s %s:%d\n",
					want[t].tid, i, loc.qualname,
					loc.filename, loc.line,
					want[t].at[i].qualname,
					want[t].at[i].filename,
					want[t].at[i].line);
			CHECK_STR(loc.qualname, want[t].at[i].qualname);
			CHECK_STR(loc.filename, want[t].at[i].filename);
			CHECK_EQ_U64(loc.line, want[t].at[i].line);
		}
	}
	/* The names the workers were picked for are there. */
	CHECK(nr == MAX_THREADS && !strcmp(want[0].at[1].qualname,
					   "Model.forward"));
	CHECK(nr == MAX_THREADS && !strcmp(want[1].at[2].qualname, "café"));
	/* Read again: every code object from the cache. */
	if (!ret && nr) {
		uint64_t misses = r.code_misses;
		int n;

		CHECK_EQ_U64(py_thread_state(&r, want[0].tid, &ts), 0);
		n = py_read_frames(&r, ts, frames, MAX_FRAMES);
		for (int i = 0; i < n; i++)
			CHECK_EQ_U64(py_locate(&r, &frames[i], &loc), 0);
		CHECK_EQ_U64(r.code_misses, misses);
		/* A thread that is not the interpreter's. */
		CHECK_EQ_U64(py_thread_state(&r, 1, &ts),
			     (uint64_t)(int64_t)-ENOENT);
		/* The whole list: the main thread and the three workers,
		 * each with the thread state found one by one. */
		struct py_thread all[8];
		int n_all = py_list_threads(&r, all, 8), workers = 0;
		bool main_seen = false;

		CHECK_EQ_U64(n_all, 1 + MAX_THREADS);
		for (int i = 0; i < n_all; i++) {
			uint64_t one;

			CHECK_EQ_U64(py_thread_state(&r, all[i].tid, &one), 0);
			CHECK_EQ_U64(one, all[i].tstate);
			for (int t = 0; t < nr; t++)
				workers += all[i].tid == want[t].tid;
			main_seen |= all[i].tid == pid;
		}
		CHECK_EQ_U64(workers, MAX_THREADS);
		CHECK(main_seen);
		/* Their Python names, as threading.Thread(name=...) gave
		 * them: w0, w1, w2, and MainThread. */
		struct py_thread_name names[8];
		int nn = py_thread_names(&r, names, 8), named = 0;

		CHECK_EQ_U64(nn, 1 + MAX_THREADS);
		for (int i = 0; i < nn; i++) {
			char want_name[16];

			if (names[i].tid == pid) {
				CHECK_STR(names[i].name, "MainThread");
				named++;
			}
			for (int k = 0; k < nr; k++)
				if (names[i].tid == want[k].tid) {
					snprintf(want_name, sizeof(want_name),
						 "w%d", k);
					CHECK_STR(names[i].name, want_name);
					named++;
				}
		}
		CHECK_EQ_U64(named, 1 + MAX_THREADS);
	}
	py_reader_close(&r);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* A compact ASCII str as CPython 3.11 lays it out, in our own memory. */
static void fake_str(uint8_t *obj, const char *text)
{
	const struct py_offsets *o = &py_offsets_311;
	uint64_t len = strlen(text);
	/* interned:2 kind:3 compact:1 ascii:1 ready:1: kind 1, compact,
	 * ascii, ready */
	uint32_t state = 1u << 2 | 1u << 5 | 1u << 6 | 1u << 7;

	memcpy(obj + o->unicode_length, &len, sizeof(len));
	memcpy(obj + o->unicode_state, &state, sizeof(state));
	memcpy(obj + o->unicode_ascii_data, text, len + 1);
}

static void fake_code(uint8_t *code, const uint8_t *qualname,
		      const uint8_t *filename, const uint8_t *linetable,
		      int32_t first)
{
	const struct py_offsets *o = &py_offsets_311;
	uint64_t q = (uintptr_t)qualname, f = (uintptr_t)filename,
		 l = (uintptr_t)linetable;

	memcpy(code + o->code_qualname, &q, 8);
	memcpy(code + o->code_filename, &f, 8);
	memcpy(code + o->code_linetable, &l, 8);
	memcpy(code + o->code_firstlineno, &first, 4);
}

/* A code object freed and another made at its address: the cache names
 * the new one from the next epoch on, and its generation moves, so a
 * cache keyed by (address, generation) does not mix them up. */
TEST(a_reused_code_address_is_read_anew_at_the_next_epoch)
{
	static uint8_t code[256], name_a[128], name_b[128], file[128],
		       table[64];
	struct py_reader r = { .pid = getpid(), .off = &py_offsets_311 };
	struct py_frame f = { .code = (uintptr_t)code, .unit = -1 };
	struct py_location loc;
	uint32_t gen = 0;

	fake_str(name_a, "Model.forward");
	fake_str(name_b, "train_step");
	fake_str(file, "/srv/model.py");
	fake_code(code, name_a, file, table, 12);
	CHECK_EQ_U64(py_locate(&r, &f, &loc), 0);
	CHECK_STR(loc.qualname, "Model.forward");
	CHECK_STR(loc.filename, "/srv/model.py");
	CHECK_EQ_U64(loc.line, 12);
	CHECK_EQ_U64(py_code_gen(&r, f.code, &gen), 0);
	CHECK_EQ_U64(gen, 1);
	/* Freed, and another code object made at the same address. */
	fake_code(code, name_b, file, table, 40);
	CHECK_EQ_U64(py_locate(&r, &f, &loc), 0);
	CHECK_STR(loc.qualname, "Model.forward");	/* same epoch */
	py_reader_next_epoch(&r);
	CHECK_EQ_U64(py_locate(&r, &f, &loc), 0);
	CHECK_STR(loc.qualname, "train_step");
	CHECK_EQ_U64(loc.line, 40);
	CHECK_EQ_U64(py_code_gen(&r, f.code, &gen), 0);
	CHECK_EQ_U64(gen, 2);
	CHECK_EQ_U64(r.code_misses, 2);
	/* Unchanged across epochs: checked, not read anew. */
	py_reader_next_epoch(&r);
	CHECK_EQ_U64(py_locate(&r, &f, &loc), 0);
	CHECK_EQ_U64(r.code_misses, 2);
	/* Unreadable memory. */
	f.code = 8;
	CHECK(py_locate(&r, &f, &loc) != 0);
	py_reader_close(&r);
}

TEST(a_process_without_python_is_refused)
{
	struct py_reader r;
	char err[256] = "";

	/* This test program itself: C, no interpreter. */
	CHECK_EQ_U64(py_reader_open(&r, getpid(), err, sizeof(err)),
		     (uint64_t)(int64_t)-ENOENT);
	CHECK(strstr(err, "runs no CPython") != NULL);
	py_reader_close(&r);
}

int main(void)
{
	return check_run_all(__FILE__);
}
