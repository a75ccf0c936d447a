/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A Python thread's stack, read from outside its process (issue 13): from
 * the interpreter's _PyRuntime to the thread's PyThreadState (matched by
 * native_thread_id, 3.11+: no GIL is needed, nothing in the target runs),
 * then its frames, innermost first, each a code object and the code unit
 * it is at; and a code object's qualified name, file and line, cached by
 * address and checked again on use, since a freed code object's address
 * can be reused. Memory is read with process_vm_readv.
 *
 * Only CPython 3.11's layout so far (py_offsets_311, checked against the
 * interpreter's own headers by tests/unit/test_py_stack.c); 3.13 brings
 * its offsets in _PyRuntime (_Py_DebugOffsets).
 */
#ifndef RFBPF_PY_STACK_H
#define RFBPF_PY_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "model/u64map.h"

/* Where the fields the walk reads are, for one CPython version. */
struct py_offsets {
	unsigned major, minor;
	uint32_t runtime_interpreters_head;	/* _PyRuntimeState */
	uint32_t interp_threads_head;		/* PyInterpreterState */
	uint32_t tstate_next, tstate_native_thread_id, tstate_cframe;
	uint32_t cframe_current_frame;		/* _PyCFrame */
	uint32_t frame_code, frame_previous, frame_prev_instr;
	uint32_t frame_owner, owner_cstack;	/* shim frames, skipped */
	uint32_t owner_interpreter;		/* 3.14 entry frames, too */
	uint32_t code_filename, code_qualname, code_firstlineno;
	uint32_t code_linetable, code_code_adaptive;
	uint32_t unicode_length, unicode_state;	/* PyASCIIObject */
	uint32_t unicode_ascii_data, unicode_compact_data;
	uint32_t bytes_size, bytes_data;	/* PyBytesObject */
	/* Thread names (py_threads.c): sys.modules, a module's dict, dicts,
	 * an object's managed dict, an int. */
	uint32_t interp_modules;		/* PyInterpreterState */
	uint32_t module_dict;			/* PyModuleObject */
	uint32_t dict_keys, dict_values;	/* PyDictObject */
	uint32_t keys_log2_index_bytes, keys_kind, keys_nentries;
	uint32_t keys_indices;			/* PyDictKeysObject */
	uint32_t entry_general, entry_unicode;	/* entry sizes */
	uint32_t type_flags;			/* PyTypeObject */
	uint32_t heaptype_cached_keys;		/* PyHeapTypeObject */
	uint32_t long_digit;			/* PyLongObject */
	uint64_t managed_dict_flag;		/* Py_TPFLAGS_MANAGED_DICT */
	bool thread_names;	/* the fields above are known */
	/* The GIL's state: at runtime_gil in _PyRuntime (3.11), or at
	 * interp_gil in the main interpreter (3.12+); 0 where not. */
	uint32_t runtime_gil, interp_gil;
};
extern const struct py_offsets py_offsets_311;

struct py_frame {
	uint64_t code;		/* PyCodeObject * in the target */
	int32_t unit;		/* code unit it is at, -1 before the first */
};

#define PY_NAME_MAX 128
#define PY_FILE_MAX 256
struct py_location {
	char qualname[PY_NAME_MAX];
	char filename[PY_FILE_MAX];
	int line;		/* -1 when the table gives none */
};

struct py_code_entry;

struct py_reader {
	pid_t pid;
	const struct py_offsets *off;
	struct py_offsets debug;	/* 3.13+: from _Py_DebugOffsets */
	uint64_t runtime;	/* &_PyRuntime in the target */
	struct py_code_entry *codes;	/* symbolized code objects */
	size_t nr_codes, cap_codes;
	struct u64map code_index;	/* address -> index in codes */
	/* A code object is checked against the target once per epoch:
	 * the caller starts one per batch of events it reads. */
	uint64_t epoch;
	uint64_t code_lookups, code_misses;	/* cache hits = the rest */
};

/* Finds the interpreter in pid (its python executable or libpython
 * mapping with _PyRuntime): 0, -ENOENT (not Python), -ENOTSUP (a version
 * whose layout is not known), or -errno; a line in err. */
int py_reader_open(struct py_reader *r, pid_t pid, char *err, size_t len);
/* What py_reader_open does once it found _PyRuntime at runtime in pid,
 * a CPython 3.minor (shown: how err names the interpreter): the layout
 * for that version, 3.13+ read from the interpreter's debug offsets.
 * Apart so that tests/fuzz/fuzz_python.c can hand it any memory. */
int py_reader_at(struct py_reader *r, pid_t pid, uint64_t runtime,
		 unsigned minor, const char *shown, char *err, size_t len);
/* Where the interpreter keeps its GIL's state (struct
 * _gil_runtime_state, RF_GIL_STATE_SIZE bytes): 0, or -errno. */
int py_gil_address(const struct py_reader *r, uint64_t *addr);
/* The thread state of thread tid (its native id): 0 or -ENOENT. */
int py_thread_state(struct py_reader *r, pid_t tid, uint64_t *tstate);
/* Every thread the interpreter has, as (native id, thread state), at
 * most max: how many, or -errno. What a BPF map from tid to thread state
 * is filled from (and refilled when a thread it lacks shows up). */
struct py_thread {
	pid_t tid;
	uint64_t tstate;
};
int py_list_threads(struct py_reader *r, struct py_thread *out, int max);
/* The name threading.Thread(name=...) gave each running Python thread,
 * with its native id, at most max (py_threads.c): how many, -ENOENT
 * when the process never imported threading, or -errno. */
struct py_thread_name {
	pid_t tid;
	char name[64];
};
int py_thread_names(struct py_reader *r, struct py_thread_name *out,
		    int max);
/* Its frames, innermost first, at most max: how many, or -errno. */
int py_read_frames(struct py_reader *r, uint64_t tstate,
		   struct py_frame *out, int max);
/* A frame's function, file and line. 0 or -errno. */
int py_locate(struct py_reader *r, const struct py_frame *f,
	      struct py_location *loc);
/* A str object as UTF-8, cut to fit; "?" when it cannot be read. */
void py_read_str(const struct py_reader *r, uint64_t obj, char *buf,
		 size_t len);
/* How many code objects have been seen at code's address so far: a
 * cache keyed by (code, gen) stays right when an address is reused.
 * 0 or -errno. */
int py_code_gen(struct py_reader *r, uint64_t code, uint32_t *gen);
/* Code objects are checked anew from the next lookup on. */
void py_reader_next_epoch(struct py_reader *r);
/* What the BPF walk (--python-stacks) needs of this interpreter. */
struct rf_py_config;
void py_bpf_config(const struct py_reader *r, unsigned depth,
		   struct rf_py_config *c);
void py_reader_close(struct py_reader *r);

#endif
