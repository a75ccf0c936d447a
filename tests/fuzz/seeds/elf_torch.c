// SPDX-License-Identifier: BSD-2-Clause
/*
 * The source of the ELF symbol reader's seed files (gen_elf_seeds.sh): the
 * names rfbpf looks up in a libtorch_cpu (every RecordFunction::before
 * variant, end(), the callback registry, a data object) defined by asm
 * labels, so a few hundred bytes of C give a shared object whose symbol
 * tables hold what the fuzzer must otherwise guess. No libc: the file stays
 * small and every byte of it is ELF structure the reader walks.
 */
#define RF "_ZN2at14RecordFunction"
#define DEF(fn, sym) void fn(void) __asm__(sym); void fn(void) {}

DEF(rf_cstr, RF "6beforeEPKcl")
DEF(rf_string, RF "6beforeENSt7__cxx1112basic_stringIcSt11char_"
	"traitsIcESaIcEEEl")
DEF(rf_schema, RF "6beforeESt17reference_wrapperIKN3c1014Function"
	"SchemaEEl")
DEF(rf_end, RF "3endEv")
DEF(add_cb, "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE")
DEF(remove_cb, "_ZN2at14removeCallbackEm")
#ifdef OLD_ABI
DEF(rf_string_old, RF "6beforeESsl")
#endif
/* An initialised variable, what elf_find_objects looks for. */
int runtime __asm__("_PyRuntime") = 1;
/* A local (static) function: only .symtab names it. */
static void local_only(void) {}
void (*keep_local)(void) = local_only;
