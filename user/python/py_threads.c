// SPDX-License-Identifier: BSD-2-Clause
/*
 * Python thread names from outside: threading.Thread(name=...) is not the
 * thread's comm (Python 3.11 never sets that), so rfbpf reads it where the
 * threading module keeps it. sys.modules["threading"]._active maps each
 * running thread's ident to its Thread object, whose instance dict holds
 * _name and _native_id (set as the thread starts, before its target runs).
 *
 * Dicts are read as CPython 3.11 lays them out: a keys object with its
 * index table, then its entries (hash, key, value; or key, value when
 * every key is a str), the values apart in a split dict. A Thread's own
 * attributes are a managed dict: the values hang before the object, their
 * keys are its type's cached keys, unless a dict was made for it. Keys are
 * found by reading each one: a few entries, no hashing needed.
 */
#include <errno.h>
#include <string.h>
#include "attach/target.h"
#include "py_stack.h"

/* A dict (or a Thread's attributes) never has more entries than this
 * here: a larger count is a corrupt or changing object. */
#define MAX_ENTRIES 4096
/* Keys read in one py_thread_names() call, all dicts together: sys.modules
 * (a few thousand in a torch job), threading's, and a few per thread.
 * Without it a corrupt _active of MAX_ENTRIES threads, each with
 * MAX_ENTRIES attributes, kept rfbpf reading for minutes (found by
 * tests/fuzz/fuzz_python.c). */
#define MAX_KEYS_READ 16384

static uint64_t ptr_at(const struct py_reader *r, uint64_t addr)
{
	uint64_t v = 0;

	if (target_read(r->pid, addr, &v, sizeof(v)))
		return 0;
	return v;
}

/* The value of the str key named `name` among n entries at `entries`
 * (values from `values` when split), or 0; *left: keys it may still
 * read. */
static uint64_t find_entry(const struct py_reader *r, uint64_t entries,
			   uint32_t size, uint64_t values, uint64_t n,
			   const char *name, unsigned *left)
{
	const struct py_offsets *o = r->off;
	bool general = size == o->entry_general;
	char key[64];

	for (uint64_t i = 0; i < n && i < MAX_ENTRIES && *left; i++) {
		uint64_t e = entries + i * size + (general ? 8 : 0);
		uint64_t k = ptr_at(r, e);

		if (!k)
			continue;
		(*left)--;
		py_read_str(r, k, key, sizeof(key));
		if (strcmp(key, name))
			continue;
		return values ? ptr_at(r, values + i * 8) : ptr_at(r, e + 8);
	}
	return 0;
}

/* Where a keys object's entries are, their size and count. */
static bool keys_layout(const struct py_reader *r, uint64_t keys,
			uint64_t *entries, uint32_t *size, uint64_t *n)
{
	const struct py_offsets *o = r->off;
	uint8_t log2_index_bytes = 0, kind = 0;

	if (!keys ||
	    target_read(r->pid, keys + o->keys_log2_index_bytes,
			&log2_index_bytes, 1) ||
	    target_read(r->pid, keys + o->keys_kind, &kind, 1) ||
	    target_read(r->pid, keys + o->keys_nentries, n, sizeof(*n)) ||
	    log2_index_bytes > 32)
		return false;
	*entries = keys + o->keys_indices + (1ull << log2_index_bytes);
	*size = kind == 0 ? o->entry_general : o->entry_unicode;
	return true;
}

/* d[name] for a dict object d with str keys, or 0. */
static uint64_t dict_get(const struct py_reader *r, uint64_t d,
			 const char *name, unsigned *left)
{
	const struct py_offsets *o = r->off;
	uint64_t entries, n;
	uint32_t size;

	if (!d || !keys_layout(r, ptr_at(r, d + o->dict_keys), &entries,
			       &size, &n))
		return 0;
	return find_entry(r, entries, size, ptr_at(r, d + o->dict_values),
			  n, name, left);
}

/* obj.name for an instance of a class with a managed dict (3.11: the
 * values pointer 4 words before the object, a made dict 3 words before). */
static uint64_t attr_get(const struct py_reader *r, uint64_t obj,
			 const char *name, unsigned *left)
{
	const struct py_offsets *o = r->off;
	uint64_t type = ptr_at(r, obj + 8), flags = 0, values, entries, n;
	uint32_t size;

	if (!type || target_read(r->pid, type + o->type_flags, &flags,
				 sizeof(flags)) ||
	    !(flags & o->managed_dict_flag))
		return 0;
	values = ptr_at(r, obj - 4 * 8);
	if (!values)
		return dict_get(r, ptr_at(r, obj - 3 * 8), name, left);
	if (!keys_layout(r, ptr_at(r, type + o->heaptype_cached_keys),
			 &entries, &size, &n))
		return 0;
	return find_entry(r, entries, size, values, n, name, left);
}

/* A small non-negative int object's value (up to three 30-bit digits). */
static bool int_value(const struct py_reader *r, uint64_t obj, uint64_t *v)
{
	int64_t ndigits = 0;
	uint32_t d[3] = { 0 };

	if (!obj || target_read(r->pid, obj + 16, &ndigits, sizeof(ndigits)) ||
	    ndigits < 0 || ndigits > 3 ||
	    (ndigits && target_read(r->pid, obj + r->off->long_digit, d,
				    ndigits * sizeof(*d))))
		return false;
	*v = d[0] | (uint64_t)d[1] << 30 | (uint64_t)d[2] << 60;
	return true;
}

int py_thread_names(struct py_reader *r, struct py_thread_name *out,
		    int max)
{
	const struct py_offsets *o = r->off;
	uint64_t interp, threading, active, entries, n, values;
	uint32_t size;
	unsigned left = MAX_KEYS_READ;
	int nr = 0;

	if (!o->thread_names)
		return -ENOTSUP;
	interp = ptr_at(r, r->runtime + o->runtime_interpreters_head);
	threading = interp ? dict_get(r, ptr_at(r, interp + o->interp_modules),
				      "threading", &left) : 0;
	active = threading ? dict_get(r, ptr_at(r, threading +
						o->module_dict), "_active",
				    &left) : 0;
	if (!active)
		return -ENOENT;		/* threading never imported */
	if (!keys_layout(r, ptr_at(r, active + o->dict_keys), &entries,
			 &size, &n))
		return -EFAULT;
	values = ptr_at(r, active + o->dict_values);
	for (uint64_t i = 0; i < n && i < MAX_ENTRIES && nr < max && left;
	     i++) {
		uint64_t e = entries + i * size + (size == o->entry_general ?
						    8 : 0);
		uint64_t thread = values ? ptr_at(r, values + i * 8) :
				  ptr_at(r, e + 8), native;

		if (!ptr_at(r, e) || !thread ||
		    !int_value(r, attr_get(r, thread, "_native_id", &left),
			       &native))
			continue;
		out[nr].tid = (pid_t)native;
		py_read_str(r, attr_get(r, thread, "_name", &left),
			    out[nr].name, sizeof(out[nr].name));
		nr++;
	}
	return nr;
}
