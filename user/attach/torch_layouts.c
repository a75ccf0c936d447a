// SPDX-License-Identifier: BSD-2-Clause
/*
 * Input layouts per PyTorch build. Each row was read off the build's
 * libtorch-dev headers with offsetof (RecordFunction::inputs_,
 * TensorImpl::sizes_and_strides_ and data_type_, ListImpl::list and
 * elementType, IValue::Tag values) and is checked end to end by
 * tests/e2e/test_shapes.py against torch.profiler(record_shapes=True) on
 * the same ops. Between the rows the layouts moved (tags were added in
 * 2.0, 2.1 and 2.3; TensorImpl lost fields in 2.x), so a build that is
 * not a row gets no shapes rather than guessed ones.
 */
#include <stdio.h>
#include "torch_layouts.h"

struct layout {
	int major, minor;
	unsigned nr_dtypes;	/* c10::ScalarType values before Undefined */
	struct rf_inputs_config cfg;
};

/* C++11 string ABI; the pre-C++11 one has a std::string of 8 bytes, not
 * 32, in RecordFunction::fn_ before inputs_. */
static const struct layout layouts[] = {
	{ 1, 13, 18, { .rf_inputs = 208, .impl_sizes = 72, .impl_dtype = 176,
		   .list_vector = 24, .list_type = 48,
		   .tag_tensor = 1, .tag_double = 3, .tag_int = 5,
		   .tag_bool = 8, .tag_list = 12, .tag_none = 0 } },
	{ 2, 6, 44, { .rf_inputs = 208, .impl_sizes = 64, .impl_dtype = 168,
		  .list_vector = 16, .list_type = 40,
		  .tag_tensor = 1, .tag_double = 3, .tag_int = 5,
		  .tag_bool = 9, .tag_list = 13, .tag_none = 0 } },
	{ 2, 14, 47, { .rf_inputs = 208, .impl_sizes = 56, .impl_dtype = 160,
		   .list_vector = 16, .list_type = 40,
		   .tag_tensor = 1, .tag_double = 3, .tag_int = 5,
		   .tag_bool = 10, .tag_list = 14, .tag_none = 0 } },
};
#define OLD_ABI_SHIFT 24	/* sizeof(cxx11 string) - sizeof(COW string) */

bool torch_inputs_layout(int major, int minor, bool old_string_abi,
			 struct rf_inputs_config *cfg, unsigned *nr_dtypes,
			 char *why, size_t len)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		if (layouts[i].major != major || layouts[i].minor != minor)
			continue;
		*cfg = layouts[i].cfg;
		*nr_dtypes = layouts[i].nr_dtypes;
		if (old_string_abi)
			cfg->rf_inputs -= OLD_ABI_SHIFT;
		cfg->enabled = 1;
		return true;
	}
	if (major)
		snprintf(why, len, "torch %d.%d's input layout is not known "
			 "(known: 1.13, 2.6, 2.14)", major, minor);
	else
		snprintf(why, len, "the torch version cannot be told from "
			 "the library's name or torch/version.py");
	return false;
}
