/* compiler.c - the GPU-free half: specs + templates + cache + NVRTC. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compile/compile.h"

#ifndef JITK_DATADIR
#define JITK_DATADIR "/usr/local/share/jitk"
#endif

/* ------------------------------------------------------------ defaults */

static int is_dir(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* Where the specs are when nothing says: next to this library (installed:
 * <lib>/../share/jitk/specs; build tree: build/../specs), else the
 * configured data directory. */
static char *default_specs(void)
{
	Dl_info info;
	char *found = NULL;

	if (dladdr((void *)default_specs, &info) && info.dli_fname) {
		char *self = realpath(info.dli_fname, NULL);
		char *slash = self ? strrchr(self, '/') : NULL;

		if (slash) {
			*slash = '\0';
			found = jitk__asprintf("%s/../share/jitk/specs", self);
			if (found && !is_dir(found)) {
				free(found);
				found = jitk__asprintf("%s/../specs", self);
				if (found && !is_dir(found)) {
					free(found);
					found = NULL;
				}
			}
		}
		free(self);
	}
	if (!found && is_dir(JITK_DATADIR "/specs"))
		found = jitk__strdup(JITK_DATADIR "/specs");
	if (!found)
		return jitk__strdup("specs");
	/* without the "lib/.." every message would carry: "build/../specs/x.yaml:3:1" */
	{
		char *real = realpath(found, NULL);

		if (real) {
			free(found);
			found = jitk__strdup(real);
			free(real);
		}
	}
	return found;
}

static char *default_cache_dir(void)
{
	char *dir = NULL;

	if (jitk_cache_default_dir(&dir) == JITK_ENOENT)
		return jitk__strdup(""); /* no home: in memory */
	return dir;
}

static int split_dirs(char ***out, size_t *n, const char *list)
{
	const char *p = list;

	*out = NULL;
	*n = 0;
	while (*p) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);

		if (len) {
			char **a = realloc(*out, (*n + 1) * sizeof(*a));

			if (!a)
				return -1;
			*out = a;
			if (!(a[*n] = jitk__strndup(p, len)))
				return -1;
			++*n;
		}
		p += len + (colon ? 1 : 0);
	}
	return 0;
}

/* ----------------------------------------------------------------- new */

/* The size of each version of jitk_compiler_options: a caller's struct of
 * version v has exactly the fields up to and including the last one that
 * version added, so only those are read. */
static const size_t compiler_options_size[] = {
	0,
	offsetof(jitk_compiler_options, cache_read_only) + sizeof(int), /* 1 */
	offsetof(jitk_compiler_options, remote_lease_ttl_ms) + sizeof(int), /* 2 */
	offsetof(jitk_compiler_options, require_sigs) + sizeof(int), /* 3 */
};

int jitk_compiler_options_init(jitk_compiler_options *opts, unsigned version)
{
	const jitk_compiler_options def = JITK_COMPILER_OPTIONS_INIT;

	if (!opts)
		return jitk__error(JITK_EINVAL, "jitk_compiler_options_init: opts is NULL");
	if (version < 1 || version > JITK_COMPILER_OPTIONS_VERSION)
		return jitk__error(JITK_EINVAL, "jitk_compiler_options version %u is not 1 to %u",
				   version, JITK_COMPILER_OPTIONS_VERSION);
	memcpy(opts, &def, compiler_options_size[version]);
	opts->version = version;
	return JITK_OK;
}

/* Read options of any supported version into *o (the current layout; the
 * fields a version lacks keep their defaults). */
int jitk__compiler_options_read(jitk_compiler_options *o, const jitk_compiler_options *in)
{
	const jitk_compiler_options def = JITK_COMPILER_OPTIONS_INIT;

	*o = def;
	if (!in)
		return 0;
	if (in->version < 1 || in->version > JITK_COMPILER_OPTIONS_VERSION)
		return jitk__error(JITK_EINVAL, "jitk_compiler_options version %u is not 1 to %u",
				   in->version, JITK_COMPILER_OPTIONS_VERSION);
	memcpy(o, in, compiler_options_size[in->version]);
	o->version = JITK_COMPILER_OPTIONS_VERSION;
	return 0;
}

/* The remote tier and the lease server, from the options, else the
 * environment. A lease server without a remote has nothing to wait for. */
static int remote_open(jitk_compiler *c, const jitk_compiler_options *o)
{
	const char *urls = o->remote ? o->remote : jitk__env("JITK_REMOTE_CACHE");
	const char *lease = o->remote_lease ? o->remote_lease : jitk__env("JITK_REMOTE_LEASE");
	int ro = o->remote_read_only >= 0
			 ? o->remote_read_only
			 : jitk__env_bool(&c->log, "JITK_REMOTE_READONLY", 1, "read-only: nothing is uploaded");
	int rc = jitk__remote_open(&c->remote, urls, ro, o->remote_connect_timeout_ms,
				   o->remote_timeout_ms, &c->log);

	if (rc || !lease || !*lease)
		return rc;
	if (!c->remote) {
		char shown[256];

		jitk__redact_url(shown, sizeof(shown), lease);
		jitk__log(&c->log, JITK_LOG_WARN, "lease server %s ignored: there is no remote cache",
			  shown);
		return 0;
	}
	return jitk__lease_open(&c->lease, lease, o->remote_connect_timeout_ms,
				o->remote_lease_ttl_ms, &c->log);
}

/* $JITK_PCH: 0 never, 1 from a family's first compile; unset (or
 * anything else) the default, from its second. */
static int pch_init(jitk_compiler *c)
{
	const char *v = jitk__env("JITK_PCH");

	c->pch_mode = v && !strcmp(v, "0") ? 0 : v && !strcmp(v, "1") ? 1 : -1;
	c->fam_pch = calloc(c->specs->nfams ? c->specs->nfams : 1, sizeof(*c->fam_pch));
	if (!c->fam_pch)
		return jitk__error(JITK_ENOMEM, "out of memory");
	pthread_mutex_init(&c->pch_mu, NULL);
	return 0;
}

/* The tiers in lookup order: the layers, the writable cache (when there is
 * one), the remote (tier.h). */
static int tiers_open(jitk_compiler *c)
{
	int rc = 0;

	if (c->layers) {
		jitk__tier_layers_trust(c->layers, c->trust);
		c->tiers[c->ntiers++] = c->layers;
	}
	if (jitk__cache_root(c->cache) &&
	    !(rc = jitk__tier_cache_new(&c->tiers[c->ntiers], c->cache, &c->log)))
		c->ntiers++;
	if (!rc && c->remote &&
	    !(rc = jitk__tier_remote_new(&c->tiers[c->ntiers], c->remote, c->lease, c->trust, &c->log)))
		c->ntiers++;
	return rc;
}

jitk_tier *jitk__compiler_tier(const jitk_compiler *c, int origin)
{
	size_t i;

	for (i = 0; i < c->ntiers; i++)
		if (c->tiers[i]->ops->origin == origin)
			return c->tiers[i];
	return NULL;
}

int jitk_compiler_new(jitk_compiler **out, const jitk_compiler_options *opts)
{
	jitk_compiler_options o;
	jitk_compiler *c;
	char *specs = NULL, *cache_dir = NULL, *both = NULL, **dirs = NULL;
	const char *layers;
	size_t ndirs = 0, i;
	int rc;

	if (!out)
		return jitk__error(JITK_EINVAL, "jitk_compiler_new: out is NULL");
	*out = NULL;
	if ((rc = jitk__compiler_options_read(&o, opts)))
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c)
		return jitk__error(JITK_ENOMEM, "out of memory");
	c->log.fn = o.log;
	c->log.payload = o.log_payload;
	c->log.level = o.log_level >= 0 ? o.log_level : jitk__log_level_from_env(JITK_LOG_WARN);
	/* An unknown value of a switch means what compiles and writes less
	 * (docs/api.md, "Environment"). */
	c->no_compile = o.no_compile >= 0 ? o.no_compile
					  : jitk__env_bool(&c->log, "JITK_NO_COMPILE", 1,
							   "a cache miss is an error");
	c->force_compile = o.force_compile >= 0
				   ? o.force_compile
				   : jitk__env_bool(&c->log, "JITK_FORCE_COMPILE", 0,
						    "cached kernels are used");
	if (o.dump_dir || jitk__env("JITK_DUMP_DIR"))
		c->dump_dir = jitk__strdup(o.dump_dir ? o.dump_dir : jitk__env("JITK_DUMP_DIR"));

	if ((rc = jitk__nvrtc_version(&c->nvrtc_major, &c->nvrtc_minor)) ||
	    (rc = jitk__nvrtc_archs(&c->archs, &c->narchs)))
		goto fail;
	specs = o.specs ? jitk__strdup(o.specs)
			: jitk__env("JITK_SPECS") ? jitk__strdup(jitk__env("JITK_SPECS"))
						  : default_specs();
	if (!specs || split_dirs(&dirs, &ndirs, specs)) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto fail;
	}
	if (!ndirs) {
		rc = jitk__error(JITK_EINVAL, "no spec directory given");
		goto fail;
	}
	if ((rc = jitk__spec_set_load_dirs(&c->specs, (const char *const *)dirs, ndirs)))
		goto fail;
	c->templates = calloc(c->specs->nfams ? c->specs->nfams : 1, sizeof(*c->templates));
	if (!c->templates) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < c->specs->nfams; i++)
		if ((rc = jitk__template_load(&c->templates[i], c->specs->fams[i]->template_path,
					      c->specs->fams[i]->nincludes > 0)))
			goto fail;

	cache_dir = o.cache_dir ? jitk__strdup(o.cache_dir) : default_cache_dir();
	layers = o.cache_path ? o.cache_path : jitk__env("JITK_CACHE_PATH");
	if (!cache_dir) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto fail;
	}
	if (!*cache_dir && !o.cache_dir)
		jitk__log(&c->log, JITK_LOG_WARN,
			  "no HOME, XDG_CACHE_HOME or JITK_CACHE_DIR: compiling in memory");
	if ((o.cache_read_only >= 0
		     ? o.cache_read_only
		     : jitk__env_bool(&c->log, "JITK_CACHE_READONLY", 1,
				      "read-only: nothing is written to the cache")) &&
	    *cache_dir) {
		/* The cache directory becomes the first read-only layer. */
		if (!(both = layers ? jitk__asprintf("%s:%s", cache_dir, layers)
				    : jitk__strdup(cache_dir))) {
			rc = jitk__error(JITK_ENOMEM, "out of memory");
			goto fail;
		}
		layers = both;
		*cache_dir = '\0';
	}
	if ((rc = jitk__cache_open(&c->cache, cache_dir, &c->log)) ||
	    (rc = jitk__tier_layers_open(&c->layers, layers, &c->log)))
		goto fail;
	if ((rc = jitk__packages_new(&c->packages, c->specs, c->cache, &c->log)))
		goto fail;
	if ((rc = pch_init(c)))
		goto fail;
	if ((rc = remote_open(c, &o)))
		goto fail;
	/* provenance: the key to sign with, the keys to trust (sign.h) */
	if ((rc = jitk__signer_open(&c->signer, o.signing_key)) ||
	    (rc = jitk__trust_new(&c->trust, o.trusted_keys, o.require_sigs, &c->log)))
		goto fail;
	if ((rc = tiers_open(c)))
		goto fail;
	*out = c;
	c = NULL;
	rc = JITK_OK;
fail:
	for (i = 0; i < ndirs; i++)
		free(dirs[i]);
	free(dirs);
	free(specs);
	free(cache_dir);
	free(both);
	jitk_compiler_free(c);
	return rc;
}

void jitk_compiler_free(jitk_compiler *c)
{
	size_t i;

	if (!c)
		return;
	if (c->templates && c->specs)
		for (i = 0; i < c->specs->nfams; i++)
			jitk__template_free(&c->templates[i]);
	free(c->templates);
	jitk__packages_free(c->packages);
	if (c->fam_pch) {
		jitk__cache_pch_remove(c->cache, c->pch_dir);
		/* and those of forked workers (jitk precompile -j), gone by now */
		jitk__cache_pch_sweep(c->cache);
		pthread_mutex_destroy(&c->pch_mu);
	}
	free(c->fam_pch);
	free(c->pch_dir);
	jitk__spec_set_free(c->specs);
	for (i = 0; i < c->ntiers; i++)
		jitk__tier_close(c->tiers[i]);
	if (!c->ntiers)
		jitk__tier_close(c->layers); /* opened, not listed yet */
	jitk__cache_close(c->cache);
	jitk__lease_close(c->lease);
	jitk__remote_close(c->remote);
	jitk__signer_free(c->signer);
	jitk__trust_free(c->trust);
	free(c->dump_dir);
	free(c->archs);
	free(c);
}

/* --------------------------------------------------------------- build */

static size_t family_index(const jitk_compiler *c, const spec_family *f)
{
	size_t i;

	for (i = 0; i < c->specs->nfams; i++)
		if (c->specs->fams[i] == f)
			return i;
	return 0;
}

int jitk__cache_key(uint8_t key[JITK_HASH_SIZE], const jitk_compiler *c,
		    const jitk_tu *tu, const char *target)
{
	jitk_hasher *h = jitk__hasher_new();
	char buf[64];
	size_t i;

	if (!h)
		return jitk__error(JITK_ENOMEM, "SHA-256 unavailable");
	snprintf(buf, sizeof(buf), "%d", JITK_KEY_FORMAT);
	jitk__hasher_field(h, "format", buf, strlen(buf));
	jitk__hasher_field(h, "jitk", JITK_VERSION, strlen(JITK_VERSION));
	snprintf(buf, sizeof(buf), "%d.%d", c->nvrtc_major, c->nvrtc_minor);
	jitk__hasher_field(h, "nvrtc", buf, strlen(buf));
	jitk__hasher_field(h, "target", target, strlen(target));
	for (i = 0; i < tu->noptions; i++)
		jitk__hasher_field(h, "option", tu->options[i], strlen(tu->options[i]));
	/* Header packages by name and content, never by path (the -I
	 * directories are not options of the key). */
	if (tu->packages)
		jitk__hasher_field(h, "packages", tu->packages, strlen(tu->packages));
	jitk__hasher_field(h, "source", tu->source, strlen(tu->source));
	jitk__hasher_field(h, "name", tu->name_expr, strlen(tu->name_expr));
	if (tu->builder_expr)
		jitk__hasher_field(h, "builder", tu->builder_expr, strlen(tu->builder_expr));
	if (jitk__hasher_final(h, key))
		return jitk__error(JITK_ENOMEM, "SHA-256 failed");
	return 0;
}

static int nvrtc_knows(const jitk_compiler *c, int cc)
{
	size_t i;

	for (i = 0; i < c->narchs; i++)
		if (c->archs[i] == cc)
			return 1;
	return 0;
}

int jitk__check_target(const jitk_compiler *c, jitk_arch a)
{
	static const char suffixes[] = { 'a', 'f' };
	char name[JITK_ARCH_STRLEN];
	jbuf b;
	size_t i, k;
	int rc;

	if (nvrtc_knows(c, a.cc) && jitk__arch_suffix_ok(a))
		return 0;
	jitk__arch_format(name, a);
	jitk__jbuf_init(&b);
	for (i = 0; i < c->narchs; i++)
		jitk__jbuf_printf(&b, "%s%d", i ? " " : "", c->archs[i]);
	for (k = 0; k < sizeof(suffixes); k++) {
		int any = 0;

		for (i = 0; i < c->narchs; i++) {
			jitk_arch s = { c->archs[i], 's', suffixes[k] };

			if (jitk__arch_suffix_ok(s))
				jitk__jbuf_printf(&b, "%s%d", any++ ? " " : (k ? "; with 'f': " : "; with 'a': "),
						  c->archs[i]);
		}
	}
	if (nvrtc_knows(c, a.cc))
		rc = jitk__error(JITK_EINVAL, "%s is not a target NVRTC %d.%d can compile for: "
				 "%s_%d has no '%c' variant (sm_NN and compute_NN for NN in %s)",
				 name, c->nvrtc_major, c->nvrtc_minor, a.kind == 'c' ? "compute" : "sm",
				 a.cc, a.suffix, b.data ? b.data : "?");
	else
		rc = jitk__error(JITK_EINVAL, "%s is not a target NVRTC %d.%d can compile for "
				 "(sm_NN and compute_NN for NN in %s)", name, c->nvrtc_major,
				 c->nvrtc_minor, b.data ? b.data : "?");
	jitk__jbuf_free(&b);
	return rc;
}

static int not_available(const jitk_variant *v)
{
	char arch[JITK_ARCH_STRLEN];

	jitk__arch_format(arch, v->arch);
	return jitk__error(JITK_EARCH, "%s is not available on %s: %s",
			   v->set->insts[v->inst].name, arch, v->reason);
}

/* Options of every translation unit that depend on the NVRTC at hand.
 * NVRTC 12.9+ has a compile cache of its own (in the driver's, under
 * ~/.nv): --no-cache keeps it from serving or storing anything, so what
 * jitk caches is always what NVRTC just made, and nothing is written
 * outside jitk's directories. --frandom-seed fixes the names NVRTC would
 * otherwise make up per compile (anonymous namespaces in CUTLASS and
 * CCCL), so that one translation unit always gives the same bytes (with
 * and without a precompiled header too). */
static int compiler_options(jitk_tu *tu, const jitk_compiler *c)
{
	static const char *const more[] = { "--no-cache", "--frandom-seed=jitk" };
	char **o;
	size_t i;

	if (c->nvrtc_major * 100 + c->nvrtc_minor < 1209)
		return 0;
	if (!(o = realloc(tu->options, (tu->noptions + JITK_ARRAY_SIZE(more)) * sizeof(*o))))
		return jitk__error(JITK_ENOMEM, "out of memory");
	tu->options = o;
	for (i = 0; i < JITK_ARRAY_SIZE(more); i++)
		if (!(o[tu->noptions++] = jitk__strdup(more[i])))
			return jitk__error(JITK_ENOMEM, "out of memory");
	return 0;
}

int jitk__prepare(jitk_tu *tu, uint8_t key[JITK_HASH_SIZE], jitk_variant *v,
		  jitk_compiler *c, size_t inst, jitk_arch arch)
{
	char target[JITK_ARCH_STRLEN];
	size_t fi;
	int rc;

	memset(tu, 0, sizeof(*tu));
	if (inst >= c->specs->ninsts)
		return jitk__error(JITK_ENOENT, "no symbol #%zu", inst);
	if ((rc = jitk__check_target(c, arch)))
		return rc;
	if ((rc = jitk__specialize(v, c->specs, inst, arch)))
		return rc;
	if (!v->available)
		return not_available(v);
	/* The tuning may have asked for an arch-specific target. */
	if ((rc = jitk__check_target(c, v->target)))
		return rc;
	fi = family_index(c, c->specs->insts[inst].sym->fam);
	if ((rc = jitk__tu_make(tu, v, &c->templates[fi])) || (rc = compiler_options(tu, c)) ||
	    (rc = jitk__packages_tu(c->packages, fi, c->specs->fams[fi], &c->templates[fi], tu))) {
		jitk__tu_free(tu);
		return rc;
	}
	jitk__arch_format(target, v->target);
	if ((rc = jitk__cache_key(key, c, tu, target))) {
		jitk__tu_free(tu);
		return rc;
	}
	return 0;
}

static void dump_source(const jitk_compiler *c, const jitk_build *b,
			const jitk_tu *tu)
{
	char arch[JITK_ARCH_STRLEN], *path, *name;
	FILE *f;
	size_t i;

	jitk__arch_format(arch, b->variant.target);
	name = jitk__strdup(c->specs->insts[b->variant.inst].name);
	if (!name)
		return;
	for (i = 0; name[i]; i++)
		if (name[i] == '[' || name[i] == ']' || name[i] == '=' || name[i] == ',' ||
		    name[i] == '/')
			name[i] = '_';
	if (jitk__mkdirs(c->dump_dir, 0755) == 0 &&
	    (path = jitk__asprintf("%s/%s.%s.%.12s.cu", c->dump_dir, name, arch, b->key_hex))) {
		int fd;

		/* not through a link or into a FIFO planted in a shared dump
		 * directory: a regular file of this user, or none */
		if (jitk__output_open(&fd, "the source dump", path, O_TRUNC)) {
			jitk__log(&c->log, JITK_LOG_WARN, "JITK_DUMP_DIR: %s", jitk_error_last()->message);
			jitk__error_clear();
		} else if ((f = fdopen(fd, "w"))) {
			fputs(tu->source, f);
			fprintf(f, "\n// options:");
			for (i = 0; i < tu->noptions; i++)
				fprintf(f, " %s", tu->options[i]);
			fprintf(f, "\n// name-expression %s\n", tu->name_expr);
			fclose(f);
		} else {
			close(fd);
		}
		free(path);
	}
	free(name);
}

/* The first "error" line of an NVRTC log, for the one-line message. */
static void first_error(char *out, size_t n, const char *log)
{
	const char *p = log ? strstr(log, "error") : NULL;
	const char *start = p, *eol;

	out[0] = '\0';
	if (!p)
		return;
	while (start > log && start[-1] != '\n')
		start--;
	eol = strchr(p, '\n');
	snprintf(out, n, "%.*s", (int)(eol ? eol - start : (long)strlen(start)), start);
}

#define WARNINGS_SHOWN 8

/* "x.cuh(12): warning #177-D: ...", "nvrtc: warning: ...", "ptxas warning :
 * ..."; not the excerpts (indented) nor the "Remark: The warnings can be
 * suppressed..." line. */
static int is_warning_line(const char *p, size_t len)
{
	/* NVRTC's notes about the precompiled headers jitk asked for (a #line
	 * after the package includes, a PCH for other options) say nothing
	 * about the kernel: debug level only. */
	if (memmem(p, len, "#20283-D", 8) || memmem(p, len, "#629-D", 6))
		return 0;
	return len && !isspace((unsigned char)*p) &&
	       (memmem(p, len, ": warning", 9) || memmem(p, len, "ptxas warning", 13) ||
		(len >= 7 && !strncmp(p, "warning", 7)));
}

/* NVRTC warnings of a compile that succeeded: each warning line at warn
 * level (the first WARNINGS_SHOWN, then a count), the whole log at debug. */
static void log_compile_log(const jitk_compiler *c, const char *what, const char *log)
{
	const char *p = log;
	size_t warnings = 0;

	while (p && *p) {
		const char *eol = strchr(p, '\n');
		int len = (int)(eol ? eol - p : (long)strlen(p));

		if (is_warning_line(p, (size_t)len) && ++warnings <= WARNINGS_SHOWN)
			jitk__log(&c->log, JITK_LOG_WARN, "%s: %.*s", what, len, p);
		if (len)
			jitk__log(&c->log, JITK_LOG_DEBUG, "%s: nvrtc: %.*s", what, len, p);
		p = eol ? eol + 1 : NULL;
	}
	if (warnings > WARNINGS_SHOWN)
		jitk__log(&c->log, JITK_LOG_WARN, "%s: %zu more NVRTC warnings (JITK_LOG=debug shows the log)",
			  what, warnings - WARNINGS_SHOWN);
}

/* What NVRTC is given for tu: its options, the packages' search
 * directories (the only ones NVRTC has), what flags add. */
typedef struct {
	const char **v;
	size_t n;
	char **owned;
	size_t nowned;
} nvrtc_argv;

static void argv_free(nvrtc_argv *a)
{
	size_t i;

	for (i = 0; i < a->nowned; i++)
		free(a->owned[i]);
	free(a->owned);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

static int argv_own(nvrtc_argv *a, char *s)
{
	if (!s)
		return jitk__error(JITK_ENOMEM, "out of memory");
	a->owned[a->nowned++] = s;
	a->v[a->n++] = s;
	return 0;
}

#define ARGV_EXTRA 8 /* what flags and a PCH may add */

static int argv_make(nvrtc_argv *a, const jitk_tu *tu, unsigned flags)
{
	size_t i;
	int rc;

	memset(a, 0, sizeof(*a));
	a->v = calloc(tu->noptions + tu->nincludes + ARGV_EXTRA, sizeof(*a->v));
	a->owned = calloc(tu->nincludes + ARGV_EXTRA, sizeof(*a->owned));
	if (!a->v || !a->owned) {
		argv_free(a);
		return jitk__error(JITK_ENOMEM, "out of memory");
	}
	for (i = 0; i < tu->noptions; i++)
		a->v[a->n++] = tu->options[i];
	for (i = 0; i < tu->nincludes; i++)
		if ((rc = argv_own(a, jitk__asprintf("--include-path=%s", tu->includes[i])))) {
			argv_free(a);
			return rc;
		}
	if (flags & JITK_BUILD_PTXAS_INFO)
		a->v[a->n++] = "--ptxas-options=-v";
	return 0;
}

/* NVRTC's automatic precompiled headers (12.8+), for the families with
 * header packages: the package includes come first in the translation
 * unit, so the PCH NVRTC makes of them serves every instance of the
 * family that this process compiles later (headers parsed once: a CuTe
 * kernel's 1.9 s became 0.3 s, docs/performance.md). The PCH files go
 * into the writable cache's v1/pch/<pid>.<n>/<family>, never /tmp, and
 * are removed with the compiler. With --frandom-seed the image is the
 * same bytes with and without a PCH (tests/test_packages.c checks), which
 * is why neither -pch nor its directory is in the key. NVRTC's PCH heap
 * is one per process: PCH compiles take turns, and the heap grows when a
 * compile says it was too small (the next one makes the PCH). */
#define PCH_HEAP_FIRST (1ull << 30)
#define PCH_HEAP_MAX (8ull << 30)

static pthread_mutex_t pch_process_mu = PTHREAD_MUTEX_INITIALIZER;

/* "--pch-dir=DIR" for family fi when this compile should use a PCH, else
 * NULL (and nothing is an error: without one it only takes longer). */
static char *pch_option(jitk_compiler *c, size_t fi)
{
	const spec_family *f = c->specs->fams[fi];
	char *dir = NULL, *opt = NULL;

	if (!f->nincludes || !c->pch_mode || !jitk__nvrtc_pch_available() ||
	    (c->pch_mode < 0 && (atomic_load(&c->fam_pch[fi].compiles) == 0 ||
				 atomic_load(&c->fam_pch[fi].off))))
		return NULL;
	pthread_mutex_lock(&c->pch_mu);
	if (!c->pch_dir && jitk__cache_pch_dir(c->cache, &c->pch_dir))
		c->pch_dir = NULL;
	if (c->pch_dir && (dir = jitk__asprintf("%s/%zu", c->pch_dir, fi)) &&
	    (!mkdir(dir, 0700) || errno == EEXIST))
		opt = jitk__asprintf("--pch-dir=%s", dir);
	pthread_mutex_unlock(&c->pch_mu);
	free(dir);
	return opt;
}

/* A compile that used a PCH and took at least this share of the family's
 * first compile without one: the PCH does not pay for that family (the
 * headers are a small part of its compile: a CUTLASS GEMM measured 1.0x,
 * a CuTe copy kernel 0.2-0.3x; docs/performance.md, "Header packages") */
#define PCH_PAYS 0.8
/* A family whose first compile takes this much CPU time (ms) is not
 * spending it parsing: the heaviest headers jitk has seen (CuTe's, 300 MB
 * of PCH heap) parse in about 1 s of CPU, and making a PCH of a CUTLASS
 * GEMM's includes took 70 s more and then failed ("unable to obtain
 * mapped memory"), so such a family never makes one. CPU time, not wall:
 * what a compile costs, however loaded the machine */
#define PCH_LONG_MS 10000.0

/* The default mode (pch_mode -1) turns the PCH of a family that can have
 * one off for the rest of this compiler's life, saying why once. */
static void pch_off(jitk_compiler *c, size_t fi, const char *name, const char *why)
{
	int was = 0;

	if (c->pch_mode < 0 && c->specs->fams[fi]->nincludes && jitk__nvrtc_pch_available() &&
	    atomic_compare_exchange_strong(&c->fam_pch[fi].off, &was, 1))
		jitk__log(&c->log, JITK_LOG_INFO, "%s: %s: family %s compiles without a precompiled "
			  "header from now on", name, why, c->specs->fams[fi]->name);
}

/* What a compile shows of the family's PCH (in this thread's CPU time):
 * the first compile without one is the yardstick; a compile that used one
 * (and made none) is held to it. */
static void pch_learn(jitk_compiler *c, size_t fi, const jitk_compiled *out, int with_pch,
		      const char *name)
{
	jitk_family_pch *fp = &c->fam_pch[fi];
	unsigned long long us = (unsigned long long)(out->cpu_ms * 1000.0), plain = 0;
	char why[200];

	if (!with_pch) {
		if (!atomic_compare_exchange_strong(&fp->plain_us, &plain, us ? us : 1) ||
		    out->cpu_ms < PCH_LONG_MS)
			return;
		snprintf(why, sizeof why, "its first compile took %.1f s of CPU, of which a "
			 "precompiled header could save only the parse of the headers",
			 out->cpu_ms / 1e3);
		pch_off(c, fi, name, why);
		return;
	}
	plain = atomic_load(&fp->plain_us);
	if (out->pch != JITK_PCH_NONE || !plain || (double)us < PCH_PAYS * (double)plain)
		return;
	snprintf(why, sizeof why, "a compile with its precompiled header took %.2fx the CPU time "
		 "of the family's first compile without (%.1f s, %.1f s)", (double)us / (double)plain,
		 us / 1e6, plain / 1e6);
	pch_off(c, fi, name, why);
}

static void pch_after(jitk_compiler *c, size_t fi, const jitk_compiled *out, const char *name)
{
	if (out->pch == JITK_PCH_CREATED) {
		jitk__log(&c->log, JITK_LOG_INFO, "%s: NVRTC made a precompiled header of its "
			  "package includes", name);
	} else if (out->pch == JITK_PCH_HEAP_EXHAUSTED && out->pch_heap_required < PCH_HEAP_MAX) {
		size_t want = out->pch_heap_required + out->pch_heap_required / 4;

		jitk__log(&c->log, JITK_LOG_INFO, "%s: NVRTC's PCH heap is too small (%zu MB wanted); "
			  "%zu MB from the next compile", name, out->pch_heap_required >> 20, want >> 20);
		(void)jitk__nvrtc_pch_heap(want);
	} else if (out->pch == JITK_PCH_HEAP_EXHAUSTED || out->pch == JITK_PCH_FAILED) {
		/* every later compile would try to make it again, at a cost */
		pch_off(c, fi, name, "NVRTC could not make its precompiled header");
	}
}

static int compile_now(jitk_build *b, jitk_compiler *c, const jitk_tu *tu,
		       unsigned flags)
{
	const char *exprs[2] = { tu->name_expr, tu->builder_expr };
	const char *name = c->specs->insts[b->variant.inst].name, *why;
	jitk_compiled out;
	char arch[JITK_ARCH_STRLEN], params[256], first[400], *what;
	size_t fi = family_index(c, c->specs->insts[b->variant.inst].sym->fam);
	nvrtc_argv argv;
	char *pch;
	int rc, with_pch = 1, given;

again:
	if ((rc = argv_make(&argv, tu, flags)))
		return rc;
	if ((pch = with_pch ? pch_option(c, fi) : NULL)) {
		pthread_mutex_lock(&pch_process_mu);
		/* another thread may have turned it off while this one waited */
		if (c->pch_mode < 0 && atomic_load(&c->fam_pch[fi].off)) {
			pthread_mutex_unlock(&pch_process_mu);
			free(pch);
			pch = NULL;
		}
	}
	if (pch) {
		/* NVRTC's notes on the PCH (made, used, a #line after the
		 * package includes, one for other options) are not the
		 * kernel's diagnostics: the log stays what it is without */
		argv.v[argv.n++] = "-pch";
		argv.v[argv.n++] = "--pch-messages=false";
		argv.v[argv.n++] = "--pch-verbose=false";
		argv.v[argv.n++] = "--diag-suppress=20283,629";
		argv_own(&argv, pch);
		(void)jitk__nvrtc_pch_heap(PCH_HEAP_FIRST);
	}
	jitk__arch_format(arch, b->variant.target);
	jitk__range_push("compile %s for %s", name, arch);
	rc = jitk__nvrtc_compile(&out, tu->source, "jitk-instantiation.cu", argv.v, argv.n, exprs,
				 tu->builder_expr ? 2 : 1, b->variant.target.kind == 'c');
	if ((given = pch != NULL)) {
		pch_after(c, fi, &out, name);
		pthread_mutex_unlock(&pch_process_mu);
	}
	jitk__range_pop();
	argv_free(&argv); /* and pch with it */
	/* NVRTC cannot always map a precompiled header where it was made
	 * ("catastrophic error: unable to obtain mapped memory", seen making
	 * one of a CUTLASS GEMM's includes, in one process or several): the
	 * PCH is only a speed-up, so such a compile is made once more
	 * without it. */
	if (rc == JITK_ECOMPILE && given && out.log && strstr(out.log, "catastrophic error")) {
		/* the cause ("catastrophic error: ..."), else the summary */
		const char *cat = strstr(out.log, "catastrophic error:");

		if (!cat)
			cat = strstr(out.log, "catastrophic error");

		jitk__log(&c->log, JITK_LOG_WARN, "%s: NVRTC failed with its precompiled header "
			  "(%.*s); compiling without it", name, (int)strcspn(cat, "\n"), cat);
		/* and not again: each such failure cost a compile (13 of 15
		 * GEMM compiles of one precompile failed so, one after another) */
		pch_off(c, fi, name, "NVRTC failed with its precompiled header");
		jitk__compiled_free(&out);
		with_pch = 0;
		goto again;
	}
	if (!rc) {
		atomic_fetch_add(&c->fam_pch[fi].compiles, 1);
		pch_learn(c, fi, &out, given, name);
	}
	jitk__variant_params(&b->variant, params, sizeof(params));
	if (rc) {
		first_error(first, sizeof(first), out.log);
		if (rc == JITK_ECOMPILE)
			rc = jitk__error_detail(JITK_ECOMPILE, out.log ? out.log : "",
						"compiling %s (%s) for %s failed%s%s", name, params,
						arch, *first ? ": " : "", first);
		jitk__compiled_free(&out);
		return rc;
	}
	/* Whatever the options did, only a cubin (or PTX) for this target with
	 * the kernel in it is published or returned. */
	if ((why = jitk__image_problem(out.image, out.size, out.is_ptx, b->variant.target,
				       (const char *const *)out.lowered, out.nlowered))) {
		rc = jitk__error_detail(JITK_ECOMPILE, out.log ? out.log : "",
					"compiling %s (%s) for %s made no usable %s: %s", name, params,
					arch, b->variant.target.kind == 'c' ? "PTX" : "cubin", why);
		jitk__compiled_free(&out);
		return rc;
	}
	what = jitk__asprintf("compiling %s (%s) for %s", name, params, arch);
	if (what && out.log)
		log_compile_log(c, what, out.log);
	free(what);
	atomic_fetch_add(&c->compiles, 1);
	atomic_fetch_add(&c->compile_us, (unsigned long long)(out.ms * 1000.0));
	b->compile_ms = out.ms;
	b->log = out.log;
	out.log = NULL;
	memcpy(b->entry.target, arch, sizeof(b->entry.target));
	b->entry.is_ptx = out.is_ptx;
	b->entry.image = out.image;
	b->entry.size = out.size;
	b->entry.names = out.lowered;
	b->entry.nnames = out.nlowered;
	out.image = NULL;
	out.lowered = NULL;
	out.nlowered = 0;
	jitk__compiled_free(&out);
	jitk__log(&c->log, JITK_LOG_INFO, "compiled %s for %s in %.1f ms", name, arch,
		  b->compile_ms);
	return 0;
}

static unsigned seal_flags(const jitk_compiler *c)
{
	int seal = atomic_load(&c->seal);

	return seal == JITK_SEAL_ERROR ? JITK_BUILD_SEAL_ERROR
	       : seal == JITK_SEAL_WARN ? JITK_BUILD_SEAL_WARN
					: 0;
}

const char *jitk__compile_refused(const jitk_compiler *c, unsigned flags)
{
	if (c->no_compile)
		return "compiling is disabled (JITK_NO_COMPILE)";
	if ((flags | seal_flags(c)) & JITK_BUILD_SEAL_ERROR)
		return "the runtime is sealed";
	return NULL;
}

/* Why a build is about to compile, as it really is (what the messages
 * of a refused or sealed compile say). */
enum { MISS_PLAIN, MISS_CACHE_REJECT, MISS_REMOTE_REJECT };

static const char *miss_reason(const jitk_compiler *c, unsigned flags, int miss)
{
	if (flags & JITK_BUILD_FORCE)
		return "in the cache, but the driver rejected its image";
	if (c->force_compile)
		return "not looked up in the cache (force_compile, JITK_FORCE_COMPILE=1, ignores it)";
	if (miss == MISS_REMOTE_REJECT)
		return "in the remote, but its object was rejected";
	if (miss == MISS_CACHE_REJECT)
		return "in the cache, but its entry was rejected";
	return c->remote ? "not in the cache or the remote" : "not in the cache";
}

/* Whether a miss may compile: not with JITK_NO_COMPILE, nor in a runtime
 * sealed with JITK_SEAL_ERROR; a runtime sealed with JITK_SEAL_WARN logs
 * it. The message names symbol, instance, architecture and the full key,
 * which jitk precompile --manifest or a cache listing can be checked
 * against, and why it would compile. */
static int compile_allowed(const jitk_compiler *c, const jitk_build *b, const char *target,
			   unsigned flags, int miss)
{
	const spec_instance *in = &c->specs->insts[b->variant.inst];
	const char *why = miss_reason(c, flags, miss);
	char arch[JITK_ARCH_STRLEN];

	if (c->no_compile)
		return jitk__error(JITK_ENOCOMPILE,
				   "%s for %s is %s (key %.16s...) and compiling is disabled (JITK_NO_COMPILE)",
				   in->name, target, why, b->key_hex);
	if (!(flags & (JITK_BUILD_SEAL_WARN | JITK_BUILD_SEAL_ERROR)))
		return 0;
	jitk__arch_format(arch, b->variant.arch);
	if (flags & JITK_BUILD_SEAL_ERROR)
		return jitk__error(JITK_ENOCOMPILE,
				   "sealed runtime: %s (symbol %s) on %s is %s (target %s, key %s); "
				   "compiling refused, nothing launched",
				   in->name, in->sym->name, arch, why, target, b->key_hex);
	jitk__log(&c->log, JITK_LOG_WARN, "sealed runtime: compiling %s (symbol %s) on %s: %s (target %s, key %s)",
		  in->name, in->sym->name, arch, why, target, b->key_hex);
	return 0;
}


/* ---------------------------------------------------------- the tiers */

/* One (instance, target) asked of the tiers: its variant, translation
 * unit and key, made once (jitk__prepare) and used for every tier, the
 * compile and the publish. */
typedef struct {
	jitk_variant variant;
	jitk_tu tu;
	jitk_tier_ask ask;
	int made;
} request;

static int request_make(request *r, jitk_compiler *c, size_t inst, jitk_arch arch,
			unsigned flags)
{
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = jitk__prepare(&r->tu, r->ask.key, &r->variant, c, inst, arch)))
		return rc;
	jitk__hex(r->ask.key_hex, r->ask.key, JITK_HASH_SIZE);
	jitk__arch_format(r->ask.target, r->variant.target);
	r->ask.name = c->specs->insts[inst].name;
	r->ask.no_compile = jitk__compile_refused(c, flags);
	r->made = 1;
	return 0;
}

static void request_free(request *r)
{
	if (r->made)
		jitk__tu_free(&r->tu);
	r->made = 0;
}

/* A hit: b holds it; the writable tiers before the one that had it take
 * it too (a remote object lands in the cache). A failure to publish is
 * the tier's to warn about; the image is used from memory. */
static void serve(jitk_build *b, jitk_compiler *c, request *r, size_t at, jitk_cache_entry *e)
{
	size_t i;

	b->entry = *e;
	b->origin = (jitk_origin)c->tiers[at]->ops->origin;
	for (i = 0; i < at; i++)
		if (c->tiers[i]->ops->put && c->tiers[i]->ops->put(c->tiers[i], &r->ask, &b->entry))
			jitk__error_clear();
}

/* Walk the tiers for r, in order: each one's get (not for the local
 * tiers when `looked`: they were just read for this key, nor under
 * `force`), and, where a compile may follow (claims), after a miss its
 * claim: the writable cache's per-key lock with a look again, the
 * remote's lease or the wait for its holder's upload (not under force).
 * What each claim took is in held[], for walk_release. JITK_OK with b
 * filled, else JITK_ENOENT. */
static int walk(jitk_build *b, jitk_compiler *c, request *r, int looked, int force, int claims,
		long *held)
{
	jitk_cache_entry e;
	size_t i;

	for (i = 0; i < c->ntiers; i++) {
		jitk_tier *t = c->tiers[i];
		unsigned rejects = r->ask.rejects + r->ask.remote_rejects;
		int asked = !force && !(looked && t->ops->local);

		held[i] = -1;
		if (asked && !t->ops->get(t, &r->ask, &e)) {
			serve(b, c, r, i, &e);
			return JITK_OK;
		}
		/* a look again after a plain miss only: a bad entry there
		 * would be warned about twice */
		if (claims && t->ops->claim && !(force && !t->ops->local) &&
		    !t->ops->claim(t, &r->ask,
				   !force && rejects == r->ask.rejects + r->ask.remote_rejects, &e,
				   &held[i])) {
			serve(b, c, r, i, &e);
			return JITK_OK;
		}
	}
	return JITK_ENOENT;
}

static void walk_release(jitk_compiler *c, request *r, const long *held)
{
	size_t i;

	for (i = c->ntiers; i-- > 0;)
		if (held[i] >= 0)
			c->tiers[i]->ops->release(c->tiers[i], &r->ask, held[i]);
}

/* The compiled image into every tier that takes one (signed first, where
 * the compiler signs). JITK_ORIGIN_MEMORY when a local tier failed to
 * take it (warned: the image is used from memory). */
static jitk_origin publish(jitk_compiler *c, request *r, jitk_build *b)
{
	jitk_origin origin = JITK_ORIGIN_COMPILED;
	size_t i;

	/* provenance: a builder signs what it publishes, locally and remotely */
	if (c->signer && !jitk__sign_entry(c->signer, &b->entry))
		atomic_fetch_add(&c->signed_entries, 1);
	for (i = 0; i < c->ntiers; i++) {
		jitk_tier *t = c->tiers[i];

		if (t->ops->put && t->ops->put(t, &r->ask, &b->entry) && t->ops->local)
			origin = JITK_ORIGIN_MEMORY;
	}
	jitk__error_clear();
	return origin;
}

/* Header packages are hashed once per compiler: before a compile, their

 * trees are walked again, so that an edit since then gives a new key
 * instead of a new image under the old one (*again: make the key again).
 * After it, once more: an image compiled while a header changed is used
 * from memory, never published. */
static int packages_before(jitk_compiler *c, size_t inst, int *again)
{
	const spec_family *f = c->specs->insts[inst].sym->fam;
	int changed = 0, rc = f->nincludes ? jitk__packages_recheck(c->packages, f, &changed) : 0;

	*again = changed;
	if (changed)
		jitk__log(&c->log, JITK_LOG_INFO, "%s: a header package changed since its hash was "
			  "taken; making the key again", c->specs->insts[inst].name);
	return rc;
}

static int packages_moved(jitk_compiler *c, size_t inst)
{
	const spec_family *f = c->specs->insts[inst].sym->fam;
	int changed = 0;

	if (!f->nincludes)
		return 0;
	if (jitk__packages_recheck(c->packages, f, &changed)) {
		jitk__error_clear();
		changed = 1; /* cannot tell: not published */
	}
	if (changed)
		jitk__log(&c->log, JITK_LOG_WARN, "%s: a header package changed while it compiled; "
			  "the image is used from memory, not cached", c->specs->insts[inst].name);
	return changed;
}

/* One build of r (made here unless the caller made it: then the local
 * tiers were read for it already). */
static int build_once(jitk_build *b, jitk_compiler *c, request *r, size_t inst, jitk_arch arch,
		      unsigned flags, int check_packages, int *again)
{
	long held[JITK_MAX_TIERS];
	int use_tiers = !(flags & JITK_BUILD_PTXAS_INFO), looked = r->made, rc = 0;
	int force = c->force_compile || (flags & JITK_BUILD_FORCE);
	unsigned rejects0 = r->ask.rejects;
	size_t i;

	memset(b, 0, sizeof(*b));
	for (i = 0; i < JITK_MAX_TIERS; i++)
		held[i] = -1;
	if (!r->made && (rc = request_make(r, c, inst, arch, flags)))
		return rc;
	r->ask.no_compile = jitk__compile_refused(c, flags);
	b->variant = r->variant;
	memcpy(b->entry.key, r->ask.key, JITK_HASH_SIZE);
	memcpy(b->key_hex, r->ask.key_hex, sizeof(b->key_hex));
	if (c->dump_dir)
		dump_source(c, b, &r->tu);
	/* The seal and JITK_NO_COMPILE are checked where a miss would
	 * compile, after every tier was asked (a process that may not
	 * compile takes neither the lock nor a lease); also for a build
	 * that does not use the tiers. */
	if (use_tiers && !walk(b, c, r, looked, force, !r->ask.no_compile, held))
		goto done;
	if ((rc = compile_allowed(c, b, r->ask.target, flags,
				  r->ask.remote_rejects ? MISS_REMOTE_REJECT
				  : r->ask.rejects      ? MISS_CACHE_REJECT
							: MISS_PLAIN)))
		goto done;
	if (check_packages && (rc = packages_before(c, inst, again)))
		goto done;
	if (*again) {
		rc = JITK_ENOENT;
		goto done;
	}
	if ((rc = compile_now(b, c, &r->tu, flags)))
		goto done;
	b->origin = JITK_ORIGIN_COMPILED;
	if (packages_moved(c, inst))
		b->origin = JITK_ORIGIN_MEMORY;
	else if (use_tiers)
		b->origin = publish(c, r, b);
	jitk__error_clear();
done:
	walk_release(c, r, held);
	b->rejects = r->ask.rejects - rejects0;
	if (rc)
		jitk__build_free(b);
	return rc;
}

static int build_with(jitk_build *b, jitk_compiler *c, request *r, size_t inst, jitk_arch arch,
		      unsigned flags)
{
	int again = 0, tries, rc = 0;

	/* The seal of the runtime that owns c covers every build of c, not
	 * only the runtime's own resolves (jitk_precompile on
	 * jitk_runtime_compiler's compiler too). */
	flags |= seal_flags(c);
	/* A package that keeps changing gets a last try without the check
	 * before (the one after still keeps its image out of the cache); each
	 * try makes the key again. */
	for (tries = 0; tries < 3; tries++) {
		again = 0;
		rc = build_once(b, c, r, inst, arch, flags, tries < 2, &again);
		request_free(r);
		if (!again)
			break;
		jitk__error_clear();
	}
	return rc;
}

int jitk__build(jitk_build *b, jitk_compiler *c, size_t inst, jitk_arch arch,
		unsigned flags)
{
	request r;

	memset(&r, 0, sizeof(r));
	return build_with(b, c, &r, inst, arch, flags);
}

void jitk__build_free(jitk_build *b)
{
	jitk__cache_entry_free(&b->entry);
	free(b->log);
	b->log = NULL;
}

/* ------------------------------------------------- what runs on a GPU */

size_t jitk__run_targets(jitk_arch *out, jitk_run_kind *kinds, size_t max,
			 const jitk_compiler *c, int cc)
{
	size_t n = 0, i;

#define RUN_ADD(a_cc, a_kind, a_suffix, k)                                   \
	do {                                                                   \
		if (n < max) {                                                 \
			out[n].cc = (a_cc);                                    \
			out[n].kind = (a_kind);                                \
			out[n].suffix = (a_suffix);                            \
			kinds[n++] = (k);                                      \
		}                                                              \
	} while (0)
	if (nvrtc_knows(c, cc)) {
		jitk_arch a = { cc, 's', 'a' };

		RUN_ADD(cc, 's', 0, JITK_RUN_EXACT);
		/* an arch-specific image runs on its own SM */
		if (jitk__arch_suffix_ok(a))
			RUN_ADD(cc, 's', 'a', JITK_RUN_EXACT);
	}
	/* c->archs is ascending: walk it down for nearest first */
	for (i = c->narchs; i-- > 0;) {
		jitk_arch f = { c->archs[i], 's', 'f' };

		if (f.cc <= cc && f.cc / 10 == cc / 10 && jitk__arch_suffix_ok(f))
			RUN_ADD(f.cc, 's', 'f', JITK_RUN_FAMILY);
	}
	for (i = c->narchs; i-- > 0;)
		if (c->archs[i] <= cc)
			RUN_ADD(c->archs[i], 'c', 0, JITK_RUN_PTX);
#undef RUN_ADD
	return n;
}

/* One target of the lookup order: its key, then the local tiers. *p says
 * what was found; JITK_OK on a usable hit (b filled), JITK_ENOENT when
 * the target does not serve, an error when the spec cannot be specialized
 * there. r keeps the request (for the build that may follow). */
static int probe_target(jitk_build *b, jitk_compiler *c, request *r, size_t inst, jitk_arch t,
			int cc, jitk_run_probe *p)
{
	jitk_cache_entry e;
	size_t i;
	int rc;

	memset(b, 0, sizeof(*b));
	p->asked = p->target = t;
	p->state = JITK_PROBE_MISSING;
	p->key_hex[0] = '\0';
	rc = request_make(r, c, inst, t, 0);
	if (rc == JITK_EARCH || rc == JITK_EINVAL) {
		/* gated on this target, or its tuning asks for a target NVRTC
		 * lacks (arch_specific where no sm_NNa exists): it cannot serve */
		p->state = rc == JITK_EARCH ? JITK_PROBE_GATED : JITK_PROBE_NO_TARGET;
		jitk__error_clear();
		return JITK_ENOENT;
	}
	if (rc)
		return rc;
	b->variant = r->variant;
	p->target = r->variant.target;
	memcpy(p->key, r->ask.key, JITK_HASH_SIZE);
	memcpy(p->key_hex, r->ask.key_hex, sizeof(p->key_hex));
	if (r->variant.target.suffix == 'a' && r->variant.target.cc != cc) {
		p->state = JITK_PROBE_FOREIGN;
		return JITK_ENOENT;
	}
	jitk__range_push("cache lookup %s for %s", r->ask.name, r->ask.target);
	for (i = 0, rc = JITK_ENOENT; i < c->ntiers && rc; i++)
		if (c->tiers[i]->ops->local && !(rc = c->tiers[i]->ops->get(c->tiers[i], &r->ask, &e)))
			serve(b, c, r, i, &e);
	jitk__range_pop();
	b->rejects = r->ask.rejects;
	if (rc) {
		if (b->rejects)
			p->state = JITK_PROBE_REJECTED;
		return JITK_ENOENT;
	}
	memcpy(b->key_hex, r->ask.key_hex, sizeof(b->key_hex));
	p->state = JITK_PROBE_HIT;
	p->origin = b->origin;
	return JITK_OK;
}

/* jitk__lookup_run; the request of target keep, when it was made, stays
 * in *kept (NULL: none is kept). */
static int lookup_run(jitk_build *b, jitk_compiler *c, size_t inst, int cc,
		      jitk_run_probe *probes, size_t *nprobes, request *kept, jitk_arch keep)
{
	jitk_arch targets[JITK_MAX_RUN_TARGETS], gpu = { cc, 's', 0 }, exact = gpu;
	jitk_run_kind kinds[JITK_MAX_RUN_TARGETS];
	jitk_run_probe own;
	unsigned rejects = 0;
	size_t n, i, k;
	int rc;

	memset(b, 0, sizeof(*b));
	if (nprobes)
		*nprobes = 0;
	if (inst >= c->specs->ninsts)
		return jitk__error(JITK_ENOENT, "no symbol #%zu", inst);
	/* The gates are the GPU's, whatever image would serve it. */
	if ((rc = jitk__specialize(&b->variant, c->specs, inst, gpu)))
		return rc;
	if (!b->variant.available)
		return not_available(&b->variant);
	if (c->force_compile)
		return JITK_ENOENT;
	n = jitk__run_targets(targets, kinds, JITK_MAX_RUN_TARGETS, c, cc);
	for (i = 0, k = 0; i < n; i++) {
		jitk_run_probe *p = probes ? &probes[k] : &own;
		request r;

		/* sm_CCa after sm_CC: the same key when the tuning asks for
		 * arch_specific (sm_CC compiles as sm_CCa) */
		if (i && targets[i].suffix == 'a' && kinds[i] == JITK_RUN_EXACT &&
		    exact.suffix == 'a')
			continue;
		rc = probe_target(b, c, &r, inst, targets[i], cc, p);
		p->kind = kinds[i];
		if (i == 0)
			exact = p->target;
		rejects += b->rejects;
		if (nprobes)
			*nprobes = ++k;
		if (kept && r.made && !kept->made && targets[i].cc == keep.cc &&
		    targets[i].kind == keep.kind && targets[i].suffix == keep.suffix)
			*kept = r;
		else
			request_free(&r);
		if (rc != JITK_ENOENT)
			break;
	}
	if (rc == JITK_ENOENT || n == 0)
		memset(b, 0, sizeof(*b));
	b->rejects = rejects;
	return n ? rc : JITK_ENOENT;
}

int jitk__lookup_run(jitk_build *b, jitk_compiler *c, size_t inst, int cc,
		     jitk_run_probe *probes, size_t *nprobes)
{
	return lookup_run(b, c, inst, cc, probes, nprobes, NULL, (jitk_arch){ 0, 0, 0 });
}

int jitk__resolve_image(jitk_build *b, jitk_compiler *c, size_t inst, int cc, jitk_arch arch,
			unsigned flags)
{
	request r;
	unsigned rejects = 0;
	int rc = JITK_ENOENT;

	memset(&r, 0, sizeof(r));
	if (!(flags & JITK_BUILD_FORCE)) {
		rc = lookup_run(b, c, inst, cc, NULL, NULL, &r, arch);
		rejects = b->rejects;
	}
	if (rc != JITK_ENOENT) {
		request_free(&r);
		return rc;
	}
	rc = build_with(b, c, &r, inst, arch, flags);
	b->rejects += rejects;
	return rc;
}

/* ------------------------------------------------------------- public */

int jitk_precompile(jitk_origin *out_origin, jitk_compiler *c, const char *name,
		    const char *arch)
{
	jitk_build b;
	jitk_arch a;
	size_t inst;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_precompile", "compiler name arch", c, name, arch)))
		return rc;
	if (jitk__arch_parse(&a, arch))
		return jitk__spec_arch_error(arch, strlen(arch));
	if ((rc = jitk__spec_find(c->specs, name, &inst)))
		return rc;
	if ((rc = jitk__build(&b, c, inst, a, 0)))
		return rc;
	if (out_origin)
		*out_origin = b.origin;
	jitk__build_free(&b);
	return JITK_OK;
}

/* The size of each version of jitk_remote_stats (jitk.h, "Output
 * structs"). */
static const size_t remote_stats_sizes[] = { 0, JITK_OUT_END(jitk_remote_stats, lease_wait_ms) };

int jitk_remote_stats_get(jitk_remote_stats *out, const jitk_compiler *compiler)
{
	jitk_remote_stats s = JITK_REMOTE_STATS_INIT;
	int rc;

	if (!out || !compiler)
		return JITK_NULL_ARGS("jitk_remote_stats_get", "out compiler", out, compiler);
	if ((rc = jitk__out_check("jitk_remote_stats", out->version, JITK_REMOTE_STATS_VERSION)))
		return rc;
	if (compiler->remote) {
		jitk_remote_counters *n = jitk__remote_counters(compiler->remote);

		s.hits = atomic_load(&n->hits);
		s.misses = atomic_load(&n->misses);
		s.uploads = atomic_load(&n->uploads);
		s.rejects = atomic_load(&n->rejects);
		s.errors = atomic_load(&n->errors);
		s.ms = (double)atomic_load(&n->us) / 1000.0;
		s.lease_wait_ms = (double)atomic_load(&n->wait_us) / 1000.0;
	}
	if (compiler->lease) {
		jitk_lease_counters *l = jitk__lease_counters(compiler->lease);

		s.lease_taken = atomic_load(&l->taken);
		s.lease_waits = atomic_load(&l->waits);
		s.lease_errors = atomic_load(&l->errors);
	}
	jitk__out_fill(out, &s, remote_stats_sizes);
	return JITK_OK;
}

/* The size of each version of the output structs (jitk.h, "Output
 * structs"). */
static const size_t sign_stats_sizes[] = { 0, JITK_OUT_END(jitk_sign_stats, signing) };

int jitk_sign_stats_get(jitk_sign_stats *out, const jitk_compiler *compiler)
{
	jitk_sign_stats s = JITK_SIGN_STATS_INIT;
	int rc;

	if (!out || !compiler)
		return jitk__error(JITK_EINVAL, "jitk_sign_stats_get: NULL argument");
	if ((rc = jitk__out_check("jitk_sign_stats", out->version, JITK_SIGN_STATS_VERSION)))
		return rc;
	s.signed_entries = atomic_load(&compiler->signed_entries);
	s.signing = compiler->signer != NULL;
	jitk__trust_stats(&s, compiler->trust);
	jitk__out_fill(out, &s, sign_stats_sizes);
	return JITK_OK;
}
