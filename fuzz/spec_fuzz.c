/* spec_fuzz.c - libFuzzer target: the spec loader (libyaml events, the
 * tree with its limits, the schema, expressions) and specialization on a
 * few architectures, checking that errors are clean (JITK_ESPEC, one
 * printable line) and that no tuning key goes missing after load. Inputs
 * are loaded as <repo>/specs/fuzz.yaml so that "template: ../templates/..."
 * resolves. Build and run: tests/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/instance.h"
#include "spec/spec.h"

static char *name;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char *specs = realpath("specs", NULL);

	(void)argc;
	(void)argv;
	if (!specs) {
		fprintf(stderr, "spec_fuzz: run from the repository root\n");
		exit(1);
	}
	name = jitk__asprintf("%s/fuzz.yaml", specs);
	free(specs);
	return 0;
}

/* Every message is one printable line (spec text is escaped in it). */
static void check_message(void)
{
	const unsigned char *m = (const unsigned char *)jitk_error_last()->message;

	for (; *m; m++)
		if (*m < 0x20 || *m == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The usual targets, and the ends of the range of architectures. */
	static const char *const archs[] = { "sm_80", "sm_90", "sm_100a", "compute_120",
					     "sm_10", "sm_9999" };
	spec_set *set = NULL;
	size_t i, a;
	int rc;

	rc = jitk__spec_set_load_buffer(&set, name, (const char *)data, size);
	if (rc) {
		/* a clean error is the expected outcome for most inputs */
		if (rc != JITK_ESPEC && rc != JITK_ENOMEM)
			abort();
		check_message();
		return 0;
	}
	for (i = 0; i < set->ninsts && i < 64; i++) {
		size_t found;

		if (jitk__spec_find(set, set->insts[i].name, &found) || found != i)
			abort(); /* every instance must be found by its own name */
		for (a = 0; a < sizeof(archs) / sizeof(archs[0]); a++) {
			jitk_variant v;
			jitk_arch arch;

			if (jitk__arch_parse(&arch, archs[a]))
				abort();
			rc = jitk__specialize(&v, set, i, arch);
			/* a spec error, or a variant; the loader has made sure
			 * that every tuning key has a value everywhere */
			if (rc && rc != JITK_ESPEC && rc != JITK_ENOMEM)
				abort();
			if (rc)
				check_message();
			if (rc == JITK_ESPEC) {
				const char *m = strstr(jitk_error_last()->message, ": error: ");

				if (!m || !strncmp(m + 9, "tuning key '", 12))
					abort();
			}
			if (!rc && !v.available && strchr(v.reason, '\n'))
				abort();
		}
	}
	jitk__spec_set_free(set);
	return 0;
}
