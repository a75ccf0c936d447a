/* SPDX-License-Identifier: BSD-2-Clause */
/* What rfbpf says about its options, written from its argp table alone
 * (cli.c), so --help and the man page cannot drift apart. */
#ifndef RFBPF_CLI_HELP_H
#define RFBPF_CLI_HELP_H

#include <argp.h>
#include <stdio.h>

/* --help: argp's layout (see help.c for why rfbpf writes it itself). */
void cli_write_help(FILE *f, const struct argp *argp, const char *name);
/* rfbpf.8 in troff (man(7) macros): the description, every visible
 * option with its text, then the examples and environment that follow
 * the doc's '\v', as --help prints them. */
void cli_write_man(FILE *f, const struct argp *argp);

#endif
