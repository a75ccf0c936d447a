// SPDX-License-Identifier: BSD-2-Clause
/*
 * Training steps told from ops (model/steps.h): which marker wins, how
 * steps are numbered, and the window --steps and --from-step let through.
 */
#include "check.h"
#include "model/steps.h"

#define MS 1000000ull

/* One optimizer iteration on tid 7: an op inside the step, then the
 * optimizer's scope from at+5 to at+9 ms. Returns whether a step ended. */
static bool optimizer_iteration(struct steps *s, uint64_t at, struct step *d)
{
	steps_op_open(s, "aten::mm", 7, at + 1 * MS);
	steps_op_close(s, "aten::mm", 7, at + 1 * MS, at + 2 * MS, d);
	steps_op_open(s, "Optimizer.step#SGD.step", 7, at + 5 * MS);
	return steps_op_close(s, "Optimizer.step#SGD.step", 7, at + 5 * MS,
			      at + 9 * MS, d);
}

TEST(the_optimizer_ends_steps_and_the_first_is_never_whole)
{
	struct steps s;
	struct step d;

	steps_init(&s, NULL, -1, 2, true);
	CHECK(!steps_pass(&s, 0));
	CHECK(!optimizer_iteration(&s, 0, &d));	/* ends step 0: partial */
	CHECK_STR(steps_source_name(&s), "Optimizer.step#SGD.step");
	/* Step 1 is where a ProfilerStep would show itself: not traced. */
	CHECK(!s.started);
	CHECK(!optimizer_iteration(&s, 10 * MS, &d));
	CHECK(s.started);
	CHECK_EQ_U64(s.first, 2);
	CHECK_EQ_U64(s.from_ns, 19 * MS);
	CHECK(!steps_pass(&s, 18 * MS));
	CHECK(steps_pass(&s, 19 * MS));
	CHECK(optimizer_iteration(&s, 20 * MS, &d));
	CHECK_EQ_U64(d.number, 2);
	CHECK_EQ_U64(d.start_ns, 19 * MS);
	CHECK_EQ_U64(d.end_ns, 29 * MS);
	CHECK(!steps_finished(&s));
	CHECK(optimizer_iteration(&s, 30 * MS, &d));
	CHECK_EQ_U64(d.number, 3);
	CHECK(steps_finished(&s));
	CHECK(steps_pass(&s, 38 * MS));
	CHECK(!steps_pass(&s, 39 * MS));	/* the window is [19, 39) ms */
	/* Finished: later markers start nothing. */
	CHECK(!optimizer_iteration(&s, 40 * MS, &d));
	CHECK_EQ_U64(s.done, 2);
	CHECK(!steps_pass(&s, 45 * MS));
}

TEST(another_optimizer_name_or_thread_is_no_marker)
{
	struct steps s;
	struct step d;

	steps_init(&s, NULL, -1, 0, false);
	optimizer_iteration(&s, 0, &d);
	steps_op_open(&s, "Optimizer.step#Adam.step", 7, 10 * MS);
	CHECK(!steps_op_close(&s, "Optimizer.step#Adam.step", 7, 10 * MS,
			      11 * MS, &d));
	CHECK(!steps_op_close(&s, "Optimizer.step#SGD.step", 8, 12 * MS,
			      13 * MS, &d));
	CHECK(!steps_op_close(&s, "Optimizer.step#SGD.step", 7, 14 * MS,
			      15 * MS, &d));
	CHECK(steps_op_close(&s, "Optimizer.step#SGD.step", 7, 16 * MS,
			     17 * MS, &d));
	CHECK_EQ_U64(d.number, 2);
	/* Without a gate, everything passes. */
	CHECK(steps_pass(&s, 0));
}

TEST(profiler_steps_keep_the_jobs_numbers_and_win_over_the_optimizer)
{
	struct steps s;
	struct step d;

	steps_init(&s, NULL, 5, 2, true);
	/* Attached mid-step: the optimizer ends first, then the schedule's
	 * step() opens ProfilerStep#4. */
	optimizer_iteration(&s, 0, &d);
	CHECK(s.source == STEP_OPTIMIZER);
	steps_op_open(&s, "ProfilerStep#4", 7, 10 * MS);
	CHECK(s.source == STEP_PROFILER);
	CHECK_EQ_U64(s.switched, 1);
	CHECK(!s.started);			/* 4 < --from-step 5 */
	optimizer_iteration(&s, 10 * MS, &d);	/* no longer a marker */
	CHECK(!steps_op_close(&s, "ProfilerStep#4", 7, 10 * MS, 20 * MS, &d));
	steps_op_open(&s, "ProfilerStep#5", 7, 20 * MS);
	CHECK(s.started);
	CHECK_EQ_U64(s.from_ns, 20 * MS);
	CHECK_EQ_U64(steps_number_at(&s, 21 * MS), 5);
	CHECK(steps_op_close(&s, "ProfilerStep#5", 7, 20 * MS, 30 * MS, &d));
	CHECK_EQ_U64(d.number, 5);
	CHECK(!steps_finished(&s));
	steps_op_open(&s, "ProfilerStep#6", 7, 30 * MS);
	CHECK_EQ_U64(steps_number_at(&s, 25 * MS), 5);
	CHECK_EQ_U64(steps_number_at(&s, 31 * MS), 6);
	CHECK_EQ_U64(steps_number_at(&s, 5 * MS), (uint64_t)-1);

	/* A ProfilerStep that is not the open one ends nothing. */
	CHECK(!steps_op_close(&s, "ProfilerStep#6", 7, 29 * MS, 40 * MS, &d));
	CHECK(steps_op_close(&s, "ProfilerStep#6", 7, 30 * MS, 40 * MS, &d));
	CHECK(steps_finished(&s));
	CHECK_EQ_U64(s.longest_ns, 10 * MS);
	CHECK(!steps_pass(&s, 40 * MS));
}

TEST(a_named_op_is_a_step_numbered_from_the_first_seen)
{
	struct steps s;
	struct step d;

	steps_init(&s, "train_step", 1, 2, true);
	CHECK_STR(steps_source_name(&s), "train_step");
	/* ProfilerStep never takes over from the user's choice. */
	steps_op_open(&s, "ProfilerStep#0", 7, 0);
	CHECK(s.source == STEP_USER_OP);
	steps_op_open(&s, "train_step", 9, 1 * MS);	/* step 0: skipped */
	CHECK(!steps_op_close(&s, "train_step", 9, 1 * MS, 2 * MS, &d));
	CHECK(!s.started);
	steps_op_open(&s, "train_step", 3, 3 * MS);	/* another thread */
	CHECK(!s.started);
	steps_op_open(&s, "train_step", 9, 4 * MS);
	CHECK(s.started);
	CHECK(steps_op_close(&s, "train_step", 9, 4 * MS, 6 * MS, &d));
	CHECK_EQ_U64(d.number, 1);
	CHECK_EQ_U64(d.tid, 9);
	CHECK(steps_pass(&s, 5 * MS));
	CHECK(!steps_pass(&s, 7 * MS));		/* between two steps */
	steps_op_open(&s, "train_step", 9, 8 * MS);
	CHECK(steps_pass(&s, 8 * MS));
	CHECK(!steps_pass(&s, 7 * MS));
	CHECK(steps_op_close(&s, "train_step", 9, 8 * MS, 9 * MS, &d));
	CHECK_EQ_U64(d.number, 2);
	CHECK(steps_finished(&s));
	CHECK(steps_pass(&s, 8 * MS + 1));	/* a late op of step 2 */
	CHECK(!steps_pass(&s, 9 * MS));
}

RUN_TESTS()
