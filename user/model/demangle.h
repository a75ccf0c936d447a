/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * C++ symbol names as people read them. CUPTI names CUDA kernels by their
 * mangled symbol (_Z10gemm_tiledPKfS0_Pfiii); Kineto shows them through
 * the C++ runtime's abi::__cxa_demangle, and so does rfbpf, with the same
 * function from libstdc++, so a kernel reads the same in both traces:
 * gemm_tiled(float const*, float const*, float*, int, int, int).
 */
#ifndef RFBPF_DEMANGLE_H
#define RFBPF_DEMANGLE_H

/* The demangled form of a mangled C++ symbol (malloc'd, the caller frees
 * it), or NULL when name is not one ("_Z..."), or cannot be demangled (a
 * name cut short usually cannot), or on ENOMEM. */
char *cxx_demangle(const char *name);

#endif
