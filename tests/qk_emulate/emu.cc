// emu.cc - the fiber scheduler of shim.h.
#include "shim.h"
dim3u threadIdx, blockIdx, gridDim, blockDim;
unsigned emu_slots[1024];
static ucontext_t sched;
static std::vector<ucontext_t> ctx;
static std::vector<char *> stacks;
static std::vector<int> state; // 0 running, 1 at barrier, 2 done
static int cur;
static void (*g_body)(void *);
static void *g_arg;
static std::vector<std::pair<const char *, size_t>> buffers;
void emu_register(const void *p, size_t bytes) { buffers.push_back({(const char *)p, bytes}); }
void emu_unregister_all() { buffers.clear(); }
void emu_access(const void *p, size_t bytes)
{
	const char *c = (const char *)p;
	if ((uintptr_t)c % (bytes > 16 ? bytes : 16)) {
		fprintf(stderr, "emu: %zu-byte access at %p is not aligned (thread %u, block %u)\n", bytes, p,
			threadIdx.x, blockIdx.x);
		abort();
	}
	for (auto &b : buffers)
		if (c >= b.first && c + bytes <= b.first + b.second)
			return;
	fprintf(stderr, "emu: %zu-byte access at %p is outside every buffer (thread %u, block %u)\n", bytes, p,
		threadIdx.x, blockIdx.x);
	abort();
}
void emu_barrier() { state[cur] = 1; swapcontext(&ctx[cur], &sched); }
static void entry(int i) { (void)i; g_body(g_arg); state[cur] = 2; swapcontext(&ctx[cur], &sched); }
void emu_launch(unsigned grid, unsigned block, void (*body)(void *), void *arg)
{
	const size_t SS = 256 * 1024;
	g_body = body; g_arg = arg;
	gridDim = {grid, 1, 1}; blockDim = {block, 1, 1};
	ctx.resize(block); state.resize(block);
	while (stacks.size() < block) stacks.push_back((char *)malloc(SS));
	for (unsigned b = 0; b < grid; b++) {
		for (unsigned t = 0; t < block; t++) {
			getcontext(&ctx[t]);
			ctx[t].uc_stack.ss_sp = stacks[t]; ctx[t].uc_stack.ss_size = SS; ctx[t].uc_link = &sched;
			makecontext(&ctx[t], (void (*)())entry, 1, (int)t);
			state[t] = 0;
		}
		for (;;) {
			unsigned done = 0, waiting = 0;
			for (unsigned t = 0; t < block; t++) {
				if (state[t] == 0) {
					cur = (int)t; threadIdx = {t, 0, 0}; blockIdx = {b, 0, 0};
					swapcontext(&sched, &ctx[t]);
				}
			}
			for (unsigned t = 0; t < block; t++) { done += state[t] == 2; waiting += state[t] == 1; }
			if (done == block) break;
			if (done) { fprintf(stderr, "emu: %u threads returned while %u wait at a barrier (block %u)\n", done, waiting, b); exit(2); }
			for (unsigned t = 0; t < block; t++) state[t] = 0;
		}
	}
}
