// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <link.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "model/clocks.h"
#include "attach/probes.h"
#include "attach/calibrate.h"
#include "rfbpf.h"

/* calibrate_target.S */
void *calibrate_probed_start(void **ret_slot, void *rf);
void calibrate_probed_end(void *rf, void *ctx);
void *calibrate_bare_start(void **ret_slot, void *rf);
void calibrate_bare_end(void *rf, void *ctx);
extern const unsigned char calibrate_probed_start_probe[];
extern const unsigned char calibrate_probed_end_probe[];

#define RING_MB		2
#define WARMUP_PAIRS	100	/* the first hits rewrite the nop5s */
#define SIZING_PAIRS	100
#define ROUNDS		11	/* odd: the median is one of them */
#define ROUND_NS	4000000	/* probed time per round */
#define MIN_ROUND_PAIRS	50
/* A round's records (about 216 bytes a pair) stay well inside the ring,
 * which is drained between rounds: nothing is dropped. */
#define MAX_ROUND_PAIRS	4000
#define X86_CALL	0xe8	/* what an optimized nop5 becomes */

/* Longer than std::string's 15 inline characters: the programs read the
 * characters separately, as for most ATen names. */
static const char op_name[] = "aten::calibration_synthetic_op";

struct fake_op {
	/* a C++11 std::string: {data, size, inline buffer} */
	struct { const char *data; uint64_t size; char buf[16]; } name;
	/* a RecordFunction whose fn_ holds the FunctionSchema alternative;
	 * the schema begins with its name, so &name stands for it */
	unsigned char rf[256] __attribute__((aligned(16)));
};

struct pair_fns {
	void *(*start)(void **ret_slot, void *rf);
	void (*end)(void *rf, void *ctx);
};

static const struct pair_fns probed = {
	calibrate_probed_start, calibrate_probed_end };
static const struct pair_fns bare = {
	calibrate_bare_start, calibrate_bare_end };

struct tally {
	const void *rf;
	uint64_t good;		/* well-formed before and end records */
	/* The time between a pair's two records' timestamps: what the
	 * probes add inside an op's own interval (the op itself is an
	 * empty call), one per pair of the round. Wall-clock time, so a
	 * pair preempted between its records holds milliseconds: a round's
	 * figure is its median pair, not its mean, or one preemption in a
	 * round of 2000 pairs added half a microsecond to every op. */
	uint64_t before_ts;
	double inside[MAX_ROUND_PAIRS];
	unsigned nr_inside;
};


/* Every byte the programs read is written or read here first: their
 * reads of user memory cannot fault a page in, they would fail instead. */
static void fake_op_init(struct fake_op *op)
{
	const void *schema = &op->name;
	int64_t seq = 7;

	memset(op, 0, sizeof(*op));
	op->name.data = op_name;
	op->name.size = strlen(*(const char *volatile *)&op->name.data);
	op->rf[RF_SCOPE_OFFSET] = 0;		/* RecordScope::FUNCTION */
	memcpy(op->rf + RF_FN_OFFSET, &schema, sizeof(schema));
	op->rf[RF_FN_INDEX_OFFSET_CXX11] = 1;	/* the schema alternative */
	memcpy(op->rf + RF_SEQ_OFFSET_CXX11, &seq, sizeof(seq));
}

static int count_record(void *ctx, void *data, size_t size)
{
	struct tally *t = ctx;
	const struct rf_event_hdr *h = data;

	if (size < sizeof(*h) || h->rf_addr != (uint64_t)(uintptr_t)t->rf)
		return 0;
	if (h->kind == RF_EV_BEFORE) {
		const struct rf_before_event *e = data;

		if (size >= sizeof(*e) && h->variant == RF_V_CALLBACK &&
		    !h->flags && h->name_len == sizeof(op_name) - 1 &&
		    !memcmp(e->name, op_name, sizeof(op_name))) {
			t->good++;
			t->before_ts = h->ts_ns;
		}
	} else if (h->kind == RF_EV_END && h->variant == RF_V_END) {
		t->good++;
		if (t->before_ts && h->ts_ns >= t->before_ts &&
		    t->nr_inside < MAX_ROUND_PAIRS)
			t->inside[t->nr_inside++] = h->ts_ns - t->before_ts;
		t->before_ts = 0;
	}
	return 0;
}

/* In the calling thread's CPU time: what the probes cost the thread that
 * hits them (the kernel's handling and the programs run on its account),
 * without the time other processes ran while it was preempted. */
static uint64_t time_pairs(const struct pair_fns *f, unsigned n, void *rf)
{
	void *slot;
	uint64_t t0 = thread_cpu_ns();

	for (unsigned i = 0; i < n; i++) {
		f->start(&slot, rf);
		f->end(rf, NULL);
	}
	return thread_cpu_ns() - t0;
}

struct exe_addr {
	uintptr_t addr;
	uint64_t off;
	bool found;
};

/* dl_iterate_phdr's callback: the executable comes first, and addr is in
 * one of its loaded segments. */
static int find_in_exe(struct dl_phdr_info *info, size_t size, void *data)
{
	struct exe_addr *a = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && a->addr >= start &&
		    a->addr < start + ph->p_filesz) {
			a->off = a->addr - start + ph->p_offset;
			a->found = true;
		}
	}
	return 1;	/* only the executable */
}

/* The file offset of addr (code of rfbpf's own executable), for uprobes
 * attached through /proc/self/exe: that names the file rfbpf runs even if
 * it was replaced or deleted since, and needs no symbol table. */
static int exe_offset(const void *addr, uint64_t *off)
{
	struct exe_addr a = { .addr = (uintptr_t)addr };

	dl_iterate_phdr(find_in_exe, &a);
	*off = a.off;
	return a.found ? 0 : -ENOENT;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Pairs per round so that a round's probed calls take about ROUND_NS,
 * from a batch timed after the warm-up. */
static unsigned round_pairs(void *rf)
{
	uint64_t per_pair = time_pairs(&probed, SIZING_PAIRS, rf) /
			    SIZING_PAIRS;
	uint64_t n = per_pair ? ROUND_NS / per_pair : MAX_ROUND_PAIRS;

	return n < MIN_ROUND_PAIRS ? MIN_ROUND_PAIRS :
	       n > MAX_ROUND_PAIRS ? MAX_ROUND_PAIRS : (unsigned)n;
}

/* The timed rounds, probed and bare calls alternating which goes first;
 * the ring is drained after each. */
static int measure(struct calibration *c, struct ring_buffer *rb,
		   struct tally *t, void *rf)
{
	double op[ROUNDS], base[ROUNDS], inside[ROUNDS];
	unsigned n = round_pairs(rf);
	int ret;

	if ((ret = ring_buffer__consume(rb)) < 0)
		return ret;
	t->good = 0;
	for (int r = 0; r < ROUNDS; r++) {
		uint64_t p, b;

		if (r % 2) {
			p = time_pairs(&probed, n, rf);
			b = time_pairs(&bare, n, rf);
		} else {
			b = time_pairs(&bare, n, rf);
			p = time_pairs(&probed, n, rf);
		}
		op[r] = ((double)p - (double)b) / n;
		base[r] = (double)b / n;
		t->nr_inside = 0;
		if ((ret = ring_buffer__consume(rb)) < 0)
			return ret;
		inside[r] = t->nr_inside ? median(t->inside, t->nr_inside) : 0;
	}
	/* median() sorts: the rounds' range is then first to last. */
	c->ns_per_sampled_op = median(op, ROUNDS);
	c->op_lo = op[0], c->op_hi = op[ROUNDS - 1];
	c->ns_per_call_no_probe = median(base, ROUNDS);
	c->ns_inside_op = median(inside, ROUNDS);
	c->inside_lo = inside[0], c->inside_hi = inside[ROUNDS - 1];
	c->iterations = n * ROUNDS;
	c->events = t->good;
	return 0;
}

/* Attached, the probes are hit once each and the kernel optimizes them;
 * then the rounds. */
static int attach_and_measure(struct calibration *c, struct probes *p,
			      struct ring_buffer *rb, struct tally *t,
			      void *rf, char *err, size_t len)
{
	uint64_t start_off, end_off;
	int ret;

	if ((ret = exe_offset(calibrate_probed_start_probe, &start_off)) ||
	    (ret = exe_offset(calibrate_probed_end_probe, &end_off))) {
		snprintf(err, len, "calibration: cannot find its probe sites "
			 "in rfbpf's executable: %s", strerror(-ret));
		return ret;
	}
	ret = probes_attach_callbacks(p, getpid(), "/proc/self/exe",
				      start_off, end_off, false);
	if (ret) {
		snprintf(err, len, "calibration: cannot attach its uprobes: "
			 "%s", strerror(-ret));
		return ret;
	}
	time_pairs(&probed, WARMUP_PAIRS, rf);
	c->optimized =
		*(const volatile unsigned char *)calibrate_probed_start_probe ==
		X86_CALL &&
		*(const volatile unsigned char *)calibrate_probed_end_probe ==
		X86_CALL;
	ret = measure(c, rb, t, rf);
	if (ret)
		snprintf(err, len, "calibration: cannot read its ring buffer: "
			 "%s", strerror(-ret));
	return ret;
}

int calibrate_sampled_op_cost(struct calibration *c, char *err, size_t len)
{
	struct fake_op op;
	struct probes p = { 0 };
	struct tally t = { .rf = op.rf };
	struct ring_buffer *rb = NULL;
	char why[256];
	int ret;

	memset(c, 0, sizeof(*c));
	fake_op_init(&op);
	ret = probes_load(&p, getpid(), RING_MB, false, 1.0, why, sizeof(why));
	if (ret) {
		snprintf(err, len, "calibration: %s", why);
		goto out;
	}
	rb = ring_buffer__new(probes_events_fd(&p), count_record, &t, NULL);
	if (!rb) {
		ret = -errno;
		snprintf(err, len, "calibration: cannot open its ring buffer: "
			 "%s", strerror(-ret));
		goto out;
	}
	ret = attach_and_measure(c, &p, rb, &t, op.rf, err, len);
	if (!ret && c->events < (uint64_t)c->iterations * 2 * 9 / 10) {
		ret = -EIO;
		snprintf(err, len, "calibration: rfbpf's programs wrote %llu "
			 "records for %u ops, not two each",
			 (unsigned long long)c->events, c->iterations);
	}
out:
	ring_buffer__free(rb);
	probes_destroy(&p);
	return ret;
}

void calibration_probe_cost(const struct calibration *c,
			    struct probe_cost *cost)
{
	cost->inside_ns = llround(c->ns_inside_op);
	cost->outside_ns = c->ns_per_sampled_op > c->ns_inside_op ?
			   llround(c->ns_per_sampled_op - c->ns_inside_op) :
			   0;
	cost->inside_lo_ns = llround(c->inside_lo);
	cost->inside_hi_ns = llround(c->inside_hi);
	cost->op_lo_ns = c->op_lo > 0 ? llround(c->op_lo) : 0;
	cost->op_hi_ns = c->op_hi > 0 ? llround(c->op_hi) : 0;
}
