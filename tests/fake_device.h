/* fake_device.h - the fake device of the runtime tests (driver half). */
#ifndef JITK_TEST_FAKE_DEVICE_H
#define JITK_TEST_FAKE_DEVICE_H

#include "common.h"
#include "gpu/device.h"

#define FAKE_MAX_LAUNCHES 64
#define FAKE_MAX_PARAMS 32
#define FAKE_BUILT_BYTES 512
#define FAKE_MAX_ALLOCS 16

typedef struct {
	unsigned grid[3], block[3], smem;
	void *kernel;
	void *stream;
	uint64_t values[FAKE_MAX_PARAMS]; /* first 8 bytes of each parameter */
	size_t nparams;
	int programmatic;
	unsigned cluster[3];
	size_t built_bytes;         /* a built parameter block: its first bytes */
	unsigned char built[FAKE_BUILT_BYTES];
} fake_launch;

/* A parameter builder on the fake device: what run r of a builder with
 * these parameters writes to out (size bytes). */
typedef void (*fake_builder_fn)(void *payload, void **args, unsigned run, unsigned char *out,
				size_t size);

typedef struct {
	int cc;
	int sm_count;
	int open_fails;          /* CUresult open returns */
	int capturing;           /* is_capturing answers this */
	int reject_loads;        /* this many loads fail with INVALID_IMAGE */
	int loads, unloads, kernels_got, mode_switches;
	float scale_value;       /* what read() returns for input scales */
	unsigned buffer_epoch;   /* bumped: every address is a new allocation */
	uint64_t host_ptr;       /* buffer_id() refuses this address */
	int tma_encodes;          /* tensor_map() calls */
	int tma_fail;             /* CUresult tensor_map returns */
	jitk_tma_request tma_last; /* what the last one was asked */
	fake_builder_fn builder;  /* run_builder runs it, when set */
	void *builder_payload;
	int builder_runs;         /* run_builder calls */
	int builder_fail;         /* CUresult run_builder returns */
	unsigned shared_set;      /* the last set_shared */
	int alloc_fail;           /* CUresult alloc_zeroed returns */
	void (*alloc_hook)(void *); /* run (once, then cleared) as an allocation starts: */
	void *alloc_hook_arg;       /* what another thread could do meanwhile */
	int nallocs, frees;       /* alloc_zeroed's (recorded below), free_mem's of them */
	uint64_t alloc_ptr[FAKE_MAX_ALLOCS], next_alloc;
	size_t alloc_bytes[FAKE_MAX_ALLOCS];
	fake_launch launches[FAKE_MAX_LAUNCHES];
	int nlaunches;
	int closed;
} fake_device;

extern const jitk_device_ops fake_ops;
/* A runtime over fake (which must outlive it), with the caller's options:
 * specs and cache are set here, and the log when o has none. */
int t_fake_runtime_with(jitk_runtime **out, fake_device *fake, const char *specs,
			const char *cache, jitk_runtime_options *o);
/* The same with the default options and capture policy capture. */
int t_fake_runtime(jitk_runtime **out, fake_device *fake, const char *specs,
		   const char *cache, jitk_capture_policy capture);

#endif
