// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in libnvToolsExt.so.1 for tests: NVTX's thread range stack
 * (push, pop) as the shared NVTX library exports it, with no tool
 * injected behind it. rfbpf puts uprobes on these two functions
 * (bpf/nvtx.bpf.c). As NVTX's, a push returns the level of the range it
 * starts (0 first), a pop the level of the range it ends, or -2 when the
 * thread has none.
 */
#define EXPORT __attribute__((visibility("default"), noinline))

static __thread int depth;

EXPORT int nvtxRangePushA(const char *message)
{
	(void)message;
	return depth++;
}

EXPORT int nvtxRangePop(void)
{
	return depth ? --depth : -2;
}
