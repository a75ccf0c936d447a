// SPDX-License-Identifier: BSD-2-Clause
/* Which frames of a held thread's stack forbid loading a library on it
 * (user/attach/held_stack.c); the unwinding itself is tested end to end
 * in tests/e2e/test_gpu_inject.py. */
#include "check.h"
#include "attach/held_stack.h"

TEST(the_dynamic_loader_by_its_file)
{
	CHECK(held_frame_place("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
			       "_dl_init") == HELD_FRAME_LOADER);
	CHECK(held_frame_place("/lib64/ld-linux-x86-64.so.2", NULL) ==
	      HELD_FRAME_LOADER);
	CHECK(held_frame_place("ld-2.31.so", NULL) == HELD_FRAME_LOADER);
	/* A library whose name merely begins so is not the loader. */
	CHECK(held_frame_place("/usr/lib/ld-helpers.txt", NULL) ==
	      HELD_FRAME_OTHER);
}

TEST(the_allocator_by_its_functions)
{
	static const char *const in[] = {
		"malloc", "free", "calloc", "realloc", "posix_memalign",
		"aligned_alloc", "__libc_malloc", "__libc_free", "_int_malloc",
		"_int_free", "malloc_consolidate",
	};

	for (size_t i = 0; i < sizeof(in) / sizeof(*in); i++)
		CHECK(held_frame_place("/usr/lib/x86_64-linux-gnu/libc.so.6",
				       in[i]) == HELD_FRAME_MALLOC);
	/* An allocator put in the job's place of glibc's. */
	CHECK(held_frame_place("/usr/lib/libjemalloc.so.2", "malloc") ==
	      HELD_FRAME_MALLOC);
}

TEST(everything_else)
{
	CHECK(held_frame_place("/usr/lib/x86_64-linux-gnu/libc.so.6",
			       "__libc_start_main") == HELD_FRAME_OTHER);
	CHECK(held_frame_place("/usr/lib/libtorch_cpu.so",
			       "_ZN2at27getStepCallbacksUnlessEmptyENS_11"
			       "RecordScopeE") == HELD_FRAME_OTHER);
	CHECK(held_frame_place("/usr/lib/libc.so.6", "freeaddrinfo") ==
	      HELD_FRAME_OTHER);
	CHECK(held_frame_place(NULL, NULL) == HELD_FRAME_OTHER);
}

RUN_TESTS()
