// SPDX-License-Identifier: BSD-2-Clause
/*
 * A stand-in for libtorch's RecordFunction entry points, with the exact
 * mangled names and argument types of every before() overload PyTorch has
 * shipped, so the end-to-end test can check rfbpf's BPF decoding of each
 * argument shape in the real kernel, including the ones no PyTorch build
 * on this machine runs (old-ABI std::string, FunctionDescriptor with a
 * schema, DispatchKey). Built twice: with the C++11 std::string ABI and
 * with -D_GLIBCXX_USE_CXX11_ABI=0.
 *
 * It prints what it called, one line per op: variant, scope, seq, name,
 * and the test compares that with rfbpf's trace.
 */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <variant>

namespace c10 {
struct OperatorName {
	std::string name;
	std::string overload_name;
};
struct FunctionSchema {
	OperatorName name_;
};
enum class DispatchKey : uint16_t { CPU = 1 };
} // namespace c10

namespace at {
using Descriptor = std::variant<std::string_view,
				std::reference_wrapper<const c10::FunctionSchema>>;

// Only the fields rfbpf reads sit where PyTorch has them: scope_ at 96.
struct RecordFunction {
	void *vptr;
	char before_scope[88];
	uint8_t scope;
	char rest[160];

	void before(const char *name, int64_t seq);
	void before(std::string name, int64_t seq);
	void before(std::reference_wrapper<const c10::FunctionSchema> s,
		    int64_t seq);
	void before(Descriptor d, int64_t seq);
	void before(Descriptor d, int64_t seq, c10::DispatchKey k);
	void end();
};
static_assert(offsetof(RecordFunction, scope) == 96, "scope_ offset");

// The bodies only keep the compiler from dropping the calls.
volatile uintptr_t sink;
__attribute__((noinline)) void RecordFunction::before(const char *n, int64_t s)
{ sink = (uintptr_t)n + s; }
__attribute__((noinline)) void RecordFunction::before(std::string n, int64_t s)
{ sink = n.size() + s; }
__attribute__((noinline)) void RecordFunction::before(
	std::reference_wrapper<const c10::FunctionSchema> sc, int64_t s)
{ sink = sc.get().name_.name.size() + s; }
__attribute__((noinline)) void RecordFunction::before(Descriptor d, int64_t s)
{ sink = d.index() + s; }
__attribute__((noinline)) void RecordFunction::before(Descriptor d, int64_t s,
						      c10::DispatchKey k)
{ sink = d.index() + s + (int)k; }
__attribute__((noinline)) void RecordFunction::end() { sink = 0; }
} // namespace at

static void report(const char *variant, const at::RecordFunction &rf,
		   int64_t seq, const std::string &name)
{
	std::printf("%s\t%u\t%lld\t%s\n", variant, rf.scope, (long long)seq,
		    name.c_str());
}

int main()
{
	const std::string names[] = {
		"aten::add",
		"user \"scope\" with \\ and tab\t",
		std::string(127, 'x'),			// fits exactly
		std::string(60, 'a') + std::string(140, 'b'), // is cut
	};
	at::RecordFunction rf = {};
	int64_t seq = 0;
	unsigned scope = 0;

	for (const std::string &n : names) {
		c10::FunctionSchema schema{{n, "Tensor"}};
		auto next = [&](const char *variant) {
			rf.scope = scope++ % 10;
			report(variant, rf, ++seq, n);
		};

		next("before(const char*)");
		rf.before(n.c_str(), seq);
		rf.end();
		next(_GLIBCXX_USE_CXX11_ABI ? "before(std::string)"
			: "before(std::string, old ABI)");
		rf.before(n, seq);
		rf.end();
		next("before(FunctionSchema)");
		rf.before(std::cref(schema), seq);
		rf.end();
		next("before(FunctionDescriptor)");
		rf.before(at::Descriptor(std::string_view(n)), seq);
		rf.end();
		next("before(FunctionDescriptor)");
		rf.before(at::Descriptor(std::cref(schema)), seq);
		rf.end();
		next("before(FunctionDescriptor, DispatchKey)");
		rf.before(at::Descriptor(std::string_view(n)), seq,
			  c10::DispatchKey::CPU);
		rf.end();
		next("before(FunctionDescriptor, DispatchKey)");
		rf.before(at::Descriptor(std::cref(schema)), seq,
			  c10::DispatchKey::CPU);
		rf.end();
	}
	return 0;
}
