// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in for libtorch_cpu's global callback registry, for
 * test_agent_logic: at::addGlobalCallback / at::removeCallback under their
 * real mangled names, taking at::RecordFunctionCallback by value, with
 * StartCallback returning std::unique_ptr<at::ObserverContext> as in
 * PyTorch. fake_torch_fire() calls the registered start and end the way
 * RecordFunction does, so the agent's asm stubs run under the real C++
 * calling convention (hidden return slot for the unique_ptr).
 */
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace at {
struct ObserverContext {
	virtual ~ObserverContext() = default;
};
struct RecordFunction {
	char opaque[256];
};
using StartCallback =
	std::unique_ptr<ObserverContext> (*)(const RecordFunction &);
using EndCallback = void (*)(const RecordFunction &, ObserverContext *);

class RecordFunctionCallback {
public:
	StartCallback start_;
	EndCallback end_;
	double sampling_prob_;
	std::array<bool, 10> scopes_;
	bool needs_inputs_, needs_outputs_, needs_ids_;
};
static_assert(sizeof(RecordFunctionCallback) == 40, "size as in PyTorch");

static RecordFunctionCallback registered;
static uint64_t registered_handle, removed_handle;

uint64_t addGlobalCallback(RecordFunctionCallback cb)
{
	registered = cb;
	return registered_handle = 41;
}

void removeCallback(uint64_t handle)
{
	removed_handle = handle;
}
} // namespace at

extern "C" {
/* 1 if start returned an empty context and end ran, 0 otherwise. */
__attribute__((visibility("default"))) int fake_torch_fire(void)
{
	at::RecordFunction rf = {};

	if (!at::registered.start_ || !at::registered.end_)
		return 0;
	std::unique_ptr<at::ObserverContext> ctx = at::registered.start_(rf);
	if (ctx)
		return 0;
	at::registered.end_(rf, ctx.get());
	return 1;
}

__attribute__((visibility("default"))) double fake_torch_prob(void)
{
	return at::registered.sampling_prob_;
}

/* Scopes all on and needs_* all off, as the agent asks. */
__attribute__((visibility("default"))) int fake_torch_flags_ok(void)
{
	for (bool s : at::registered.scopes_)
		if (!s)
			return 0;
	return !at::registered.needs_inputs_ &&
	       !at::registered.needs_outputs_ && !at::registered.needs_ids_;
}

__attribute__((visibility("default"))) uint64_t fake_torch_removed(void)
{
	return at::removed_handle;
}
}
