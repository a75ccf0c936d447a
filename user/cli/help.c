// SPDX-License-Identifier: BSD-2-Clause
#include <argp.h>
#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/help.h"

/*
 * --help, laid out as argp lays it out (options by group, by long name
 * within one, the doc from column 29, lines of at most 79), but written
 * here: glibc's argp filled some lines wrongly once the text before them
 * reached a certain length (--gpu-folded's entry shifted right,
 * --group-by's text at column 0). Each line is placed by this code
 * alone, and tests/e2e/test_bad_input.py checks the layout.
 */
#define HELP_DOC_COL 29
#define HELP_WIDTH 79

/* Words of text from column `col` (where the caller left the line), each
 * line after the first indented to `indent`; ends the last line. */
static void write_filled(FILE *f, const char *text, int col, int indent)
{
	const char *p = text;

	while (*p) {
		size_t n = strcspn(p, " ");

		if (col > indent && col + 1 + (int)n > HELP_WIDTH) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", (int)n, p);
		col += (int)n;
		p += n;
		while (*p == ' ')
			p++;
	}
	fputc('\n', f);
}

/* argp's group order: 0, 1, 2, ... then -m ... -1. */
static long group_rank(int group)
{
	return group >= 0 ? group : (long)INT_MAX - group;
}

/* An entry and its group: argp's 0 is "the previous entry's group". */
struct help_entry {
	const struct argp_option *o;
	int group;
};

static bool has_short(const struct argp_option *o)
{
	return o->key > ' ' && o->key < 127;
}

/* Within a group, argp's order: two entries with short options by the
 * letter, two without by the long name; otherwise by first letter, and
 * on the same letter the one without a short option first (--probes,
 * --python-stacks, then -p, --pid). */
static int cmp_entries(const void *a, const void *b)
{
	const struct help_entry *x = a, *y = b;
	long gx = group_rank(x->group), gy = group_rank(y->group);
	bool sx = has_short(x->o), sy = has_short(y->o);
	int fx, fy;

	if (gx != gy)
		return gx < gy ? -1 : 1;
	if (sx && sy)
		return x->o->key - y->o->key;
	if (!sx && !sy)
		return strcmp(x->o->name, y->o->name);
	fx = tolower(sx ? x->o->key : x->o->name[0]);
	fy = tolower(sy ? y->o->key : y->o->name[0]);
	if (fx != fy)
		return fx - fy;
	return sx ? 1 : -1;
}

static void write_entry(FILE *f, const struct argp_option *o)
{
	char head[128];
	int len;

	if (has_short(o))
		len = snprintf(head, sizeof(head), "  -%c, --%s%s%s", o->key,
			       o->name, o->arg ? "=" : "", o->arg ?: "");
	else
		len = snprintf(head, sizeof(head), "      --%s%s%s", o->name,
			       o->arg ? "=" : "", o->arg ?: "");
	/* The text from its column, or from the next line when the option
	 * reaches it (--group-by=stack[:N]|shapes). */
	if (len >= HELP_DOC_COL - 1)
		fprintf(f, "%s\n%*s", head, HELP_DOC_COL, "");
	else
		fprintf(f, "%-*s", HELP_DOC_COL, head);
	write_filled(f, o->doc, HELP_DOC_COL, HELP_DOC_COL);
}

/* The table's visible entries in argp's order; how many. */
static size_t sorted_entries(const struct argp_option *options,
			     struct help_entry *sorted)
{
	size_t n = 0;
	int group = 0;

	for (const struct argp_option *o = options; o->name; o++) {
		group = o->group ? o->group : group;
		if (!(o->flags & OPTION_HIDDEN))
			sorted[n++] = (struct help_entry){ o, group };
	}
	qsort(sorted, n, sizeof(*sorted), cmp_entries);
	return n;
}

static size_t nr_options(const struct argp_option *options)
{
	size_t n = 0;

	while (options[n].name)
		n++;
	return n;
}

void cli_write_help(FILE *f, const struct argp *argp, const char *name)
{
	struct help_entry sorted[nr_options(argp->options)];
	const char *doc = argp->doc, *post = strchr(doc, '\v');
	size_t n = sorted_entries(argp->options, sorted);

	argp_help(argp, f, ARGP_HELP_SHORT_USAGE, (char *)name);
	fprintf(f, "%.*s\n", (int)(post - doc), doc);
	for (size_t i = 0; i < n; i++) {
		if (i && sorted[i].group != sorted[i - 1].group)
			fputc('\n', f);
		write_entry(f, sorted[i].o);
	}
	fputs("\nMandatory or optional arguments to long options are also "
	      "mandatory or optional\nfor any corresponding short options."
	      "\n\n", f);
	fputs(post + 1, f);
}

/*
 * rfbpf.8, from the same table and doc as --help. Text goes through
 * troff_text: a backslash becomes \e, a '-' \- (an ASCII minus that
 * man(1) searches and copies as typed), and a line that would begin with
 * '.' or '\'' (a request to troff) is guarded with \&.
 */
static void troff_text(FILE *f, const char *s, size_t n)
{
	bool line_start = true;

	for (size_t i = 0; i < n && s[i]; i++) {
		if (line_start && (s[i] == '.' || s[i] == '\''))
			fputs("\\&", f);
		if (s[i] == '\\')
			fputs("\\e", f);
		else if (s[i] == '-')
			fputs("\\-", f);
		else
			fputc(s[i], f);
		line_start = s[i] == '\n';
	}
}

static void troff_line(FILE *f, const char *s)
{
	troff_text(f, s, strlen(s));
	fputc('\n', f);
}

/* An option's tag: bold names, its argument in italics. */
static void man_entry(FILE *f, const struct argp_option *o)
{
	fputs(".TP\n", f);
	if (has_short(o))
		fprintf(f, "\\fB\\-%c\\fR, ", o->key);
	fputs("\\fB\\-\\-", f);
	troff_text(f, o->name, strlen(o->name));
	fputs("\\fR", f);
	if (o->arg) {
		fputs("=\\fI", f);
		troff_text(f, o->arg, strlen(o->arg));
		fputs("\\fR", f);
	}
	fputc('\n', f);
	troff_line(f, o->doc);
}

/* The doc after '\v', verbatim; a line "Word:" alone starts a section
 * (Examples:, Environment:). */
static void man_sections(FILE *f, const char *post)
{
	bool open = false;

	for (const char *l = post; *l;) {
		size_t n = strcspn(l, "\n");

		if (n > 1 && l[n - 1] == ':' && isupper((unsigned char)l[0]) &&
		    !memchr(l, ' ', n)) {
			if (open)
				fputs(".fi\n", f);
			fputs(".SH ", f);
			for (size_t i = 0; i + 1 < n; i++)
				fputc(toupper((unsigned char)l[i]), f);
			fputs("\n.nf\n", f);
			open = true;
		} else if (open) {
			troff_text(f, l, n);
			fputc('\n', f);
		}
		l += n + (l[n] == '\n');
	}
	if (open)
		fputs(".fi\n", f);
}

void cli_write_man(FILE *f, const struct argp *argp)
{
	struct help_entry sorted[nr_options(argp->options)];
	const char *doc = argp->doc, *post = strchr(doc, '\v');
	const char *title = strchr(doc, ':'), *body = strstr(doc, "\n\n");
	size_t n = sorted_entries(argp->options, sorted);

	fprintf(f, ".TH RFBPF 8 \"\" \"%s\" \"System Administration\"\n",
		argp_program_version);
	fputs(".SH NAME\nrfbpf \\- ", f);
	title += strspn(title + 1, " ") + 1;
	troff_text(f, title, strcspn(title, "\n"));
	fputs("\n.SH SYNOPSIS\n.B rfbpf\n[\\fIOPTION\\fR...] ", f);
	troff_line(f, argp->args_doc);
	fputs(".SH DESCRIPTION\n", f);
	body += 2;
	troff_text(f, body, post - body);
	fputs(".SH OPTIONS\n", f);
	for (size_t i = 0; i < n; i++)
		man_entry(f, sorted[i].o);
	man_sections(f, post + 1);
	fputs(".SH SEE ALSO\n"
	      "The README and docs/ of rfbpf's source: the outputs, fleet mode, "
	      "the GPU agent, Python stacks and the limits.\n", f);
}
