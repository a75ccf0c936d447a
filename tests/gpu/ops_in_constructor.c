// SPDX-License-Identifier: BSD-2-Clause
/*
 * A library whose constructor runs PyTorch ops, as an extension could:
 * while it runs, the thread is inside the dynamic loader (dlopen ->
 * _dl_init -> this constructor), and a thread rfbpf holds at one of
 * those ops must not be made to dlopen anything
 * (tests/workloads/ops_in_constructor.py, tests/e2e/test_gpu_inject.py).
 * It runs in the python3 that loads it, whose symbols it uses: no
 * CPython header or library is needed.
 */
int PyGILState_Ensure(void);
void PyGILState_Release(int state);
int PyRun_SimpleString(const char *code);

__attribute__((constructor)) static void ops_while_loading(void)
{
	int gil = PyGILState_Ensure();

	PyRun_SimpleString(
		"import os, time, torch\n"
		"print('in constructor', flush=True)\n"
		"t = torch.ones(64)\n"
		"end = time.monotonic() + float(os.environ.get("
		"'CTOR_SECONDS', '5'))\n"
		"while time.monotonic() < end:\n"
		"    with torch.autograd.profiler.record_function('ctor_scope'):\n"
		"        t = t.add(1).mul(0.5)\n");
	PyGILState_Release(gil);
}
