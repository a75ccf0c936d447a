/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Links control_loop.c at its offset in rfbpf's page (stub_page.h), with
 * the control block where the page's data has it, so that every address
 * the code takes is rip-relative and right wherever the page is mapped.
 * Run through the C preprocessor by the Makefile.
 */
#include "stub_page.h"

SECTIONS
{
	. = STUB_CONTROL_CODE;
	.text : { *(.text.control_entry) *(.text .text.*) }
	.data : { *(.data .data.* .rodata .rodata.* .bss .bss.* COMMON) }
	/DISCARD/ : { *(.comment) *(.note .note.*) *(.eh_frame*) }
}
control_block_here = STUB_CONTROL;
ASSERT(SIZEOF(.data) == 0, "control_loop.c: code in rfbpf's page may have no data")
ASSERT(SIZEOF(.text) <= STUB_PAGE_SIZE - STUB_CONTROL_CODE, "control_loop.c: too big for rfbpf's page")
