// SPDX-License-Identifier: BSD-2-Clause
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "demangle.h"

/*
 * The Itanium C++ ABI's demangler, as libstdc++ exports it (extern "C").
 * Its header, <cxxabi.h>, is C++ only, so the declaration is here; the
 * loader links -lstdc++ for it.
 */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len,
			    int *status);

char *cxx_demangle(const char *name)
{
	int status = -1;
	char *out;

	/* Symbols only: __cxa_demangle also reads a bare type name, so an
	 * extern "C" kernel called "f" would come out as "float". */
	if (!name || strncmp(name, "_Z", 2))
		return NULL;
	out = __cxa_demangle(name, NULL, NULL, &status);
	if (status) {
		free(out);
		return NULL;
	}
	return out;
}
