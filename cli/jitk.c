/* jitk - command-line front end: list, explain, source, precompile,
 * cache, bench. Exit status: 0 ok, 1 failure, 2 usage. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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
	"cache, N at a time (1 to 1024; default: the number of cores).\n"
	"Combinations a gate forbids are counted as gated; any other error is a\n"
	"failure, named with its message. Ends with one summary line; exit 1 if\n"
	"any failed. Needs no GPU.\n";

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

void jitk_cli_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (usage)
		fputs(usage, stderr);
	exit(2);
}

long jitk_cli_number(const char *what, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	/* strtol would also take leading blanks and a '+' */
	if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))) ||
	    *end || errno || v < min || v > max)
		jitk_cli_usage_error(NULL, "%s '%s' is not a number from %ld to %ld", what, s, min, max);
	return v;
}

static void log_stderr(void *payload, jitk_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };

	(void)payload;
	fprintf(stderr, "%s: %s: %s\n", prog,
		(unsigned)level < JITK_ARRAY_SIZE(names) ? names[level] : "log", msg);
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

#define JITK_CLI_MAX_JOBS 1024

typedef struct {
	const char *specs;
	const char *cache;
	const char *arch;
	const char *max_bytes;
	int options;
	int jobs;
	int help;
	char **pos; /* the positional arguments, moved to the front of argv */
	int npos;
} cli_opts;

/* 1 when the first n bytes of name are one of the words of allowed
 * (space-separated); else 0, with the nearest word in near for a "did you
 * mean" ("" when none is near). */
static int option_allowed(const char *allowed, const char *name, size_t n, char *near,
			  size_t near_size)
{
	const char *w = allowed;
	int bestd = 3;

	near[0] = '\0';
	while (*w) {
		size_t len = strcspn(w, " ");
		char word[32];

		if (len == n && !strncmp(w, name, n))
			return 1;
		if (len < sizeof(word) && n <= JITK_EDIT_MAX_LEN) {
			char given[JITK_EDIT_MAX_LEN + 1];
			int d;

			memcpy(word, w, len);
			word[len] = '\0';
			memcpy(given, name, n);
			given[n] = '\0';
			if ((d = jitk__edit_distance(given, word)) < bestd) {
				bestd = d;
				snprintf(near, near_size, "%s", word);
			}
		}
		w += len;
		while (*w == ' ')
			w++;
	}
	return 0;
}

static int is_opt(const char *a, size_t n, const char *name)
{
	return strlen(name) == n && !strncmp(a, name, n);
}

/* Parse the options every command shares; anything wrong is a usage error
 * (exit 2) that says what was wrong before the usage text. allowed: the
 * command's options, space-separated. */
static void parse_opts(cli_opts *o, int argc, char **argv, const char *usage,
		       const char *allowed)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->pos = argv;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq;
		char near[32];
		size_t n;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			o->help = 1;
			continue;
		}
		if (a[0] != '-' || !a[1]) {
			o->pos[o->npos++] = argv[i]; /* npos <= i: a slot already read */
			continue;
		}
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		if (!strncmp(a, "-j", 2) && a[2] && !eq && option_allowed(allowed, "-j", 2, near, sizeof(near))) {
			n = 2; /* -jN */
			val = a + 2;
		}
		if (!option_allowed(allowed, a, n, near, sizeof(near))) {
			if (near[0])
				jitk_cli_usage_error(usage, "unknown option '%.*s' (did you mean '%s'?)",
						     (int)n, a, near);
			jitk_cli_usage_error(usage, "unknown option '%.*s'", (int)n, a);
		}
		if (is_opt(a, n, "--options")) {
			if (eq)
				jitk_cli_usage_error(usage, "option '--options' takes no value");
			o->options = 1;
			continue;
		}
		if (!val)
			val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
		if (!val)
			jitk_cli_usage_error(usage, "option '%.*s' needs a value", (int)n, a);
		if (is_opt(a, n, "--specs"))
			o->specs = val;
		else if (is_opt(a, n, "--cache"))
			o->cache = val;
		else if (is_opt(a, n, "--arch"))
			o->arch = val;
		else if (is_opt(a, n, "--max-bytes"))
			o->max_bytes = val;
		else /* -j, --jobs */
			o->jobs = (int)jitk_cli_number("-j", val, 1, JITK_CLI_MAX_JOBS);
	}
	if (o->help) {
		fputs(usage, stdout);
		exit(0);
	}
}

/* The positional arguments a command takes: at least min, at most max. */
static void want_args(const cli_opts *o, const char *usage, int min, int max, const char *what)
{
	if (o->npos < min)
		jitk_cli_usage_error(usage, "missing %s", what);
	if (max >= 0 && o->npos > max)
		jitk_cli_usage_error(usage, "unexpected argument '%s'", o->pos[max]);
}

/* A target given on the command line: a malformed one, or one the library
 * refuses (JITK_EINVAL: e.g. a target NVRTC does not know), is a usage
 * error. c may be NULL (syntax only). */
static void check_arch(jitk_compiler *c, const char *arch, jitk_arch *out)
{
	jitk_arch a;
	char *text = NULL;

	if (jitk__arch_parse(&a, arch))
		jitk_cli_usage_error(NULL, "'%s' is not an architecture (sm_90, sm_100a, compute_90...)",
				     arch);
	if (out)
		*out = a;
	if (!c || !c->specs->ninsts)
		return;
	if (jitk_explain(&text, c, c->specs->insts[0].name, arch) == JITK_EINVAL) {
		free(text);
		fail_last();
		jitk_compiler_free(c);
		exit(2);
	}
	free(text);
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

static void gates_text(jbuf *b, const spec_instance *in)
{
	const spec_family *f = in->sym->fam;
	size_t i, start = b->len;

	for (i = 0; i < f->ngates + in->sym->ngates; i++) {
		const spec_gate *g = i < f->ngates ? &f->gates[i] : &in->sym->gates[i - f->ngates];
		const char *sep = b->len > start ? " " : "";

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

static int cmd_list(int argc, char **argv)
{
	cli_opts o;
	jitk_compiler *c;
	size_t i, w = 4;
	int rc = 0;

	parse_opts(&o, argc, argv, usage_list, "--specs");
	want_args(&o, usage_list, 0, 0, "");
	c = open_compiler(&o);
	for (i = 0; i < c->specs->ninsts; i++)
		if (strlen(c->specs->insts[i].name) > w)
			w = strlen(c->specs->insts[i].name);
	printf("%-*s  %-18s %-54s %s\n", (int)w, "NAME", "FAMILY", "PARAMETERS", "GATES");
	for (i = 0; i < c->specs->ninsts; i++) {
		const spec_instance *in = &c->specs->insts[i];
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
		if (params.oom || gates.oom) {
			fprintf(stderr, "%s: out of memory\n", prog);
			rc = 1;
		} else {
			printf("%-*s  %-18s %-54s %s\n", (int)w, in->name, f->name, params.data,
			       gates.data);
		}
		jitk__jbuf_free(&params);
		jitk__jbuf_free(&gates);
		if (rc)
			break;
	}
	jitk_compiler_free(c);
	return rc;
}

/* ------------------------------------------------------- explain, source */

static int cmd_explain(int argc, char **argv)
{
	cli_opts o;
	jitk_compiler *c;
	char *text = NULL;
	int rc;

	parse_opts(&o, argc, argv, usage_explain, "--specs --arch");
	want_args(&o, usage_explain, 1, 1, "symbol NAME");
	if (!o.arch)
		jitk_cli_usage_error(usage_explain, "missing --arch ARCH");
	check_arch(NULL, o.arch, NULL);
	c = open_compiler(&o);
	rc = jitk_explain(&text, c, o.pos[0], o.arch);
	if (text)
		fputs(text, stdout);
	if (rc && rc != JITK_EARCH)
		fail_last();
	free(text);
	jitk_compiler_free(c);
	/* EINVAL: the library refused the target given with --arch */
	return !rc ? 0 : rc == JITK_EINVAL ? 2 : 1;
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
	want_args(&o, usage_source, 1, 1, "symbol NAME");
	if (!o.arch)
		jitk_cli_usage_error(usage_source, "missing --arch ARCH");
	check_arch(NULL, o.arch, &a);
	c = open_compiler(&o);
	check_arch(c, o.arch, NULL);
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
 * a pipe (writes under PIPE_BUF are atomic); the parent prints progress.
 * Each worker also says in shared memory which item it holds, so that when
 * one dies (a crash in NVRTC, the OOM killer) the parent names the item
 * and the reason, counts it failed and starts another worker for the rest. */
typedef struct {
	uint32_t item;
	int32_t rc;
	int32_t origin;
} pre_record;

typedef struct {
	atomic_size_t next;    /* the next item to take */
	atomic_long current[]; /* per worker slot: the item it holds, or -1 */
} pre_shared;

typedef struct {
	jitk_compiler *c;
	size_t (*items)[2]; /* instance, architecture index */
	size_t nitems;
	jitk_arch *archs;
	pre_shared *sh;     /* shared between processes */
	size_t sh_size;
	int fd;             /* write end of the result pipe */
	unsigned char *reported; /* parent: per item, a result was counted */
	pid_t *pids;        /* parent: per worker slot, 0 when none runs */
	size_t done, compiled, cached, failed, gated;
	int tty;
} pre_ctx;

static void pre_worker(pre_ctx *x, size_t slot)
{
	for (;;) {
		size_t i = atomic_fetch_add(&x->sh->next, 1);
		pre_record rec;
		jitk_build b;
		ssize_t w;

		if (i >= x->nitems)
			break;
		atomic_store(&x->sh->current[slot], (long)i);
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
		atomic_store(&x->sh->current[slot], -1L);
	}
}

/* Count item i with outcome what, and print its progress line. */
static void pre_count(pre_ctx *x, size_t i, const char *what, size_t *counter)
{
	char arch[JITK_ARCH_STRLEN];

	x->reported[i] = 1;
	x->done++;
	(*counter)++;
	jitk__arch_format(arch, x->archs[x->items[i][1]]);
	printf("%s[%zu/%zu] %-8s %s %s%s", x->tty ? "\r\033[K" : "", x->done, x->nitems, what,
	       x->c->specs->insts[x->items[i][0]].name, arch, x->tty ? "" : "\n");
	fflush(stdout);
}

static void pre_read_records(pre_ctx *x, int fd)
{
	pre_record rec;

	for (;;) {
		ssize_t n = read(fd, &rec, sizeof(rec));

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(rec))
			return; /* EAGAIN: nothing more for now */
		if (rec.item >= x->nitems || x->reported[rec.item])
			continue;
		if (!rec.rc && rec.origin == JITK_ORIGIN_COMPILED)
			pre_count(x, rec.item, "compiled", &x->compiled);
		else if (!rec.rc)
			pre_count(x, rec.item, "cached", &x->cached);
		else if (rec.rc == JITK_EARCH)
			pre_count(x, rec.item, "gated", &x->gated);
		else
			pre_count(x, rec.item, "FAILED", &x->failed);
	}
}

/* Start a worker in slot; 0, or -1 when fork failed. */
static int pre_spawn(pre_ctx *x, size_t slot, int rfd)
{
	pid_t pid;

	atomic_store(&x->sh->current[slot], -1L);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(rfd);
		pre_worker(x, slot);
		_exit(0);
	}
	x->pids[slot] = pid;
	return 0;
}

/* A worker ended with status st: if it held an item it did not report,
 * that item failed, and the user is told which and why. Returns 1 when
 * the worker ended abnormally. */
static int pre_reaped(pre_ctx *x, size_t slot, int st)
{
	long i = atomic_load(&x->sh->current[slot]);
	char why[96], arch[JITK_ARCH_STRLEN];

	x->pids[slot] = 0;
	if (WIFEXITED(st) && !WEXITSTATUS(st) && i < 0)
		return 0;
	if (WIFSIGNALED(st))
		snprintf(why, sizeof(why), "worker killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else
		snprintf(why, sizeof(why), "worker exited with status %d", WEXITSTATUS(st));
	if (i < 0 || (size_t)i >= x->nitems || x->reported[i]) {
		fprintf(stderr, "%s: %s between items\n", prog, why);
		return 1;
	}
	jitk__arch_format(arch, x->archs[x->items[i][1]]);
	if (x->tty)
		fputs("\r\033[K", stdout);
	fflush(stdout);
	fprintf(stderr, "%s: %s while compiling %s for %s\n", prog, why,
		x->c->specs->insts[x->items[i][0]].name, arch);
	pre_count(x, (size_t)i, "FAILED", &x->failed);
	return 1;
}

/* Run the workers until every one has ended; 1 if any ended abnormally. */
static int pre_run(pre_ctx *x, size_t jobs)
{
	int pipefd[2], rc = 0;
	size_t slot, alive = 0, spawns = 0, max_spawns = jobs + x->nitems;

	if (pipe(pipefd) || fcntl(pipefd[0], F_SETFL, O_NONBLOCK)) {
		fprintf(stderr, "%s: cannot create a pipe: %s\n", prog, strerror(errno));
		return 1;
	}
	x->fd = pipefd[1];
	for (slot = 0; slot < jobs; slot++)
		if (!pre_spawn(x, slot, pipefd[0]))
			alive++, spawns++;
	if (!alive) {
		fprintf(stderr, "%s: cannot start workers: %s\n", prog, strerror(errno));
		rc = 1;
	}
	while (alive) {
		struct pollfd p = { pipefd[0], POLLIN, 0 };
		pid_t pid;
		int st;

		if (poll(&p, 1, 100) > 0)
			pre_read_records(x, pipefd[0]);
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			for (slot = 0; slot < jobs && x->pids[slot] != pid; slot++)
				;
			if (slot == jobs)
				continue;
			alive--;
			/* its records are all in the pipe now: count them first */
			pre_read_records(x, pipefd[0]);
			if (!pre_reaped(x, slot, st))
				continue;
			rc = 1;
			if (atomic_load(&x->sh->next) < x->nitems && spawns < max_spawns &&
			    !pre_spawn(x, slot, pipefd[0]))
				alive++, spawns++;
		}
		if (pid < 0 && errno == ECHILD)
			break;
	}
	pre_read_records(x, pipefd[0]);
	close(pipefd[0]);
	close(pipefd[1]);
	return rc;
}

/* The architectures of a --arch list (out: room for strlen(list) + 1);
 * empty or malformed items are usage errors. */
static size_t parse_arch_list(jitk_arch *out, const char *list)
{
	const char *p = list;
	size_t n = 0;

	for (;;) {
		size_t len = strcspn(p, ",");
		char tok[JITK_ARCH_STRLEN];

		if (!len)
			jitk_cli_usage_error(NULL, "empty architecture in '%s'", list);
		if (len >= sizeof(tok))
			jitk_cli_usage_error(NULL, "'%.*s...' is not an architecture (sm_90, sm_100a, compute_90...)",
					     (int)sizeof(tok) - 1, p);
		memcpy(tok, p, len);
		tok[len] = '\0';
		check_arch(NULL, tok, &out[n++]);
		if (!p[len])
			return n;
		p += len + 1;
	}
}

static int cmd_precompile(int argc, char **argv)
{
	cli_opts o;
	pre_ctx x;
	const char *list;
	unsigned char *chosen = NULL;
	size_t narchs, i, j, ninst = 0, *insts = NULL;
	double t0 = jitk__now_ms();
	long jobs;
	int rc = 0;

	parse_opts(&o, argc, argv, usage_precompile, "--specs --cache --arch -j --jobs");
	memset(&x, 0, sizeof(x));
	list = o.arch ? o.arch : "sm_80,sm_86,sm_89,sm_90,sm_100,sm_120";
	x.archs = calloc(strlen(list) + 1, sizeof(*x.archs));
	if (!x.archs) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	narchs = parse_arch_list(x.archs, list);
	x.c = open_compiler(&o);
	for (j = 0; j < narchs; j++) {
		char arch[JITK_ARCH_STRLEN];

		jitk__arch_format(arch, x.archs[j]);
		check_arch(x.c, arch, NULL);
	}
	x.tty = isatty(STDOUT_FILENO);
	/* The instances to build, each once, in spec order. */
	chosen = calloc(x.c->specs->ninsts + 1, 1);
	insts = calloc(x.c->specs->ninsts + 1, sizeof(*insts));
	if (!chosen || !insts)
		goto oom;
	for (i = 0; i < x.c->specs->ninsts; i++)
		chosen[i] = !o.npos;
	for (i = 0; i < (size_t)o.npos; i++) {
		size_t inst;

		if (jitk__spec_find(x.c->specs, o.pos[i], &inst)) {
			rc = fail_last();
			goto done;
		}
		/* A bare symbol name means all its instances. */
		for (j = 0; j < x.c->specs->ninsts; j++)
			if (j == inst || (!strchr(o.pos[i], '[') &&
					  !strcmp(x.c->specs->insts[j].sym->name, o.pos[i])))
				chosen[j] = 1;
	}
	for (i = 0; i < x.c->specs->ninsts; i++)
		if (chosen[i])
			insts[ninst++] = i;
	x.nitems = ninst * narchs;
	jobs = o.jobs > 0 ? o.jobs : sysconf(_SC_NPROCESSORS_ONLN);
	if (jobs > JITK_CLI_MAX_JOBS)
		jobs = JITK_CLI_MAX_JOBS;
	if ((size_t)jobs > x.nitems)
		jobs = (long)x.nitems;
	if (jobs < 1)
		jobs = 1;
	x.items = calloc(x.nitems + 1, sizeof(*x.items));
	x.reported = calloc(x.nitems + 1, 1);
	x.pids = calloc((size_t)jobs, sizeof(*x.pids));
	x.sh_size = sizeof(pre_shared) + (size_t)jobs * sizeof(atomic_long);
	x.sh = mmap(NULL, x.sh_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (x.sh == MAP_FAILED)
		x.sh = NULL;
	if (!x.items || !x.reported || !x.pids || !x.sh)
		goto oom;
	atomic_init(&x.sh->next, 0);
	for (i = 0; i < ninst; i++)
		for (j = 0; j < narchs; j++) {
			x.items[i * narchs + j][0] = insts[i];
			x.items[i * narchs + j][1] = j;
		}
	if (x.nitems)
		rc = pre_run(&x, (size_t)jobs);
	/* Whatever no worker reported (every worker gone) failed too. */
	for (i = 0; i < x.nitems; i++) {
		char arch[JITK_ARCH_STRLEN];

		if (x.reported[i])
			continue;
		jitk__arch_format(arch, x.archs[x.items[i][1]]);
		if (x.tty)
			fputs("\r\033[K", stdout);
		fflush(stdout);
		fprintf(stderr, "%s: %s for %s was not built: no worker was left to build it\n", prog,
			x.c->specs->insts[x.items[i][0]].name, arch);
		pre_count(&x, i, "FAILED", &x.failed);
	}
	if (x.tty)
		fputs("\r\033[K", stdout);
	printf("precompiled %zu symbols x %zu architectures (%s) into %s in %.2f s with %ld "
	       "processes: %zu compiled, %zu cached, %zu failed, %zu gated\n",
	       ninst, narchs, list, jitk__cache_root(x.c->cache) ? jitk__cache_root(x.c->cache) : "(memory)",
	       (jitk__now_ms() - t0) / 1000.0, x.nitems ? jobs : 0L, x.compiled, x.cached, x.failed,
	       x.gated);
	if (x.failed)
		rc = 1;
	goto done;
oom:
	fprintf(stderr, "%s: out of memory\n", prog);
	rc = 1;
done:
	if (x.sh)
		munmap(x.sh, x.sh_size);
	free(x.pids);
	free(x.reported);
	free(x.items);
	free(insts);
	free(chosen);
	free(x.archs);
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
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{ "list", cmd_list }, { "explain", cmd_explain }, { "source", cmd_source },
		{ "precompile", cmd_precompile }, { "cache", cmd_cache }, { "bench", jitk_cli_bench },
	};
	const char *cmd, *near = NULL;
	size_t i;
	int bestd = 3;

	if (argc < 2)
		jitk_cli_usage_error(usage_main, "missing COMMAND");
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(usage_main, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		int major = 0, minor = 0;

		if (argc > 2)
			jitk_cli_usage_error(usage_main, "unexpected argument '%s'", argv[2]);
		jitk__nvrtc_version(&major, &minor);
		printf("jitk %s (NVRTC %d.%d, cache format %d)\n", JITK_VERSION, major, minor,
		       JITK_CACHE_FORMAT);
		return 0;
	}
	for (i = 0; i < JITK_ARRAY_SIZE(cmds); i++) {
		int d;

		if (!strcmp(cmd, cmds[i].name))
			return cmds[i].fn(argc - 2, argv + 2);
		if ((d = jitk__edit_distance(cmd, cmds[i].name)) < bestd) {
			bestd = d;
			near = cmds[i].name;
		}
	}
	if (cmd[0] == '-')
		jitk_cli_usage_error(usage_main, "unknown option '%s'", cmd);
	if (near)
		jitk_cli_usage_error(usage_main, "unknown command '%s' (did you mean '%s'?)", cmd, near);
	jitk_cli_usage_error(usage_main, "unknown command '%s'", cmd);
	return 2;
}
