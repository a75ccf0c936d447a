// SPDX-License-Identifier: BSD-2-Clause
/*
 * Every RecordFunction::before overload PyTorch has exported, 1.13 to main
 * (see docs/pytorch-recordfunction in the steering docs). The argument
 * layout of each is decoded by the BPF program of the same variant.
 */
#include <stdio.h>
#include <string.h>
#include "elf_symbols.h"
#include "torch_symbols.h"
#include "model/trace.h"

#define RF "_ZN2at14RecordFunction"
#define DESCRIPTOR RF "6beforeESt7variantIJSt17basic_string_viewIcSt11char_" \
	"traitsIcEESt17reference_wrapperIKN3c1014FunctionSchemaEEEEl"

static const char *const symbols[RF_V_NR] = {
	[RF_V_CSTR] = RF "6beforeEPKcl",
	[RF_V_STRING] = RF "6beforeENSt7__cxx1112basic_stringIcSt11char_"
			"traitsIcESaIcEEEl",
	[RF_V_STRING_OLD] = RF "6beforeESsl",
	[RF_V_SCHEMA] = RF "6beforeESt17reference_wrapperIKN3c1014Function"
			"SchemaEEl",
	[RF_V_DESCRIPTOR] = DESCRIPTOR,
	[RF_V_DESCRIPTOR_DK] = DESCRIPTOR "NS7_11DispatchKeyE",
	[RF_V_END] = RF "3endEv",
};

const char *torch_symbol(unsigned variant)
{
	return variant < RF_V_NR ? symbols[variant] : NULL;
}

int torch_symbols_resolve(const char *path, struct torch_symbols *s)
{
	int n;

	memset(s, 0, sizeof(*s));
	n = elf_find_functions(path, symbols, RF_V_NR, s->offset);
	if (n < 0)
		return n;
	for (unsigned v = 0; v < RF_V_NR_BEFORE; v++)
		s->nr_before += s->offset[v] != 0;
	/* The old-ABI std::string overload exists only in old-ABI builds
	 * (PyPI wheels up to 2.6); FunctionSchema's name string follows. */
	s->old_string_abi = s->offset[RF_V_STRING_OLD] != 0;
	return n;
}

void torch_symbols_describe(const struct torch_symbols *s, char *buf,
			    size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (unsigned v = 0; v < RF_V_NR_BEFORE && used < len; v++)
		if (s->offset[v])
			used += snprintf(buf + used, len - used, "%s%s",
					 used ? ", " : "", variant_name(v));
	if (used < len)
		snprintf(buf + used, len - used, "; %s string ABI",
			 s->old_string_abi ? "pre-C++11" : "C++11");
}
