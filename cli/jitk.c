/* jitk - command-line front end: list, explain, source, precompile,
 * cache, bench. Exit status: 0 ok, 1 failure, 2 usage. */
#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "build/compile.h"

static const char *prog = "jitk";

static const char usage_main[] =
	"usage: jitk [--version] [--help] COMMAND [ARGS]\n"
	"\n"
	"  list                      every symbol, its family, parameters and gates\n"
	"  explain NAME --arch ARCH  which variant runs on ARCH, or the fallback and why\n"
	"  source NAME --arch ARCH   the translation unit (--options: NVRTC options)\n"
	"  precompile [NAME...]      compile symbols x architectures into a cache\n"
	"  cache stats|verify|clear|prune\n"
	"                            inspect or maintain a cache directory\n"
	"  bench                     kernel and JIT timings on this machine's GPU\n"
	"\n"
	"Common options: --specs DIR[:DIR] (default $JITK_SPECS, else the installed\n"
	"specs), --cache DIR (default $JITK_CACHE_DIR, $XDG_CACHE_HOME/jitk,\n"
	"~/.cache/jitk). 'jitk COMMAND --help' says more.\n";

static const char usage_list[] =
	"usage: jitk list [--specs DIR]\n"
	"\n"
	"Print every symbol instance: name, family, parameter values and the\n"
	"architecture gates that apply to it.\n";

static const char usage_explain[] =
	"usage: jitk explain NAME --arch ARCH [--specs DIR]\n"
	"\n"
	"Say whether NAME runs on ARCH (sm_90, sm_100a, compute_90...) and with\n"
	"which tuning, or which fallback runs instead and why. Needs no GPU.\n"
	"Exit 0 when NAME or its fallback runs there, 1 when neither can.\n";

static const char usage_source[] =
	"usage: jitk source NAME --arch ARCH [--options] [--specs DIR]\n"
	"\n"
	"Print the exact translation unit jitk compiles for NAME on ARCH. With\n"
	"--options, print instead the NVRTC options, one per line, then one line\n"
	"'name-expression EXPR' per name expression: enough to reproduce the\n"
	"compile with NVRTC alone.\n";

static const char usage_precompile[] =
	"usage: jitk precompile [NAME...] [--arch LIST] [--cache DIR] [--specs DIR]\n"
	"                       [-j N]\n"
	"\n"
	"Compile the named symbols (default: all) for every architecture in LIST\n"
	"(comma-separated; default sm_80,sm_86,sm_89,sm_90,sm_100,sm_120) into the\n"
	"cache, N at a time (default: the number of cores). Combinations a gate\n"
	"forbids are skipped. Ends with one summary line; exit 1 if any failed.\n"
	"Needs no GPU.\n";

static const char usage_cache[] =
	"usage: jitk cache stats|verify|clear|prune [--cache DIR] [--max-bytes SIZE]\n"
	"\n"
	"  stats   entries, bytes, temporary, lock and foreign files\n"
	"  verify  check every entry; name each bad one and each foreign file;\n"
	"          exit 1 if an entry is bad\n"
	"  clear   remove every entry, temporary file and bad entry\n"
	"  prune   remove the bad entries verify names, temporary files older than\n"
	"          an hour, and the least recently used entries beyond --max-bytes\n"
	"          (default $JITK_CACHE_MAX_BYTES; no bound when neither is set).\n"
	"          SIZE: bytes, or with K, M, G or T (powers of 1024): 512M, 10G\n"
	"\n"
	"Only files of jitk's naming scheme in the directories jitk makes are\n"
	"removed; other (foreign) files are counted and left alone, and symbolic\n"
	"links are never followed. A missing cache, or one whose directories are\n"
	"not this user's, is refused (exit 1).\n";

static void die_usage(const char *text)
{
	fputs(text, stderr);
	exit(2);
}

static void log_stderr(void *payload, jitk_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };

	(void)payload;
	fprintf(stderr, "%s: %s: %s\n", prog, names[level], msg);
}

static int fail_last(void)
{
	const jitk_error *e = jitk_error_last();

	const char *detail = e->detail ? e->detail : "";
	size_t first = strcspn(detail, "\n"), mlen = strlen(e->message);

	fprintf(stderr, "%s: %s\n", prog, e->message);
	/* A compile failure's message ends with the log's first error line:
	 * print the log from the line after it. */
	if (first && first <= mlen && !strncmp(e->message + mlen - first, detail, first))
		detail += first + (detail[first] == '\n');
	if (*detail) {
		fputs(detail, stderr);
		if (detail[strlen(detail) - 1] != '\n')
			fputc('\n', stderr);
	}
	return 1;
}

/* --------------------------------------------------------------- options */

typedef struct {
	const char *specs;
	const char *cache;
	const char *arch;
	const char *max_bytes;
	int options;
	int jobs;
	int help;
	const char *pos[256];
	int npos;
} cli_opts;

/* Parse the options every command shares; unknown ones are usage errors. */
static void parse_opts(cli_opts *o, int argc, char **argv, const char *usage,
		       const char *allowed)
{
	int i;

	memset(o, 0, sizeof(*o));
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		char name[32];
		const char *eq;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			o->help = 1;
			continue;
		}
		if (a[0] != '-') {
			if (o->npos == (int)JITK_ARRAY_SIZE(o->pos))
				die_usage(usage);
			o->pos[o->npos++] = a;
			continue;
		}
		eq = strchr(a, '=');
		snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - a : (long)strlen(a)), a);
		if (!strstr(allowed, name) || name[0] != '-' || strlen(name) < 2) {
			fprintf(stderr, "%s: unknown option '%s'\n", prog, a);
			die_usage(usage);
		}
		if (!strcmp(name, "--options")) {
			o->options = 1;
			continue;
		}
		val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
		if (!val) {
			fprintf(stderr, "%s: option '%s' needs a value\n", prog, name);
			die_usage(usage);
		}
		if (!strcmp(name, "--specs"))
			o->specs = val;
		else if (!strcmp(name, "--cache"))
			o->cache = val;
		else if (!strcmp(name, "--arch"))
			o->arch = val;
		else if (!strcmp(name, "--max-bytes"))
			o->max_bytes = val;
		else if (!strcmp(name, "-j") || !strcmp(name, "--jobs"))
			o->jobs = atoi(val);
		else
			die_usage(usage);
	}
	if (o->help) {
		fputs(usage, stdout);
		exit(0);
	}
}

static jitk_compiler *open_compiler(const cli_opts *o)
{
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;

	co.specs = o->specs;
	co.cache_dir = o->cache;
	co.log = log_stderr;
	if (jitk_compiler_new(&c, &co)) {
		fail_last();
		exit(1);
	}
	return c;
}

/* ------------------------------------------------------------------ list */

static void gates_text(char *buf, size_t n, const spec_instance *in)
{
	const spec_family *f = in->sym->fam;
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < f->ngates + in->sym->ngates && used < n; i++) {
		const spec_gate *g = i < f->ngates ? &f->gates[i] : &in->sym->gates[i - f->ngates];
		int k;

		if (!jitk__spec_cond_holds(&g->when, in->vals))
			continue;
		if (g->arch.min && g->arch.max)
			k = snprintf(buf + used, n - used, "%ssm_%d..sm_%d", used ? " " : "",
				     g->arch.min, g->arch.max);
		else if (g->arch.min)
			k = snprintf(buf + used, n - used, "%ssm_%d+", used ? " " : "", g->arch.min);
		else
			k = snprintf(buf + used, n - used, "%s<=sm_%d", used ? " " : "", g->arch.max);
		if (k < 0)
			break;
		used += (size_t)k;
	}
	if (!used)
		snprintf(buf, n, "-");
}

static int cmd_list(int argc, char **argv)
{
	cli_opts o;
	jitk_compiler *c;
	size_t i, w = 4;

	parse_opts(&o, argc, argv, usage_list, "--specs");
	if (o.npos)
		die_usage(usage_list);
	c = open_compiler(&o);
	for (i = 0; i < c->specs->ninsts; i++)
		if (strlen(c->specs->insts[i].name) > w)
			w = strlen(c->specs->insts[i].name);
	printf("%-*s  %-18s %-54s %s\n", (int)w, "NAME", "FAMILY", "PARAMETERS", "GATES");
	for (i = 0; i < c->specs->ninsts; i++) {
		const spec_instance *in = &c->specs->insts[i];
		const spec_family *f = in->sym->fam;
		char params[256], gates[256];
		size_t p, used = 0;

		params[0] = '\0';
		for (p = 0; p < f->nparams && used < sizeof(params); p++) {
			char tmp[32];
			int k = snprintf(params + used, sizeof(params) - used, "%s%s=%s",
					 p ? " " : "", f->params[p].name,
					 jitk__spec_value_text(&f->params[p], in->vals[p], tmp));

			if (k < 0)
				break;
			used += (size_t)k;
		}
		if (!f->nparams)
			snprintf(params, sizeof(params), "-");
		gates_text(gates, sizeof(gates), in);
		printf("%-*s  %-18s %-54s %s\n", (int)w, in->name, f->name, params, gates);
	}
	jitk_compiler_free(c);
	return 0;
}

/* ------------------------------------------------------- explain, source */

static int cmd_explain(int argc, char **argv)
{
	cli_opts o;
	jitk_compiler *c;
	char *text = NULL;
	int rc;

	parse_opts(&o, argc, argv, usage_explain, "--specs --arch");
	if (o.npos != 1 || !o.arch)
		die_usage(usage_explain);
	c = open_compiler(&o);
	rc = jitk_explain(&text, c, o.pos[0], o.arch);
	if (text)
		fputs(text, stdout);
	if (rc && rc != JITK_EARCH)
		fail_last();
	free(text);
	jitk_compiler_free(c);
	return rc ? 1 : 0;
}

static int cmd_source(int argc, char **argv)
{
	cli_opts o;
	jitk_compiler *c;
	jitk_tu tu;
	jitk_variant v;
	jitk_arch a;
	uint8_t key[JITK_HASH_SIZE];
	size_t inst, i;
	int rc;

	parse_opts(&o, argc, argv, usage_source, "--specs --arch --options");
	if (o.npos != 1 || !o.arch)
		die_usage(usage_source);
	if (jitk__arch_parse(&a, o.arch)) {
		fprintf(stderr, "%s: '%s' is not an architecture (sm_90, sm_100a, compute_90...)\n",
			prog, o.arch);
		return 2;
	}
	c = open_compiler(&o);
	rc = jitk__spec_find(c->specs, o.pos[0], &inst);
	if (!rc)
		rc = jitk__prepare(&tu, key, &v, c, inst, a);
	if (rc) {
		fail_last();
		jitk_compiler_free(c);
		return 1;
	}
	if (o.options) {
		for (i = 0; i < tu.noptions; i++)
			printf("%s\n", tu.options[i]);
		printf("name-expression %s\n", tu.name_expr);
	} else {
		fputs(tu.source, stdout);
	}
	jitk__tu_free(&tu);
	jitk_compiler_free(c);
	return 0;
}

/* ------------------------------------------------------------ precompile */

/* Parallel precompile runs worker processes, not threads: NVRTC compiles
 * one program at a time per process (measured on a 16-core H200 host: 32
 * kernels took 0.78 s on 1 thread and 0.79 s on 16). Workers take items
 * from a counter in shared memory and report one record per item through
 * a pipe (writes under PIPE_BUF are atomic); the parent prints progress. */
typedef struct {
	uint32_t item;
	int32_t rc;
	int32_t origin;
} pre_record;

typedef struct {
	jitk_compiler *c;
	size_t (*items)[2]; /* instance, architecture index */
	size_t nitems;
	jitk_arch *archs;
	atomic_size_t *next; /* shared between processes */
	int fd;              /* write end of the result pipe */
} pre_ctx;

static void pre_worker(pre_ctx *x)
{
	for (;;) {
		size_t i = atomic_fetch_add(x->next, 1);
		pre_record rec;
		jitk_build b;
		ssize_t w;

		if (i >= x->nitems)
			break;
		rec.item = (uint32_t)i;
		rec.origin = 0;
		rec.rc = jitk__build(&b, x->c, x->items[i][0], x->archs[x->items[i][1]], 0);
		if (!rec.rc) {
			rec.origin = b.origin;
			jitk__build_free(&b);
		} else if (rec.rc != JITK_EARCH) {
			fail_last(); /* the message names symbol, variant, arch */
		}
		do
			w = write(x->fd, &rec, sizeof(rec));
		while (w < 0 && errno == EINTR);
	}
}

static int cmd_precompile(int argc, char **argv)
{
	cli_opts o;
	pre_ctx x;
	const char *list;
	char *archs_copy, *tok, *save = NULL;
	size_t narchs = 0, i, j, ninst = 0, *insts, done = 0;
	size_t compiled = 0, cached = 0, failed = 0, gated = 0;
	double t0 = jitk__now_ms();
	long jobs;
	int rc = 0, tty, pipefd[2], nchild = 0;
	pid_t pids[256];

	parse_opts(&o, argc, argv, usage_precompile, "--specs --cache --arch -j --jobs");
	memset(&x, 0, sizeof(x));
	x.c = open_compiler(&o);
	tty = isatty(STDOUT_FILENO);
	list = o.arch ? o.arch : "sm_80,sm_86,sm_89,sm_90,sm_100,sm_120";
	archs_copy = jitk__strdup(list);
	x.archs = calloc(strlen(list) + 1, sizeof(*x.archs));
	insts = calloc(x.c->specs->ninsts + 1, sizeof(*insts));
	if (!archs_copy || !x.archs || !insts) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	for (tok = strtok_r(archs_copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (jitk__arch_parse(&x.archs[narchs], tok)) {
			fprintf(stderr, "%s: '%s' is not an architecture (sm_90, sm_100a, compute_90...)\n",
				prog, tok);
			return 2;
		}
		narchs++;
	}
	if (!narchs)
		die_usage(usage_precompile);
	if (!o.npos) {
		for (i = 0; i < x.c->specs->ninsts; i++)
			insts[ninst++] = i;
	} else {
		for (i = 0; i < (size_t)o.npos; i++) {
			size_t inst;

			if (jitk__spec_find(x.c->specs, o.pos[i], &inst)) {
				fail_last();
				return 1;
			}
			/* A bare symbol name means all its instances. */
			if (!strchr(o.pos[i], '[')) {
				for (j = 0; j < x.c->specs->ninsts; j++)
					if (!strcmp(x.c->specs->insts[j].sym->name, o.pos[i]) &&
					    ninst < x.c->specs->ninsts)
						insts[ninst++] = j;
			} else if (ninst < x.c->specs->ninsts) {
				insts[ninst++] = inst;
			}
		}
	}
	x.nitems = ninst * narchs;
	x.items = calloc(x.nitems ? x.nitems : 1, sizeof(*x.items));
	x.next = mmap(NULL, sizeof(*x.next), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!x.items || x.next == MAP_FAILED || pipe(pipefd)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	atomic_init(x.next, 0);
	for (i = 0; i < ninst; i++)
		for (j = 0; j < narchs; j++) {
			x.items[i * narchs + j][0] = insts[i];
			x.items[i * narchs + j][1] = j;
		}
	jobs = o.jobs > 0 ? o.jobs : sysconf(_SC_NPROCESSORS_ONLN);
	if (jobs < 1)
		jobs = 1;
	if (jobs > 256)
		jobs = 256;
	if ((size_t)jobs > x.nitems)
		jobs = (long)(x.nitems ? x.nitems : 1);
	fflush(stdout);
	fflush(stderr);
	x.fd = pipefd[1];
	for (nchild = 0; nchild < jobs; nchild++) {
		pids[nchild] = fork();
		if (pids[nchild] < 0)
			break;
		if (pids[nchild] == 0) {
			close(pipefd[0]);
			pre_worker(&x);
			_exit(0);
		}
	}
	close(pipefd[1]);
	if (!nchild) { /* no process could be started: do it here */
		x.fd = pipefd[0] = -1;
		fprintf(stderr, "%s: cannot start workers: %s\n", prog, strerror(errno));
		rc = 1;
	}
	while (pipefd[0] >= 0 && done < x.nitems) {
		pre_record rec;
		ssize_t n = read(pipefd[0], &rec, sizeof(rec));
		const char *what;
		char arch[JITK_ARCH_STRLEN];

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(rec))
			break; /* every worker gone */
		done++;
		if (!rec.rc) {
			what = rec.origin == JITK_ORIGIN_COMPILED ? "compiled" : "cached";
			if (rec.origin == JITK_ORIGIN_COMPILED)
				compiled++;
			else
				cached++;
		} else if (rec.rc == JITK_EARCH) {
			what = "gated";
			gated++;
		} else {
			what = "FAILED";
			failed++;
		}
		jitk__arch_format(arch, x.archs[x.items[rec.item][1]]);
		if (tty)
			printf("\r\033[K[%zu/%zu] %-8s %s %s", done, x.nitems, what,
			       x.c->specs->insts[x.items[rec.item][0]].name, arch);
		else
			printf("[%zu/%zu] %-8s %s %s\n", done, x.nitems, what,
			       x.c->specs->insts[x.items[rec.item][0]].name, arch);
		fflush(stdout);
	}
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	for (i = 0; i < (size_t)nchild; i++) {
		int st = 0;

		if (waitpid(pids[i], &st, 0) == pids[i] && (!WIFEXITED(st) || WEXITSTATUS(st)))
			rc = 1;
	}
	if (done < x.nitems) {
		failed += x.nitems - done;
		rc = 1;
	}
	if (tty)
		fputs("\r\033[K", stdout);
	printf("precompiled %zu symbols x %zu architectures (%s) into %s in %.2f s with %d "
	       "processes: %zu compiled, %zu cached, %zu failed, %zu gated\n",
	       ninst, narchs, list, jitk__cache_root(x.c->cache) ? jitk__cache_root(x.c->cache) : "(memory)",
	       (jitk__now_ms() - t0) / 1000.0, nchild, compiled, cached, failed, gated);
	if (failed)
		rc = 1;
	munmap(x.next, sizeof(*x.next));
	free(x.items);
	free(insts);
	free(x.archs);
	free(archs_copy);
	jitk_compiler_free(x.c);
	return rc;
}

/* ----------------------------------------------------------------- cache */

static void report_item(void *ctx, const char *path, const char *problem, int foreign)
{
	(void)ctx;
	printf("%s: %s: %s\n", foreign ? "foreign" : "bad entry", path, problem);
}

/* The size bound of prune: --max-bytes (not a size: a usage error), else
 * $JITK_CACHE_MAX_BYTES (not a size: one warning and no bound, as in the
 * library). */
static uint64_t prune_bound(const cli_opts *o)
{
	const char *v = o->max_bytes ? o->max_bytes : jitk__env("JITK_CACHE_MAX_BYTES");
	uint64_t n;

	if (!v || (!jitk__parse_size(&n, v) && n))
		return v ? n : 0;
	if (o->max_bytes) {
		fprintf(stderr, "%s: --max-bytes: '%s' is not a size (" JITK_SIZE_SYNTAX ")\n", prog, v);
		die_usage(usage_cache);
	}
	fprintf(stderr, "%s: warning: JITK_CACHE_MAX_BYTES='%s' is not a size (" JITK_SIZE_SYNTAX
		"); no bound\n", prog, v);
	return 0;
}

static char *cache_dir_of(const cli_opts *o)
{
	const char *v;

	if (o->cache)
		return jitk__strdup(o->cache);
	if ((v = jitk__env("JITK_CACHE_DIR")))
		return jitk__strdup(v);
	if ((v = jitk__env("XDG_CACHE_HOME")))
		return jitk__asprintf("%s/jitk", v);
	if ((v = jitk__env("HOME")))
		return jitk__asprintf("%s/.cache/jitk", v);
	return NULL;
}

static int cmd_cache(int argc, char **argv)
{
	static const char *const cmds[] = { "stats", "verify", "clear", "prune" };
	cli_opts o;
	char *dir;
	const char *what;
	size_t i;
	int rc = 0;

	parse_opts(&o, argc, argv, usage_cache, "--cache --max-bytes");
	if (o.npos != 1) {
		if (o.npos)
			fprintf(stderr, "%s: unexpected argument '%s'\n", prog, o.pos[1]);
		else
			fprintf(stderr, "%s: cache: which command? (stats, verify, clear or prune)\n", prog);
		die_usage(usage_cache);
	}
	what = o.pos[0];
	for (i = 0; i < JITK_ARRAY_SIZE(cmds) && strcmp(what, cmds[i]); i++)
		;
	if (i == JITK_ARRAY_SIZE(cmds)) {
		fprintf(stderr, "%s: unknown cache command '%s'\n", prog, what);
		die_usage(usage_cache);
	}
	if (o.max_bytes && strcmp(what, "prune")) {
		fprintf(stderr, "%s: --max-bytes is an option of 'cache prune' only\n", prog);
		die_usage(usage_cache);
	}
	dir = cache_dir_of(&o);
	if (!dir) {
		fprintf(stderr, "%s: no cache directory (give --cache DIR)\n", prog);
		return 1;
	}
	if (!strcmp(what, "stats") || !strcmp(what, "verify")) {
		int verify = !strcmp(what, "verify");
		jitk_cache_summary s;

		if (jitk__cache_scan(&s, dir, verify, verify ? report_item : NULL, NULL)) {
			rc = fail_last();
		} else {
			printf("%s: %llu entries, %llu bytes, %llu temporary files, %llu lock files, "
			       "%llu foreign files",
			       dir, (unsigned long long)s.entries, (unsigned long long)s.bytes,
			       (unsigned long long)s.temp_files, (unsigned long long)s.lock_files,
			       (unsigned long long)s.foreign);
			if (verify)
				printf(", %llu bad", (unsigned long long)s.bad);
			printf("\n");
			rc = verify && s.bad ? 1 : 0;
		}
	} else if (!strcmp(what, "clear")) {
		jitk_clear_result r;

		if (jitk__cache_clear(&r, dir)) {
			rc = fail_last();
		} else {
			printf("%s: removed %llu files; %llu foreign files left alone", dir,
			       (unsigned long long)r.removed, (unsigned long long)r.foreign);
			if (r.failed)
				printf("; %llu could not be removed", (unsigned long long)r.failed);
			printf("\n");
			rc = r.failed ? 1 : 0;
		}
	} else {
		uint64_t bound = prune_bound(&o);
		jitk_prune_result pr;

		if (jitk__cache_prune(&pr, dir, bound, JITK_TEMP_MAX_AGE_S, JITK_PRUNE_VERIFY)) {
			rc = fail_last();
		} else {
			printf("%s: removed %llu bad entries, %llu old temporary files, %llu entries "
			       "(%llu bytes) to fit the size bound; %llu bytes left; %llu foreign "
			       "files left alone",
			       dir, (unsigned long long)pr.bad, (unsigned long long)pr.temp,
			       (unsigned long long)pr.evicted, (unsigned long long)pr.evicted_bytes,
			       (unsigned long long)pr.bytes_left, (unsigned long long)pr.foreign);
			if (pr.failed)
				printf("; %llu bad entries could not be removed",
				       (unsigned long long)pr.failed);
			printf("\n");
			rc = pr.failed ? 1 : 0;
		}
	}
	free(dir);
	return rc;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2)
		die_usage(usage_main);
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage_main, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		int major = 0, minor = 0;

		jitk__nvrtc_version(&major, &minor);
		printf("jitk %s (NVRTC %d.%d, cache format %d)\n", JITK_VERSION, major, minor,
		       JITK_CACHE_FORMAT);
		return 0;
	}
	if (!strcmp(cmd, "list"))
		return cmd_list(argc - 2, argv + 2);
	if (!strcmp(cmd, "explain"))
		return cmd_explain(argc - 2, argv + 2);
	if (!strcmp(cmd, "source"))
		return cmd_source(argc - 2, argv + 2);
	if (!strcmp(cmd, "precompile"))
		return cmd_precompile(argc - 2, argv + 2);
	if (!strcmp(cmd, "cache"))
		return cmd_cache(argc - 2, argv + 2);
	if (!strcmp(cmd, "bench"))
		return jitk_cli_bench(argc - 2, argv + 2);
	fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
	die_usage(usage_main);
	return 2;
}
