/* admin.c - the public face of the cache's administration and of the
 * small services the jitk command needs (jitk list, targets, sizes,
 * "did you mean"), so that the CLI uses nothing but jitk.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"

/* The size of each version of the output structs (jitk.h, "Output
 * structs"): from the start to the end of that version's last field. */
static const size_t summary_sizes[] = { 0, JITK_OUT_END(jitk_cache_summary, foreign) };
static const size_t clear_sizes[] = { 0, JITK_OUT_END(jitk_clear_result, failed) };
static const size_t prune_sizes[] = { 0, JITK_OUT_END(jitk_prune_result, failed) };

int jitk_cache_stats(jitk_cache_summary *out, const char *dir, int verify,
		     jitk_cache_report_fn report, void *ctx)
{
	jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_cache_stats", "out dir", out, dir)) ||
	    (rc = jitk__out_check("jitk_cache_summary", out->version, JITK_CACHE_SUMMARY_VERSION)))
		return rc;
	rc = jitk__cache_scan(&s, dir, verify, report, ctx);
	jitk__out_fill(out, &s, summary_sizes);
	return rc;
}

int jitk_cache_clear(jitk_clear_result *out, const char *dir)
{
	jitk_clear_result r = JITK_CLEAR_RESULT_INIT;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_cache_clear", "out dir", out, dir)) ||
	    (rc = jitk__out_check("jitk_clear_result", out->version, JITK_CLEAR_RESULT_VERSION)))
		return rc;
	rc = jitk__cache_clear(&r, dir);
	jitk__out_fill(out, &r, clear_sizes);
	return rc;
}

int jitk_cache_prune(jitk_prune_result *out, const char *dir, const char *max_bytes)
{
	jitk_prune_result r = JITK_PRUNE_RESULT_INIT;
	uint64_t bound = 0;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_cache_prune", "out dir", out, dir)) ||
	    (rc = jitk__out_check("jitk_prune_result", out->version, JITK_PRUNE_RESULT_VERSION)))
		return rc;
	if (max_bytes && (jitk__parse_size(&bound, max_bytes) || !bound))
		return jitk__error(JITK_EINVAL, "'%.64s' is not a size (" JITK_SIZE_SYNTAX ")",
				   max_bytes);
	rc = jitk__cache_prune(&r, dir, bound, JITK_TEMP_MAX_AGE_S, JITK_PRUNE_VERIFY);
	jitk__out_fill(out, &r, prune_sizes);
	return rc;
}

int jitk_cache_check_writable(const char *dir)
{
	return jitk__cache_writable(dir);
}

int jitk_parse_size(uint64_t *out, const char *text)
{
	if (!out || !text || jitk__parse_size(out, text))
		return jitk__error(JITK_EINVAL, "'%.64s' is not a size (" JITK_SIZE_SYNTAX ")",
				   text ? text : "(null)");
	return JITK_OK;
}

int jitk_nearest(const char *word, const char *const *cands, size_t n)
{
	int best = -1, bestd;
	size_t i;

	if (!word || (n && !cands))
		return -1;
	bestd = 3 + (int)(strlen(word) / 5);
	for (i = 0; i < n; i++) {
		int d = cands[i] ? jitk__edit_distance(word, cands[i]) : bestd;

		if (d < bestd) {
			bestd = d;
			best = (int)i;
		}
	}
	return best;
}

int jitk_nvrtc_version(int *major, int *minor)
{
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_nvrtc_version", "major minor", major, minor)))
		return rc;
	return jitk__nvrtc_version(major, minor);
}

const char *jitk_compiler_cache_dir(const jitk_compiler *c)
{
	return c ? jitk__cache_top(c->cache) : NULL;
}

int jitk_check_target(const jitk_compiler *c, const char *arch)
{
	jitk_arch a;

	if (!arch)
		return jitk__error(JITK_EINVAL, "jitk_check_target: arch is NULL");
	if (jitk__arch_parse(&a, arch))
		return jitk__spec_arch_error(arch, strlen(arch));
	return c ? jitk__check_target(c, a) : JITK_OK;
}

int jitk_cache_format(void)
{
	return JITK_CACHE_FORMAT;
}

/* The gates that apply to an instance: "sm_89+", "sm_90+", or "-". */
static void gates_text(jbuf *b, const spec_instance *in)
{
	const spec_family *f = in->sym->fam;
	size_t i, start = b->len;

	for (i = 0; i < f->ngates + in->sym->ngates; i++) {
		const spec_gate *g = i < f->ngates ? &f->gates[i] : &in->sym->gates[i - f->ngates];
		const char *sep = b->len > start ? "," : "";

		if (!jitk__spec_cond_holds(&g->when, in->vals))
			continue;
		if (g->arch.min && g->arch.max)
			jitk__jbuf_printf(b, "%ssm_%d..sm_%d", sep, g->arch.min, g->arch.max);
		else if (g->arch.min)
			jitk__jbuf_printf(b, "%ssm_%d+", sep, g->arch.min);
		else
			jitk__jbuf_printf(b, "%s<=sm_%d", sep, g->arch.max);
	}
	if (b->len == start)
		jitk__jbuf_puts(b, "-");
}

int jitk_list(char **out, const jitk_compiler *c, const char *selector)
{
	const spec_set *set;
	size_t *sel = NULL, nsel, i, w = 4;
	jbuf b;
	int rc;

	if ((rc = JITK_NULL_ARGS("jitk_list", "out compiler", out, c)))
		return rc;
	*out = NULL;
	set = c->specs;
	if (selector) {
		if ((rc = jitk_select(&sel, &nsel, c, selector)))
			return rc;
	} else {
		nsel = set->ninsts;
	}
	for (i = 0; i < nsel; i++) {
		size_t len = strlen(set->insts[sel ? sel[i] : i].name);

		if (len > w)
			w = len;
	}
	jitk__jbuf_init(&b);
	jitk__jbuf_printf(&b, "%-*s  %-18s %-54s %s\n", (int)w, "NAME", "FAMILY", "PARAMETERS",
			  "GATES");
	for (i = 0; i < nsel; i++) {
		const spec_instance *in = &set->insts[sel ? sel[i] : i];
		const spec_family *f = in->sym->fam;
		jbuf params, gates;
		size_t p;

		jitk__jbuf_init(&params);
		jitk__jbuf_init(&gates);
		for (p = 0; p < f->nparams; p++) {
			char tmp[32];

			jitk__jbuf_printf(&params, "%s%s=%s", p ? " " : "", f->params[p].name,
					  jitk__spec_value_text(&f->params[p], in->vals[p], tmp));
		}
		if (!f->nparams)
			jitk__jbuf_puts(&params, "-");
		gates_text(&gates, in);
		jitk__jbuf_printf(&b, "%-*s  %-18s %-54s %s\n", (int)w, in->name, f->name,
				  params.data ? params.data : "", gates.data ? gates.data : "");
		if (params.oom || gates.oom)
			b.oom = 1;
		jitk__jbuf_free(&params);
		jitk__jbuf_free(&gates);
	}
	free(sel);
	*out = jitk__jbuf_detach(&b);
	return *out ? JITK_OK : jitk__error(JITK_ENOMEM, "out of memory");
}
