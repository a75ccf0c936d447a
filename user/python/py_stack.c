// SPDX-License-Identifier: BSD-2-Clause
/* A Python thread's stack from outside: see py_stack.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "py_stack.h"
#include "line_table.h"
#include "py_debug_words.h"
#include "attach/elf_symbols.h"
#include "attach/target.h"
#include "rfbpf.h"

/* CPython 3.11 on x86-64 (Include/internal/pycore_*.h): what offsetof()
 * gives against Debian's python3.11-dev headers, which the unit test
 * checks again on every run. */
const struct py_offsets py_offsets_311 = {
	.major = 3, .minor = 11,
	.runtime_interpreters_head = 40,
	.interp_threads_head = 16,
	.tstate_next = 8, .tstate_native_thread_id = 160, .tstate_cframe = 56,
	.cframe_current_frame = 8,
	.frame_code = 32, .frame_previous = 48, .frame_prev_instr = 56,
	.code_filename = 112, .code_qualname = 128, .code_firstlineno = 72,
	.code_linetable = 136, .code_code_adaptive = 184,
	/* 3.11 has no C-stack shim frames: no owner value names one. */
	.frame_owner = 69, .owner_cstack = 0xff, .owner_interpreter = 0xff,
	.interp_modules = 888, .module_dict = 16,
	.dict_keys = 32, .dict_values = 40,
	.keys_log2_index_bytes = 9, .keys_kind = 10, .keys_nentries = 24,
	.keys_indices = 32, .entry_general = 24, .entry_unicode = 16,
	.type_flags = 168, .heaptype_cached_keys = 872, .long_digit = 24,
	.managed_dict_flag = 1ul << 4,
	.unicode_length = 16, .unicode_state = 32,
	.unicode_ascii_data = 48, .unicode_compact_data = 72,
	.bytes_size = 16, .bytes_data = 32,
	.thread_names = true,
	.runtime_gil = 360,
};

#define DEBUG_WORDS 81

/* r->debug from the interpreter's _Py_DebugOffsets; 0, or -ENOTSUP with
 * a line in err. */
static int offsets_from_debug(struct py_reader *r, const char *shown,
			      unsigned minor, char *err, size_t len)
{
	const struct debug_words *d = NULL;
	uint64_t w[DEBUG_WORDS];
	struct py_offsets *o = &r->debug;

	for (size_t i = 0; i < sizeof(debug_words) / sizeof(*d); i++)
		if (debug_words[i].minor == minor)
			d = &debug_words[i];
	if (!d)
		return snprintf(err, len, "%s: Python 3.%u's layout is not "
				"known (3.11, 3.13 and 3.14 are)", shown,
				minor), -ENOTSUP;
	if (target_read(r->pid, r->runtime, w, sizeof(w)) ||
	    memcmp(w, "xdebugpy", 8) || (w[1] >> 24) != 3 ||
	    (w[1] >> 16 & 0xff) != minor)
		return snprintf(err, len, "%s: no Python 3.%u debug offsets "
				"at _PyRuntime", shown, minor), -ENOTSUP;
	if (w[d->free_threaded])
		return snprintf(err, len, "%s: a free-threaded build (not "
				"supported)", shown), -ENOTSUP;
	*o = (struct py_offsets){
		.major = 3, .minor = minor,
		.runtime_interpreters_head = w[d->interpreters_head],
		.interp_threads_head = w[d->threads_head],
		.tstate_next = w[d->tstate_next],
		.tstate_native_thread_id = w[d->tstate_native_thread_id],
		/* No _PyCFrame since 3.12: the frame is the thread's own. */
		.tstate_cframe = RF_PY_NO_FIELD,
		.cframe_current_frame = w[d->tstate_current_frame],
		.frame_code = w[d->frame_executable],
		.frame_previous = w[d->frame_previous],
		/* instr_ptr: the unit running (or about to), which CPython
		 * itself maps to the frame's line. */
		.frame_prev_instr = w[d->frame_instr_ptr],
		.frame_owner = w[d->frame_owner],
		.owner_cstack = d->owner_cstack,
		.owner_interpreter = d->owner_interpreter,
		.code_filename = w[d->code_filename],
		.code_qualname = w[d->code_qualname],
		.code_firstlineno = w[d->code_firstlineno],
		.code_linetable = w[d->code_linetable],
		.code_code_adaptive = w[d->code_code_adaptive],
		.unicode_length = w[d->unicode_length],
		.unicode_state = w[d->unicode_state],
		.unicode_ascii_data = w[d->unicode_ascii_size],
		/* PyCompactUnicodeObject adds utf8_length and utf8 (3.12
		 * dropped wstr): not in the debug offsets. */
		.unicode_compact_data = w[d->unicode_ascii_size] + 16,
		.bytes_size = w[d->bytes_size],
		.bytes_data = w[d->bytes_data],
		.interp_gil = w[d->interp_gil],
		/* Dict internals are not in the debug offsets: threads keep
		 * their comm on 3.13+. */
		.thread_names = false,
	};
	r->off = o;
	return 0;
}

/* Lists the interpreter never has more of: a loop in a corrupt list (or
 * one read while it changes) ends here. */
#define MAX_THREADS 4096
#define MAX_LINETABLE (64u << 10)

struct py_code_entry {
	uint64_t addr;
	/* What identifies the code object at addr: read again once per
	 * epoch (py_reader_next_epoch), so a code object freed and another
	 * allocated there is noticed. */
	uint64_t qualname, filename, linetable;
	int firstlineno;
	uint64_t checked_epoch;
	uint32_t gen;		/* how many objects were read at addr */
	char name[PY_NAME_MAX], file[PY_FILE_MAX];
	uint8_t *table;
	size_t table_len;
	/* Lines already looked up: unit -> line + 2 (0: not yet). */
	int32_t *lines;
	size_t nr_lines;
};

static int rd(const struct py_reader *r, uint64_t addr, void *buf, size_t n)
{
	return target_read(r->pid, addr, buf, n);
}

static int rd_ptr(const struct py_reader *r, uint64_t addr, uint64_t *v)
{
	return rd(r, addr, v, sizeof(*v));
}

static bool version_of(const char *base, unsigned *major, unsigned *minor)
{
	return sscanf(base, "libpython%u.%u", major, minor) == 2 ||
	       sscanf(base, "python%u.%u", major, minor) == 2;
}

static bool is_libpython(const char *base)
{
	unsigned a, b;

	return !strncmp(base, "libpython", 9) && version_of(base, &a, &b);
}

static bool is_python_exe(const char *base)
{
	unsigned a, b;

	return !strncmp(base, "python", 6) && version_of(base, &a, &b);
}

int py_reader_open(struct py_reader *r, pid_t pid, char *err, size_t len)
{
	static const char *const names[] = { "_PyRuntime" };
	char path[4096], shown[4096];
	const char *base;
	unsigned major, minor;
	uint64_t off;
	int ret;

	memset(r, 0, sizeof(*r));
	r->pid = pid;
	/* libpython when the executable links it: _PyRuntime is there. */
	ret = target_find_library(pid, is_libpython, path, sizeof(path));
	if (ret == -ENOENT)
		ret = target_find_library(pid, is_python_exe, path,
					  sizeof(path));
	if (ret)
		return snprintf(err, len, "process %d %s", pid,
				ret == -ENOENT ? "runs no CPython" :
				"cannot be read"), ret;
	target_mapped_name(path, shown, sizeof(shown));
	base = strrchr(shown, '/') ? strrchr(shown, '/') + 1 : shown;
	if (!version_of(base, &major, &minor))
		return snprintf(err, len, "%s: no Python version in its name",
				shown), -ENOTSUP;
	if (major != 3 || minor < 11 || minor == 12)
		return snprintf(err, len, "%s: Python %u.%u's layout is not "
				"known (3.11, 3.13 and 3.14 are)", shown,
				major, minor), -ENOTSUP;
	if (elf_find_objects(path, names, 1, &off) != 1 ||
	    target_addr_of_data_offset(pid, path, off, &r->runtime))
		return snprintf(err, len, "%s: no _PyRuntime mapped", shown),
		       -ENOENT;
	return py_reader_at(r, pid, r->runtime, minor, shown, err, len);
}

int py_reader_at(struct py_reader *r, pid_t pid, uint64_t runtime,
		 unsigned minor, const char *shown, char *err, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->runtime = runtime;
	if (minor == 11) {
		r->off = &py_offsets_311;
		return 0;
	}
	return offsets_from_debug(r, shown, minor, err, len);
}

/* Walks the main interpreter's thread states: fn(ctx, tid, tstate) for
 * each until it returns true. 0, or -errno. */
static int each_thread(struct py_reader *r,
		       bool (*fn)(void *ctx, pid_t tid, uint64_t tstate),
		       void *ctx)
{
	const struct py_offsets *o = r->off;
	uint64_t interp, t, native;
	int ret;

	if ((ret = rd_ptr(r, r->runtime + o->runtime_interpreters_head,
			  &interp)) ||
	    (ret = rd_ptr(r, interp + o->interp_threads_head, &t)))
		return ret;
	for (int i = 0; t && i < MAX_THREADS; i++) {
		if ((ret = rd_ptr(r, t + o->tstate_native_thread_id, &native)))
			return ret;
		if (fn(ctx, (pid_t)native, t))
			return 0;
		if ((ret = rd_ptr(r, t + o->tstate_next, &t)))
			return ret;
	}
	return 0;
}

struct find_tid {
	pid_t tid;
	uint64_t tstate;
};

static bool is_tid(void *ctx, pid_t tid, uint64_t tstate)
{
	struct find_tid *f = ctx;

	if (tid != f->tid)
		return false;
	f->tstate = tstate;
	return true;
}

int py_thread_state(struct py_reader *r, pid_t tid, uint64_t *tstate)
{
	struct find_tid f = { tid, 0 };
	int ret = each_thread(r, is_tid, &f);

	if (ret)
		return ret;
	if (!f.tstate)
		return -ENOENT;
	*tstate = f.tstate;
	return 0;
}

struct thread_list {
	struct py_thread *out;
	int n, max;
};

static bool add_thread(void *ctx, pid_t tid, uint64_t tstate)
{
	struct thread_list *l = ctx;

	if (l->n == l->max)
		return true;
	l->out[l->n++] = (struct py_thread){ tid, tstate };
	return false;
}

int py_list_threads(struct py_reader *r, struct py_thread *out, int max)
{
	struct thread_list l = { out, 0, max };
	int ret = each_thread(r, add_thread, &l);

	return ret ? ret : l.n;
}

int py_read_frames(struct py_reader *r, uint64_t tstate,
		   struct py_frame *out, int max)
{
	const struct py_offsets *o = r->off;
	uint64_t cframe, frame, code, prev_instr, start;
	/* Shim and entry frames skipped: the interpreter pushes at most one
	 * per entry from C, so more than max of them is a cycle (a list read
	 * while it changes, or corrupt), which would never end. */
	int n = 0, skipped = 0, ret;

	if (o->tstate_cframe == RF_PY_NO_FIELD)
		cframe = tstate;	/* 3.12+: the frame is the thread's */
	else if ((ret = rd_ptr(r, tstate + o->tstate_cframe, &cframe)))
		return ret;
	if ((ret = rd_ptr(r, cframe + o->cframe_current_frame, &frame)))
		return ret;
	while (frame && n < max) {
		uint8_t owner = 0;

		if ((ret = rd_ptr(r, frame + o->frame_code, &code)) ||
		    (ret = rd_ptr(r, frame + o->frame_prev_instr,
				  &prev_instr)) ||
		    (ret = rd(r, frame + o->frame_owner, &owner, 1)))
			return ret;
		if (owner == o->owner_cstack || owner == o->owner_interpreter) {
			if (++skipped > max)
				break;
			if ((ret = rd_ptr(r, frame + o->frame_previous,
					  &frame)))
				return ret;
			continue;
		}
		code &= ~7ull;		/* 3.14: a tagged _PyStackRef */
		/* prev_instr: the unit last run; one before the code when
		 * the frame has not run any (3.11's _PyInterpreterFrame). */
		start = code + o->code_code_adaptive;
		out[n].code = code;
		out[n].unit = prev_instr >= start ?
			      (int32_t)((prev_instr - start) / 2) : -1;
		n++;
		if ((ret = rd_ptr(r, frame + o->frame_previous, &frame)))
			return ret;
	}
	return n;
}

/* One code point as UTF-8 into buf[*at..len). */
static void put_utf8(char *buf, size_t len, size_t *at, uint32_t c)
{
	char tmp[4];
	size_t n;

	if (c < 0x80) {
		tmp[0] = (char)c, n = 1;
	} else if (c < 0x800) {
		tmp[0] = (char)(0xc0 | c >> 6);
		tmp[1] = (char)(0x80 | (c & 63)), n = 2;
	} else if (c < 0x10000) {
		tmp[0] = (char)(0xe0 | c >> 12);
		tmp[1] = (char)(0x80 | (c >> 6 & 63));
		tmp[2] = (char)(0x80 | (c & 63)), n = 3;
	} else {
		tmp[0] = (char)(0xf0 | c >> 18);
		tmp[1] = (char)(0x80 | (c >> 12 & 63));
		tmp[2] = (char)(0x80 | (c >> 6 & 63));
		tmp[3] = (char)(0x80 | (c & 63)), n = 4;
	}
	if (*at + n < len) {
		memcpy(buf + *at, tmp, n);
		*at += n;
	}
}

/* A str object as UTF-8 (compact strings: what code objects hold);
 * cut to fit, "?" when it cannot be read. */
void py_read_str(const struct py_reader *r, uint64_t obj, char *buf,
		 size_t len)
{
	const struct py_offsets *o = r->off;
	uint64_t length;
	uint32_t state, kind;
	uint8_t data[4 * PY_FILE_MAX];
	size_t at = 0, n;

	snprintf(buf, len, "?");
	if (rd(r, obj + o->unicode_length, &length, sizeof(length)) ||
	    rd(r, obj + o->unicode_state, &state, sizeof(state)))
		return;
	/* state: interned:2 kind:3 compact:1 ascii:1 ready:1 */
	kind = state >> 2 & 7;
	if (!(state & 1u << 5) || (kind != 1 && kind != 2 && kind != 4))
		return;			/* not compact: not in code objects */
	n = length < len - 1 ? (size_t)length : len - 1;
	if (n * kind > sizeof(data))
		n = sizeof(data) / kind;
	if (rd(r, obj + (state & 1u << 6 ? o->unicode_ascii_data :
			 o->unicode_compact_data), data, n * kind))
		return;
	for (size_t i = 0; i < n; i++) {
		uint32_t c = kind == 1 ? data[i] :
			     kind == 2 ? ((uint16_t *)data)[i] :
					 ((uint32_t *)data)[i];

		put_utf8(buf, len, &at, c);
	}
	buf[at] = 0;
}

static void drop_entry(struct py_code_entry *e)
{
	free(e->table);
	free(e->lines);
	e->table = NULL;
	e->lines = NULL;
	e->table_len = e->nr_lines = 0;
}

/* The fields that identify a code object, read in one go. */
static int read_identity(const struct py_reader *r, uint64_t addr,
			 uint64_t *qualname, uint64_t *filename,
			 uint64_t *linetable, int32_t *first)
{
	const struct py_offsets *o = r->off;
	/* 64-bit: 3.13+ offsets come from the target, and one near
	 * UINT32_MAX must not wrap past the others. */
	uint64_t lo = o->code_firstlineno, hi = lo + 4;
	uint8_t buf[512];
	int ret;

	lo = lo < o->code_qualname ? lo : o->code_qualname;
	lo = lo < o->code_filename ? lo : o->code_filename;
	lo = lo < o->code_linetable ? lo : o->code_linetable;
	hi = hi > o->code_qualname + 8ull ? hi : o->code_qualname + 8ull;
	hi = hi > o->code_filename + 8ull ? hi : o->code_filename + 8ull;
	hi = hi > o->code_linetable + 8ull ? hi : o->code_linetable + 8ull;
	if (hi - lo > sizeof(buf))
		return -EINVAL;
	if ((ret = rd(r, addr + lo, buf, hi - lo)))
		return ret;
	/* Each field's place in buf is (offset - lo), taken before it is
	 * added to buf: buf + offset - lo adds first, a pointer up to 4 GiB
	 * past buf when 3.13+'s offsets are large, which is undefined even
	 * though the sum comes back in range (fuzz_python found it). */
	memcpy(qualname, buf + (o->code_qualname - lo), 8);
	memcpy(filename, buf + (o->code_filename - lo), 8);
	memcpy(linetable, buf + (o->code_linetable - lo), 8);
	memcpy(first, buf + (o->code_firstlineno - lo), 4);
	return 0;
}

static struct py_code_entry *new_entry(struct py_reader *r, uint64_t addr)
{
	struct py_code_entry *e;

	if (r->nr_codes == r->cap_codes) {
		size_t cap = r->cap_codes ? 2 * r->cap_codes : 64;
		void *p = realloc(r->codes, cap * sizeof(*r->codes));

		if (!p)
			return NULL;
		r->codes = p;
		r->cap_codes = cap;
	}
	if (!u64map_put(&r->code_index, addr, r->nr_codes))
		return NULL;
	e = &r->codes[r->nr_codes++];
	memset(e, 0, sizeof(*e));
	e->addr = addr;
	return e;
}

/* The code object at addr, as it is in this epoch: from the cache if
 * what names it is unchanged, else read anew. Valid until the next
 * lookup. */
static struct py_code_entry *code_entry(struct py_reader *r, uint64_t addr)
{
	const struct py_offsets *o = r->off;
	uint64_t qualname, filename, linetable, size, *at;
	struct py_code_entry *e;
	int32_t first;

	r->code_lookups++;
	at = addr ? u64map_get(&r->code_index, addr) : NULL;
	e = at ? &r->codes[*at] : NULL;
	if (e && e->checked_epoch == r->epoch)
		return e;
	if (!addr)
		return NULL;
	/* Unreadable now (the job has exited, its events still being
	 * read): the object last seen there is the best answer. */
	if (read_identity(r, addr, &qualname, &filename, &linetable, &first))
		return e;
	if (e && e->qualname == qualname && e->filename == filename &&
	    e->linetable == linetable && e->firstlineno == first) {
		e->checked_epoch = r->epoch;
		return e;
	}
	r->code_misses++;
	if (e)
		drop_entry(e);		/* reused address: another object */
	else if (!(e = new_entry(r, addr)))
		return NULL;
	e->gen++;
	e->checked_epoch = r->epoch;
	e->qualname = qualname;
	e->filename = filename;
	e->linetable = linetable;
	e->firstlineno = first;
	py_read_str(r, qualname, e->name, sizeof(e->name));
	py_read_str(r, filename, e->file, sizeof(e->file));
	if (!rd(r, linetable + o->bytes_size, &size, sizeof(size)) &&
	    size <= MAX_LINETABLE && (e->table = malloc(size ? size : 1)) &&
	    !rd(r, linetable + o->bytes_data, e->table, size))
		e->table_len = size;
	return e;
}

int py_code_gen(struct py_reader *r, uint64_t code, uint32_t *gen)
{
	struct py_code_entry *e = code_entry(r, code);

	if (!e)
		return -EFAULT;
	*gen = e->gen;
	return 0;
}

/* The line of a unit, from the entry's cache or its table. */
static int line_at(struct py_code_entry *e, int32_t unit)
{
	int line;

	/* Before its first unit a frame is at its first line, as
	 * PyCode_Addr2Line answers for a negative offset. */
	if (unit < 0)
		return e->firstlineno;
	if ((size_t)unit < e->nr_lines && e->lines[unit])
		return e->lines[unit] - 2;
	line = py_line_of(e->table, e->table_len, e->firstlineno,
			  (uint32_t)unit);
	if (line < 0)
		line = -1;
	if ((size_t)unit >= e->nr_lines && unit < (1 << 20)) {
		size_t n = (size_t)unit + 1 > 2 * e->nr_lines ?
			   (size_t)unit + 1 : 2 * e->nr_lines;
		int32_t *l = realloc(e->lines, n * sizeof(*l));

		if (l) {
			memset(l + e->nr_lines, 0,
			       (n - e->nr_lines) * sizeof(*l));
			e->lines = l;
			e->nr_lines = n;
		}
	}
	/* A line at the very top of int is not cached: line + 2 would
	 * overflow (a first line read from the job can be anything). */
	if ((size_t)unit < e->nr_lines && line <= INT32_MAX - 2)
		e->lines[unit] = line + 2;
	return line;
}

int py_locate(struct py_reader *r, const struct py_frame *f,
	      struct py_location *loc)
{
	struct py_code_entry *e = code_entry(r, f->code);

	if (!e)
		return -EFAULT;
	snprintf(loc->qualname, sizeof(loc->qualname), "%s", e->name);
	snprintf(loc->filename, sizeof(loc->filename), "%s", e->file);
	loc->line = line_at(e, f->unit);
	return 0;
}

int py_gil_address(const struct py_reader *r, uint64_t *addr)
{
	const struct py_offsets *o = r->off;
	uint64_t interp;
	int ret;

	if (o->runtime_gil) {
		*addr = r->runtime + o->runtime_gil;
		return 0;
	}
	if (!o->interp_gil)
		return -ENOTSUP;
	if ((ret = rd_ptr(r, r->runtime + o->runtime_interpreters_head,
			  &interp)))
		return ret;
	if (!interp)
		return -ENOENT;
	*addr = interp + o->interp_gil;
	return 0;
}

void py_reader_next_epoch(struct py_reader *r)
{
	r->epoch++;
}

void py_bpf_config(const struct py_reader *r, unsigned depth,
		   struct rf_py_config *c)
{
	const struct py_offsets *o = r->off;

	memset(c, 0, sizeof(*c));
	c->runtime = r->runtime;
	c->depth = depth < RF_PY_MAX_FRAMES ? depth : RF_PY_MAX_FRAMES;
	c->runtime_interpreters_head = o->runtime_interpreters_head;
	c->interp_threads_head = o->interp_threads_head;
	c->tstate_next = o->tstate_next;
	c->tstate_native_thread_id = o->tstate_native_thread_id;
	c->tstate_cframe = o->tstate_cframe;
	c->cframe_current_frame = o->cframe_current_frame;
	c->frame_code = o->frame_code;
	c->frame_previous = o->frame_previous;
	c->frame_prev_instr = o->frame_prev_instr;
	c->frame_owner = o->frame_owner;
	c->owner_cstack = o->owner_cstack;
	c->owner_interpreter = o->owner_interpreter;
	c->code_code_adaptive = o->code_code_adaptive;
}

void py_reader_close(struct py_reader *r)
{
	for (size_t i = 0; i < r->nr_codes; i++)
		drop_entry(&r->codes[i]);
	free(r->codes);
	u64map_free(&r->code_index);
	memset(r, 0, sizeof(*r));
}
