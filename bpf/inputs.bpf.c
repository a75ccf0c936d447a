// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --shapes (rfbpf.h): the op's inputs, as PyTorch boxed them into the
 * RecordFunction for its callbacks, sent right after the op's before event
 * (and its Python stack). The op programs (rfbpf.bpf.c) call
 * emit_inputs(); a global function, verified once for the programs that
 * call it.
 */
#include "common.bpf.h"

volatile struct rf_inputs_config in_cfg;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rf_inputs_event);
} in_scratch SEC(".maps");

/* Elements read per list: a list of hundreds of tensors (a foreach op's
 * parameters) must leave room for the inputs after it. */
#define IN_MAX_ELEMS 32

struct in_walk {
	struct rf_inputs_event *e;
	__u64 next_input;	/* the next of the op's IValues */
	__u64 next_elem;	/* in a list: its next element */
	__u32 inputs_left;
	__u32 elems_left;
	__u32 list_hdr;		/* the open list's header word */
	__u32 n;		/* words written */
	__u32 flags;		/* RF_INPUTS_F_* */
};

/* Whether need more words fit; if not, the record ends here. */
static __always_inline bool in_room(struct in_walk *w, __u32 need)
{
	if (w->n + need <= RF_IN_MAX_WORDS)
		return true;
	w->flags |= RF_INPUTS_F_CUT;
	return false;
}

/* A tensor at word i: its dtype, then its sizes and strides, read from
 * the TensorImpl's SizesAndStrides (inline up to 5 dims). */
static __always_inline bool in_tensor(struct in_walk *w, __u64 impl, __u32 i)
{
	__u64 sas[1 + 2 * RF_SIZES_INLINE], ndim, keep, p;
	__u16 dtype = 0;
	__u32 flags = 0;
	__u64 *out;

	if (bpf_probe_read_user(sas, sizeof(sas),
				(void *)(impl + in_cfg.impl_sizes)) ||
	    bpf_probe_read_user(&dtype, sizeof(dtype),
				(void *)(impl + in_cfg.impl_dtype))) {
		w->e->w[i] = RF_IN_HDR(RF_IN_TENSOR, RF_IN_F_FAULT, 0, 0, 0);
		w->flags |= RF_INPUTS_F_FAULT;
		w->n++;
		return true;
	}
	ndim = sas[0];
	keep = ndim > RF_IN_MAX_DIMS ? RF_IN_MAX_DIMS : ndim;
	asm volatile("%0 &= %1" : "+r"(keep) : "i"(2 * RF_IN_MAX_DIMS - 1));
	if (keep < ndim)
		flags |= RF_IN_F_CUT;
	if (!in_room(w, 1 + 2 * keep))
		return false;
	out = &w->e->w[i + 1];
	if (ndim <= RF_SIZES_INLINE) {
		for (__u32 k = 0; k < RF_SIZES_INLINE; k++) {
			if (k >= keep)
				break;
			out[k] = sas[1 + k];
			out[keep + k] = sas[1 + RF_SIZES_INLINE + k];
		}
	} else {
		p = sas[1];
		if (bpf_probe_read_user(out, keep * 8, (void *)p) ||
		    bpf_probe_read_user(out + keep, keep * 8,
					(void *)(p + ndim * 8))) {
			flags |= RF_IN_F_FAULT;
			w->flags |= RF_INPUTS_F_FAULT;
		}
	}
	w->e->w[i] = RF_IN_HDR(RF_IN_TENSOR, flags, dtype, ndim, keep);
	w->n += 1 + keep * 2;
	return true;
}

/* A list at word i: its element type and length; its elements follow as
 * the next values the walk reads. */
static __always_inline void in_list(struct in_walk *w, __u64 impl, __u32 i)
{
	__u64 vec[2] = {}, type = 0, count;
	__u32 kind = 0, flags = 0;

	if (bpf_probe_read_user(vec, sizeof(vec),
				(void *)(impl + in_cfg.list_vector)) ||
	    vec[1] < vec[0]) {
		flags = RF_IN_F_FAULT;
		w->flags |= RF_INPUTS_F_FAULT;
		vec[1] = vec[0];
	}
	type = read_u64(impl + in_cfg.list_type);
	if (type)
		bpf_probe_read_user(&kind, sizeof(kind),
				    (void *)(type + RF_TYPE_KIND));
	count = (vec[1] - vec[0]) / RF_IVALUE_SIZE;
	w->elems_left = count > IN_MAX_ELEMS ? IN_MAX_ELEMS : count;
	if (w->elems_left < count)
		flags |= RF_IN_F_CUT;
	w->next_elem = vec[0];
	w->list_hdr = i;
	w->e->w[i] = RF_IN_HDR(RF_IN_LIST, flags, kind, count, 0);
	w->n++;
}

/* One value: an input of the op, or an element of the list before it. */
static long in_walk_one(__u32 k, void *data)
{
	struct in_walk *w = data;
	bool elem = w->elems_left > 0;
	__u64 v[2], addr;
	__u32 i, tag, kind;

	if (elem) {
		addr = w->next_elem;
		w->next_elem += RF_IVALUE_SIZE;
		w->elems_left--;
	} else if (w->inputs_left) {
		addr = w->next_input;
		w->next_input += RF_IVALUE_SIZE;
		w->inputs_left--;
	} else {
		return 1;
	}
	if (!in_room(w, 1))
		return 1;
	i = w->n & (RF_IN_MAX_WORDS - 1);
	if (bpf_probe_read_user(v, sizeof(v), (void *)addr)) {
		w->e->w[i] = RF_IN_HDR(RF_IN_OTHER, RF_IN_F_FAULT, 0, 0, 0);
		w->flags |= RF_INPUTS_F_FAULT;
		w->n++;
	} else if ((tag = (__u32)v[1]) == in_cfg.tag_tensor) {
		if (!in_tensor(w, v[0], i))
			return 1;
	} else if (tag == in_cfg.tag_int || tag == in_cfg.tag_double ||
		   tag == in_cfg.tag_bool) {
		if (!in_room(w, 2))
			return 1;
		kind = tag == in_cfg.tag_int ? RF_IN_INT :
		       tag == in_cfg.tag_double ? RF_IN_DOUBLE : RF_IN_BOOL;
		w->e->w[i] = RF_IN_HDR(kind, 0, 0, 0, 0);
		w->e->w[i + 1] = v[0];
		w->n += 2;
	} else if (tag == in_cfg.tag_list && !elem) {
		in_list(w, v[0], i);
	} else {
		w->e->w[i] = RF_IN_HDR(tag == in_cfg.tag_none ? RF_IN_NONE :
				       RF_IN_OTHER, 0, 0, 0, 0);
		w->n++;
	}
	if (elem)	/* one more element follows its list's header */
		w->e->w[w->list_hdr & (RF_IN_MAX_WORDS - 1)] += 1ull << 48;
	return 0;
}

__noinline int emit_inputs(const struct rf_event_hdr *h)
{
	struct in_walk w = {};
	__u64 args[2] = {}, size;
	__u32 zero = 0, n;

	if (!h)		/* a global function's argument may be NULL */
		return 0;
	w.e = bpf_map_lookup_elem(&in_scratch, &zero);
	if (!w.e)
		return 0;
	if (bpf_probe_read_user(args, sizeof(args),
				(void *)(h->rf_addr + in_cfg.rf_inputs)))
		w.flags |= RF_INPUTS_F_FAULT;
	w.next_input = args[0];
	w.inputs_left = args[1] > 0xffff ? 0xffff : args[1];
	w.e->hdr = *h;
	w.e->hdr.kind = RF_EV_INPUTS;
	w.e->hdr.name_len = 0;
	w.e->nr_inputs = w.inputs_left;
	bpf_loop(RF_IN_MAX_VALUES, in_walk_one, &w, 0);
	if (w.inputs_left || w.elems_left)
		w.flags |= RF_INPUTS_F_CUT;
	n = w.n > RF_IN_MAX_WORDS ? RF_IN_MAX_WORDS : w.n;
	w.e->nr_words = n;
	w.e->in_flags = w.flags;
	if (w.flags & RF_INPUTS_F_CUT)
		count(RF_CNT_INPUTS_CUT);
	if (w.flags & RF_INPUTS_F_FAULT)
		count(RF_CNT_INPUTS_FAULTS);
	size = n;
	asm volatile("%0 &= %1" : "+r"(size) : "i"(2 * RF_IN_MAX_WORDS - 1));
	size = RF_INPUTS_SIZE(size > RF_IN_MAX_WORDS ? RF_IN_MAX_WORDS : size);
	if (bpf_ringbuf_output(&events, w.e, size, wakeup_flag()))
		count(RF_CNT_DROPS);
	return 0;
}
