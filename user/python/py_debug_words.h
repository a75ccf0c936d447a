/* SPDX-License-Identifier: BSD-2-Clause */
#ifndef RFBPF_PY_DEBUG_WORDS_H
#define RFBPF_PY_DEBUG_WORDS_H

/*
 * 3.13 and later put _Py_DebugOffsets at the start of _PyRuntime, for
 * debuggers: the offsets of every field a stack walk reads, as the running
 * interpreter was built. Where each of those is within the struct, in
 * 64-bit words (the struct grew in 3.14; Include/internal/
 * pycore_runtime.h in 3.13, pycore_debug_offsets.h in 3.14). Data only,
 * so that tests/fixtures/py_debug_words.c can hold it against each
 * version's headers (tests/e2e/test_python_debug_offsets.py).
 */
struct debug_words {
	unsigned minor;
	unsigned free_threaded, interpreters_head, threads_head;
	unsigned tstate_next, tstate_current_frame, tstate_native_thread_id;
	unsigned frame_previous, frame_executable, frame_instr_ptr;
	unsigned frame_owner;
	unsigned code_filename, code_qualname, code_linetable;
	unsigned code_firstlineno, code_code_adaptive;
	unsigned bytes_size, bytes_data;
	unsigned unicode_state, unicode_length, unicode_ascii_size;
	unsigned interp_gil;	/* interpreter_state.gil_runtime_state */
	/* enum _frameowner (pycore_frame.h; 3.14: pycore_interpframe_structs.h) */
	unsigned owner_cstack, owner_interpreter;
};
static const struct debug_words debug_words[] = {
	{ .minor = 13, .free_threaded = 2, .interpreters_head = 5,
	  .threads_head = 9, .tstate_next = 21, .tstate_current_frame = 23,
	  .tstate_native_thread_id = 25, .frame_previous = 29,
	  .frame_executable = 30, .frame_instr_ptr = 31, .frame_owner = 33,
	  .code_filename = 35, .code_qualname = 37, .code_linetable = 38,
	  .code_firstlineno = 39, .code_code_adaptive = 43,
	  .bytes_size = 65, .bytes_data = 66, .unicode_state = 68,
	  .unicode_length = 69, .unicode_ascii_size = 70,
	  .interp_gil = 15, .owner_cstack = 3, .owner_interpreter = 0xff },
	{ .minor = 14, .free_threaded = 2, .interpreters_head = 5,
	  .threads_head = 9, .tstate_next = 24, .tstate_current_frame = 26,
	  .tstate_native_thread_id = 28, .frame_previous = 32,
	  .frame_executable = 33, .frame_instr_ptr = 34, .frame_owner = 36,
	  .code_filename = 40, .code_qualname = 42, .code_linetable = 43,
	  .code_firstlineno = 44, .code_code_adaptive = 48,
	  .bytes_size = 75, .bytes_data = 76, .unicode_state = 78,
	  .unicode_length = 79, .unicode_ascii_size = 80,
	  .interp_gil = 16, .owner_cstack = 4, .owner_interpreter = 3 },
};

#endif
