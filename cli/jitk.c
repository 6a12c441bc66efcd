/* jitk - command-line front end: list, explain, source, precompile,
 * cache, bench. Exit status: 0 ok, 1 failure, 2 usage. It uses the public
 * API only (jitk.h); the build gives it no other include directory. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "jitk.h"

static const char *prog = "jitk";

static const char usage_main[] =
	"usage: jitk [--version] [--help] COMMAND [ARGS]\n"
	"\n"
	"  list [NAME]               every symbol, its family, parameters and gates\n"
	"  explain NAME --arch ARCH  which variant runs on ARCH, or the fallback and why\n"
	"                            (--cache DIR: and which cached image)\n"
	"  source NAME --arch ARCH   the translation unit (--options: NVRTC options)\n"
	"  precompile [NAME...]      compile symbols x architectures into a cache\n"
	"                            (--manifest FILE: what a warmup recorded)\n"
	"  cache stats|verify|clear|prune\n"
	"                            inspect or maintain a cache directory\n"
	"  cache pack|unpack|verify FILE\n"
	"                            a cache in one file (a bundle)\n"
	"  bench                     kernel and JIT timings on this machine's GPU\n"
	"  key generate NAME -o PREFIX\n"
	"                            a key that signs what a builder publishes\n"
	"  header FAMILY [-o FILE]   a C header of typed calls, from the family's spec\n"
	"\n"
	"NAME is a symbol (all its instances) or symbol[param=value,...].\n"
	"Common options: --specs DIR[:DIR] (default $JITK_SPECS, else the installed\n"
	"specs), --cache DIR (default $JITK_CACHE_DIR, $XDG_CACHE_HOME/jitk,\n"
	"~/.cache/jitk), --remote URL[,URL] (default $JITK_REMOTE_CACHE: an HTTP(S)\n"
	"cache shared by machines). 'jitk COMMAND --help' says more.\n";

static const char usage_list[] =
	"usage: jitk list [NAME] [--specs DIR]\n"
	"\n"
	"Print every symbol instance (or those NAME selects: a symbol, or\n"
	"symbol[param=value,...]): name, family, parameter values and the\n"
	"architecture gates that apply to it.\n";

static const char usage_explain[] =
	"usage: jitk explain NAME --arch ARCH [--cache DIR] [--specs DIR]\n"
	"\n"
	"Say whether NAME runs on ARCH (sm_90, sm_100a, compute_90...) and with\n"
	"which tuning, or which fallback runs instead and why; for each instance\n"
	"when NAME selects several (a bare symbol name). Needs no GPU.\n"
	"With --cache DIR (ARCH a GPU: sm_NN), also which image a GPU of ARCH would\n"
	"run from DIR (and $JITK_CACHE_PATH) and why: every target a runtime tries\n"
	"in order - the exact one, the family targets (sm_100f runs on sm_103),\n"
	"PTX - with its key and what DIR holds for it, then the entry that wins or\n"
	"that the kernel would be compiled. DIR is only read.\n"
	"Exit 0 when NAME or its fallback runs there, 1 when neither can.\n";

static const char usage_source[] =
	"usage: jitk source NAME --arch ARCH [--options] [--specs DIR]\n"
	"\n"
	"Print the exact translation unit jitk compiles for NAME on ARCH; NAME\n"
	"must select one instance (symbol[param=value,...]; jitk list names\n"
	"them). With --options, print instead the NVRTC options, one per line,\n"
	"then one line 'name-expression EXPR' per name expression: enough to\n"
	"reproduce the compile with NVRTC alone.\n";

static const char usage_precompile[] =
	"usage: jitk precompile [NAME...] [--arch LIST] [--cache DIR] [--specs DIR]\n"
	"                       [--remote URL[,URL...]] [-j N]\n"
	"       jitk precompile --manifest FILE [--arch LIST] [--cache DIR] [--specs DIR]\n"
	"                       [--remote URL[,URL...]] [-j N]\n"
	"\n"
	"Compile the instances the NAMEs select (default: all) for every\n"
	"architecture in LIST (comma-separated; default\n"
	"sm_80,sm_86,sm_89,sm_90,sm_100,sm_120; family targets such as sm_100f\n"
	"and arch-specific ones such as sm_90a too) into the cache, N at a time\n"
	"(1 to 1024; default: the number of cores).\n"
	"With --manifest, compile exactly the 'INSTANCE ARCH' pairs of FILE (what\n"
	"JITK_MANIFEST_OUT recorded), or with --arch those instances for LIST.\n"
	"Combinations a gate forbids are counted as gated; any other error is a\n"
	"failure, named with its message. With a remote (--remote, else\n"
	"$JITK_REMOTE_CACHE), what the cache lacks is fetched from it (verified,\n"
	"counted as remote) or compiled and uploaded (not with\n"
	"JITK_REMOTE_READONLY=1); a remote that fails is warned about once and\n"
	"fails nothing. A --cache DIR that cannot be written (not this user's,\n"
	"writable by others, not a directory, JITK_CACHE_READONLY) fails the run\n"
	"before anything compiles; without --cache, an unusable default cache is\n"
	"one warning and a build in memory. Ends with one summary line; exit 1 if\n"
	"any failed. Needs no GPU.\n";

static const char usage_cache[] =
	"usage: jitk cache stats|verify|clear|prune [--cache DIR] [--max-bytes SIZE]\n"
	"       jitk cache pack [--cache DIR] [--arch LIST] -o FILE\n"
	"       jitk cache unpack FILE [--cache DIR]\n"
	"       jitk cache verify FILE\n"
	"       jitk cache verify [FILE | --cache DIR] --trusted-keys KEYS\n"
	"\n"
	"  stats   entries, bytes, temporary, lock and foreign files\n"
	"  verify  check every entry; name each bad one and each foreign file;\n"
	"          exit 1 if an entry is bad\n"
	"  clear   remove every entry, temporary file and bad entry\n"
	"  prune   remove the bad entries verify names, temporary files older than\n"
	"          an hour, and the least recently used entries beyond --max-bytes\n"
	"          (default $JITK_CACHE_MAX_BYTES; no bound when neither is set).\n"
	"          SIZE: bytes, or with K, M, G or T (powers of 1024): 512M, 10G\n"
	"  pack    write the cache's good entries (of the SMs in LIST: sm_90 takes\n"
	"          sm_90, sm_90a and compute_90) into one bundle FILE, which can\n"
	"          stand in JITK_CACHE_PATH as a read-only layer; exit 1 if an\n"
	"          entry was bad (left out)\n"
	"  unpack  publish the bundle's entries into the cache; exit 1 if one was\n"
	"          bad (left out)\n"
	"  verify FILE  check every byte of a bundle; name each bad entry\n"
	"  verify --trusted-keys KEYS  also say who signed each entry (KEYS: NAME:BASE64\n"
	"          words, or a file of them, as JITK_TRUSTED_KEYS); exit 1 unless a\n"
	"          trusted key signed every entry\n"
	"  pack and unpack sign and check as the environment says: pack signs every\n"
	"          entry with JITK_SIGNING_KEY; unpack leaves out what JITK_TRUSTED_KEYS\n"
	"          and JITK_REQUIRE_SIGS refuse\n"
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

double jitk_cli_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void log_stderr(void *payload, jitk_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };

	(void)payload;
	fprintf(stderr, "%s: %s: %s\n", prog,
		(unsigned)level < CLI_ARRAY_SIZE(names) ? names[level] : "log", msg);
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

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

/* --------------------------------------------------------------- options */

#define JITK_CLI_MAX_JOBS 1024
/* Room for an architecture's name: the longest, compute_NNNNa, has 13
 * characters; a longer item of an --arch list is refused as it is. */
#define CLI_ARCH_MAX 24

typedef struct {
	const char *specs;
	const char *cache;
	const char *arch;
	const char *max_bytes;
	const char *remote;
	const char *out;
	const char *manifest;
	const char *trusted_keys;
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
	char words[128], given[64], *w[16];
	size_t nw = 0;
	char *p;
	int i;

	near[0] = '\0';
	snprintf(words, sizeof(words), "%s", allowed);
	for (p = strtok(words, " "); p && nw < CLI_ARRAY_SIZE(w); p = strtok(NULL, " ")) {
		if (strlen(p) == n && !strncmp(p, name, n))
			return 1;
		w[nw++] = p;
	}
	if (n < sizeof(given)) {
		memcpy(given, name, n);
		given[n] = '\0';
		if ((i = jitk_nearest(given, (const char *const *)w, nw)) >= 0)
			snprintf(near, near_size, "%s", w[i]);
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
		else if (is_opt(a, n, "--remote"))
			o->remote = val;
		else if (is_opt(a, n, "-o"))
			o->out = val;
		else if (is_opt(a, n, "--manifest"))
			o->manifest = val;
		else if (is_opt(a, n, "--trusted-keys"))
			o->trusted_keys = val;
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

/* A target given on the command line: a malformed one (c NULL: before
 * the specs are loaded), or one the library refuses (a target NVRTC does
 * not know), is a usage error, with the library's message. */
static void check_arch(jitk_compiler *c, const char *arch)
{
	if (!jitk_check_target(c, arch))
		return;
	fail_last();
	jitk_compiler_free(c);
	exit(2);
}

/* read_only: the cache is a read-only layer (nothing written, stamped or
 * removed there). */
static jitk_compiler *open_compiler_with(const cli_opts *o, int read_only)
{
	jitk_compiler_options co = JITK_COMPILER_OPTIONS_INIT;
	jitk_compiler *c = NULL;

	co.specs = o->specs;
	co.cache_dir = o->cache;
	co.remote = o->remote;
	co.log = log_stderr;
	if (read_only)
		co.cache_read_only = 1;
	if (jitk_compiler_new(&c, &co)) {
		fail_last();
		exit(1);
	}
	return c;
}

static jitk_compiler *open_compiler(const cli_opts *o)
{
	return open_compiler_with(o, 0);
}

/* ------------------------------------------------------------------ list */

static int cmd_list(int argc, char **argv)
{
	cli_opts o;
	jitk_compiler *c;
	char *text = NULL;
	int rc = 0;

	parse_opts(&o, argc, argv, usage_list, "--specs");
	want_args(&o, usage_list, 0, 1, "");
	c = open_compiler(&o);
	if (jitk_list(&text, c, o.npos ? o.pos[0] : NULL))
		rc = fail_last();
	else
		fputs(text, stdout);
	jitk_free(text);
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

	parse_opts(&o, argc, argv, usage_explain, "--specs --arch --cache");
	want_args(&o, usage_explain, 1, 1, "symbol NAME");
	if (!o.arch)
		jitk_cli_usage_error(usage_explain, "missing --arch ARCH");
	check_arch(NULL, o.arch);
	if (o.cache) {
		jitk_cache_summary sum = JITK_CACHE_SUMMARY_INIT;

		if (!strncmp(o.arch, "compute_", 8) || o.arch[strlen(o.arch) - 1] == 'a' ||
		    o.arch[strlen(o.arch) - 1] == 'f')
			jitk_cli_usage_error(usage_explain, "--cache needs a GPU's architecture (sm_NN), not %s",
					     o.arch);
		/* a cache that is not there is refused, not made */
		if (jitk_cache_stats(&sum, o.cache, 0, NULL, NULL))
			return fail_last();
	}
	c = open_compiler_with(&o, o.cache != NULL);
	check_arch(c, o.arch);
	rc = o.cache ? jitk_explain_cache(&text, c, o.pos[0], o.arch)
		     : jitk_explain(&text, c, o.pos[0], o.arch);
	if (text)
		fputs(text, stdout);
	if (rc && rc != JITK_EARCH)
		fail_last();
	jitk_free(text);
	jitk_compiler_free(c);
	return rc ? 1 : 0;
}

static int cmd_source(int argc, char **argv)
{
	cli_opts o;
	jitk_compiler *c;
	char *tu = NULL, *options = NULL;
	int rc = 0;

	parse_opts(&o, argc, argv, usage_source, "--specs --arch --options");
	want_args(&o, usage_source, 1, 1, "symbol NAME");
	if (!o.arch)
		jitk_cli_usage_error(usage_source, "missing --arch ARCH");
	check_arch(NULL, o.arch);
	c = open_compiler(&o);
	check_arch(c, o.arch);
	if (jitk_source(&tu, &options, c, o.pos[0], o.arch))
		rc = fail_last();
	else
		fputs(o.options ? options : tu, stdout);
	jitk_free(tu);
	jitk_free(options);
	jitk_compiler_free(c);
	return rc;
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
	int32_t refused; /* remote objects and bundle entries refused (provenance) */
} pre_record;

typedef struct {
	atomic_size_t next;    /* the next item to take */
	atomic_long current[]; /* per worker slot: the item it holds, or -1 */
} pre_shared;

typedef struct {
	jitk_compiler *c;
	size_t (*items)[2]; /* instance, architecture index */
	size_t nitems;
	char (*archs)[CLI_ARCH_MAX];
	pre_shared *sh;     /* shared between processes */
	size_t sh_size;
	int fd;             /* write end of the result pipe */
	unsigned char *reported; /* parent: per item, a result was counted */
	pid_t *pids;        /* parent: per worker slot, 0 when none runs */
	size_t done, compiled, cached, remote, failed, gated, refused;
	int tty;
} pre_ctx;

static const char *item_name(const pre_ctx *x, size_t i)
{
	return jitk_instance_name(x->c, x->items[i][0]);
}

static const char *item_arch(const pre_ctx *x, size_t i)
{
	return x->archs[x->items[i][1]];
}

/* Refusals of unsigned or untrusted objects so far (one worker is one
 * thread: the difference over an item is that item's). */
static int32_t refused_now(const jitk_compiler *c)
{
	jitk_sign_stats s = JITK_SIGN_STATS_INIT;

	return jitk_sign_stats_get(&s, c) ? 0 : (int32_t)s.refused;
}

static void pre_worker(pre_ctx *x, size_t slot)
{
	for (;;) {
		size_t i = atomic_fetch_add(&x->sh->next, 1);
		pre_record rec;
		jitk_origin origin = JITK_ORIGIN_COMPILED;
		ssize_t w;

		if (i >= x->nitems)
			break;
		atomic_store(&x->sh->current[slot], (long)i);
		rec.item = (uint32_t)i;
		rec.refused = -refused_now(x->c);
		rec.rc = jitk_precompile(&origin, x->c, item_name(x, i), item_arch(x, i));
		rec.refused += refused_now(x->c);
		rec.origin = rec.rc ? 0 : (int32_t)origin;
		if (rec.rc && rec.rc != JITK_EARCH)
			fail_last(); /* the message names symbol, variant, arch */
		do
			w = write(x->fd, &rec, sizeof(rec));
		while (w < 0 && errno == EINTR);
		atomic_store(&x->sh->current[slot], -1L);
	}
}

/* Count item i with outcome what (and a note after it, or ""), and print
 * its progress line. */
static void pre_count(pre_ctx *x, size_t i, const char *what, const char *note,
		      size_t *counter)
{
	x->reported[i] = 1;
	x->done++;
	(*counter)++;
	printf("%s[%zu/%zu] %-8s %s %s%s%s", x->tty ? "\r\033[K" : "", x->done, x->nitems, what,
	       item_name(x, i), item_arch(x, i), note, x->tty ? "" : "\n");
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
		x->refused += rec.refused > 0 ? (size_t)rec.refused : 0;
		if (rec.rc == JITK_EARCH)
			pre_count(x, rec.item, "gated", "", &x->gated);
		else if (rec.rc)
			pre_count(x, rec.item, "FAILED", "", &x->failed);
		else if (rec.origin == JITK_ORIGIN_COMPILED)
			pre_count(x, rec.item, "compiled", "", &x->compiled);
		else if (rec.origin == JITK_ORIGIN_MEMORY) /* the library warned why */
			pre_count(x, rec.item, "compiled", " (in memory only: not written to the cache)",
				  &x->compiled);
		else if (rec.origin == JITK_ORIGIN_REMOTE)
			pre_count(x, rec.item, "remote", "", &x->remote);
		else /* the cache or a read-only layer */
			pre_count(x, rec.item, "cached", "", &x->cached);
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

/* Before a message on stderr: end the progress line on a terminal. */
static void pre_clear_line(const pre_ctx *x)
{
	if (x->tty)
		fputs("\r\033[K", stdout);
	fflush(stdout);
}

/* A worker ended with status st: if it held an item it did not report,
 * that item failed, and the user is told which and why. Returns 1 when
 * the worker ended abnormally. */
static int pre_reaped(pre_ctx *x, size_t slot, int st)
{
	long i = atomic_load(&x->sh->current[slot]);
	char why[96];

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
	pre_clear_line(x);
	fprintf(stderr, "%s: %s while compiling %s for %s\n", prog, why, item_name(x, (size_t)i),
		item_arch(x, (size_t)i));
	pre_count(x, (size_t)i, "FAILED", "", &x->failed);
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
static size_t parse_arch_list(char (*out)[CLI_ARCH_MAX], const char *list)
{
	const char *p = list;
	size_t n = 0;

	for (;;) {
		size_t len = strcspn(p, ",");

		if (!len)
			jitk_cli_usage_error(NULL, "empty architecture in '%s'", list);
		if (len >= CLI_ARCH_MAX)
			jitk_cli_usage_error(NULL, "'%.*s...' is not an architecture (sm_90, sm_100a, compute_90...)",
					     CLI_ARCH_MAX - 1, p);
		memcpy(out[n], p, len);
		out[n][len] = '\0';
		check_arch(NULL, out[n++]);
		if (!p[len])
			return n;
		p += len + 1;
	}
}

/* The instance named name (one the compiler defines: the manifest reader
 * checked). */
static size_t instance_index(jitk_compiler *c, const char *name)
{
	size_t i, n = jitk_instance_count(c);

	for (i = 0; i < n && strcmp(jitk_instance_name(c, i), name); i++)
		;
	return i;
}

/* The pairs of a manifest (distinct; archs, when given, replacing the
 * recorded architectures) as the items to build: x->archs gets the
 * distinct architectures, x->items the pairs, *ninst the number of
 * distinct instances. 0, or 1 after saying why. */
static int manifest_items(pre_ctx *x, const char *path, const char *archs, size_t *ninst,
			  size_t *narchs)
{
	jitk_manifest_item *m = NULL;
	size_t n = 0, i, j, ni = jitk_instance_count(x->c);
	unsigned char *seen;

	if (jitk_manifest_read(&m, &n, x->c, path, archs))
		return fail_last();
	free(x->archs);
	x->archs = xcalloc(n + 1, sizeof(*x->archs));
	x->items = xcalloc(n + 1, sizeof(*x->items));
	seen = xcalloc(ni + 1, 1);
	*narchs = *ninst = 0;
	for (i = 0; i < n; i++) {
		size_t inst = instance_index(x->c, m[i].instance);

		for (j = 0; j < *narchs && strcmp(x->archs[j], m[i].arch); j++)
			;
		if (j == *narchs)
			snprintf(x->archs[(*narchs)++], CLI_ARCH_MAX, "%s", m[i].arch);
		x->items[i][0] = inst;
		x->items[i][1] = j;
		*ninst += !seen[inst];
		seen[inst] = 1;
	}
	x->nitems = n;
	free(seen);
	jitk_free(m);
	return 0;
}

/* The summary's provenance count, where signatures are checked: objects
 * refused because no trusted key signed them (each compiled instead). */
static void print_refused(const pre_ctx *x)
{
	jitk_sign_stats s = JITK_SIGN_STATS_INIT;

	if (!jitk_sign_stats_get(&s, x->c) && (s.required || x->refused))
		printf(", %zu refused", x->refused);
	printf("\n");
}

/* Items whose translation unit an earlier item has too (instances that
 * differ in size classes alone and tune alike: docs/spec-format.md) go
 * last, in order: by the time a worker takes one, the first is built or
 * being built, and it is a cache hit, instead of a worker waiting on the
 * cache's lock for it while other items could be building. An item whose
 * unit cannot be made (a gate) stays where it is. Returns how many items
 * have a unit of their own (more workers than that would only wait). */
static size_t shared_units_last(pre_ctx *x)
{
	char **unit = xcalloc(x->nitems + 1, sizeof(*unit));
	size_t(*order)[2] = xcalloc(x->nitems + 1, sizeof(*order));
	unsigned char *again = xcalloc(x->nitems + 1, 1);
	size_t i, j, n = 0, distinct;

	for (i = 0; i < x->nitems; i++) {
		char *tu = NULL, *options = NULL;

		if (!jitk_source(&tu, &options, x->c, item_name(x, i), item_arch(x, i)) &&
		    (unit[i] = malloc(strlen(tu) + strlen(options) + 2)))
			sprintf(unit[i], "%s\n%s", tu, options); /* its first line names it */
		jitk_free(tu);
		jitk_free(options);
		for (j = 0; j < i && unit[i]; j++)
			if (unit[j] && !again[j] && !strcmp(unit[i], unit[j])) {
				again[i] = 1;
				break;
			}
	}
	for (i = 0; i < x->nitems; i++)
		if (!again[i])
			memcpy(order[n++], x->items[i], sizeof(*order));
	distinct = n;
	for (i = 0; i < x->nitems; i++)
		if (again[i])
			memcpy(order[n++], x->items[i], sizeof(*order));
	memcpy(x->items, order, x->nitems * sizeof(*order));
	for (i = 0; i < x->nitems; i++)
		free(unit[i]);
	free(unit);
	free(order);
	free(again);
	return distinct;
}

static int cmd_precompile(int argc, char **argv)
{
	cli_opts o;
	pre_ctx x;
	const char *list, *dir;
	unsigned char *chosen = NULL;
	size_t narchs, ninsts, i, j, k, ninst = 0, *insts = NULL;
	double t0 = jitk_cli_now_ms();
	long jobs;
	int rc = 0;

	parse_opts(&o, argc, argv, usage_precompile,
		   "--specs --cache --arch --remote --manifest -j --jobs");
	if (o.manifest && o.npos)
		jitk_cli_usage_error(usage_precompile, "NAME and --manifest exclude each other");
	memset(&x, 0, sizeof(x));
	list = o.arch ? o.arch : "sm_80,sm_86,sm_89,sm_90,sm_100,sm_120";
	x.archs = xcalloc(strlen(list) + 1, sizeof(*x.archs));
	narchs = parse_arch_list(x.archs, list);
	/* An explicit --cache is the point of the run: one that cannot be
	 * written is a failure, not a warning and a build into memory. */
	if (o.cache && jitk_cache_check_writable(o.cache)) {
		fprintf(stderr, "%s: cannot precompile into %s: %s\n", prog, o.cache,
			jitk_error_last()->message);
		free(x.archs);
		return 1;
	}
	x.c = open_compiler(&o);
	if (o.cache && !jitk_compiler_cache_dir(x.c)) {
		fprintf(stderr, "%s: cannot precompile into %s: the cache is read-only "
			"(JITK_CACHE_READONLY)\n", prog, o.cache);
		rc = 1;
		goto done;
	}
	for (j = 0; j < narchs; j++)
		check_arch(x.c, x.archs[j]);
	x.tty = isatty(STDOUT_FILENO);
	if (o.manifest) {
		if ((rc = manifest_items(&x, o.manifest, o.arch, &ninst, &narchs)))
			goto done;
		goto planned;
	}
	/* The instances to build, each once, in spec order. */
	ninsts = jitk_instance_count(x.c);
	chosen = calloc(ninsts + 1, 1);
	insts = calloc(ninsts + 1, sizeof(*insts));
	if (!chosen || !insts)
		goto oom;
	for (i = 0; i < ninsts; i++)
		chosen[i] = !o.npos;
	for (i = 0; i < (size_t)o.npos; i++) {
		size_t *sel = NULL, nsel = 0;

		if (jitk_select(&sel, &nsel, x.c, o.pos[i])) {
			rc = fail_last();
			goto done;
		}
		for (k = 0; k < nsel; k++)
			if (sel[k] < ninsts)
				chosen[sel[k]] = 1;
		jitk_free(sel);
	}
	for (i = 0; i < ninsts; i++)
		if (chosen[i])
			insts[ninst++] = i;
	x.nitems = ninst * narchs;
planned:
	jobs = o.jobs > 0 ? o.jobs : sysconf(_SC_NPROCESSORS_ONLN);
	if (jobs > JITK_CLI_MAX_JOBS)
		jobs = JITK_CLI_MAX_JOBS;
	if ((size_t)jobs > x.nitems)
		jobs = (long)x.nitems;
	if (jobs < 1)
		jobs = 1;
	if (!x.items) /* a manifest's are made already */
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
	for (i = 0; i < ninst && !o.manifest; i++)
		for (j = 0; j < narchs; j++) {
			x.items[i * narchs + j][0] = insts[i];
			x.items[i * narchs + j][1] = j;
		}
	if (x.nitems > 1 && jobs > 1) {
		size_t units = shared_units_last(&x);

		if (units && (size_t)jobs > units)
			jobs = (long)units;
	}
	if (x.nitems)
		rc = pre_run(&x, (size_t)jobs);
	/* Whatever no worker reported (every worker gone) failed too. */
	for (i = 0; i < x.nitems; i++) {
		if (x.reported[i])
			continue;
		pre_clear_line(&x);
		fprintf(stderr, "%s: %s for %s was not built: no worker was left to build it\n", prog,
			item_name(&x, i), item_arch(&x, i));
		pre_count(&x, i, "FAILED", "", &x.failed);
	}
	if (x.tty)
		fputs("\r\033[K", stdout);
	dir = jitk_compiler_cache_dir(x.c);
	if (o.manifest)
		printf("precompiled the manifest %s (%zu pairs of %zu instances and %zu architectures)",
		       o.manifest, x.nitems, ninst, narchs);
	else
		printf("precompiled %zu symbols x %zu architectures (%s)", ninst, narchs, list);
	printf(" into %s in %.2f s with %ld processes: %zu compiled, %zu cached, %zu remote, "
	       "%zu failed, %zu gated",
	       dir ? dir : "(memory)", (jitk_cli_now_ms() - t0) / 1000.0,
	       x.nitems ? jobs : 0L, x.compiled, x.cached, x.remote, x.failed, x.gated);
	print_refused(&x);
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

/* jitk cache prune: the bound is --max-bytes (not a size: a usage error),
 * else $JITK_CACHE_MAX_BYTES (not a size: one warning and no bound, as in
 * the library). The library checks the size before it touches anything. */
static int cache_prune(jitk_prune_result *out, const char *dir, const cli_opts *o)
{
	const char *env = getenv("JITK_CACHE_MAX_BYTES");
	const char *bound = o->max_bytes ? o->max_bytes : env && *env ? env : NULL;
	int rc = jitk_cache_prune(out, dir, bound);

	if (rc != JITK_EINVAL || !bound)
		return rc;
	if (o->max_bytes) {
		fprintf(stderr, "%s: --max-bytes: %s\n", prog, jitk_error_last()->message);
		die_usage(usage_cache);
	}
	fprintf(stderr, "%s: warning: JITK_CACHE_MAX_BYTES=%s; no bound\n", prog,
		jitk_error_last()->message);
	return jitk_cache_prune(out, dir, NULL);
}

static void report_sig(void *ctx, const char *what, const char *target, jitk_sig_state st,
		       const char *signer)
{
	(void)ctx;
	if (st == JITK_SIG_TRUSTED)
		printf("signed by %s: %s (%s)\n", signer, what, target);
	else if (st == JITK_SIG_UNTRUSTED)
		printf("signed by %s, not a trusted key: %s (%s)\n", signer, what, target);
	else if (st == JITK_SIG_BAD)
		printf("bad signature (claims %s): %s (%s)\n", signer, what, target);
	else
		printf("unsigned: %s (%s)\n", what, target);
}

/* jitk cache verify --trusted-keys: who signed each entry of path (a cache
 * directory or a bundle); 1 unless a trusted key signed every one. */
static int verify_signatures(const char *path, const char *keys)
{
	jitk_sig_summary s = JITK_SIG_SUMMARY_INIT;

	if (jitk_signatures_check(&s, path, keys, report_sig, NULL))
		return fail_last();
	printf("%s: %llu entries: %llu signed by trusted keys, %llu by other keys, %llu bad "
	       "signatures, %llu unsigned\n",
	       path, (unsigned long long)s.entries, (unsigned long long)s.trusted,
	       (unsigned long long)s.untrusted, (unsigned long long)s.bad,
	       (unsigned long long)s.unsigned_entries);
	return s.trusted == s.entries && !s.broken ? 0 : 1;
}

static void report_bundle(void *ctx, const char *what, const char *problem)
{
	(void)ctx;
	printf("bad entry: %s: %s\n", what, problem);
}

/* jitk cache verify FILE, pack, unpack. */
static int cache_bundle(const char *what, const char *file, const char *dir, const cli_opts *o)
{
	jitk_bundle_summary s = JITK_BUNDLE_SUMMARY_INIT;
	int rc;

	if (!strcmp(what, "verify")) {
		if (jitk_bundle_verify(&s, file, report_bundle, NULL))
			return fail_last();
		printf("%s: %llu entries, %llu bytes, %llu bad\n", file, (unsigned long long)s.entries,
		       (unsigned long long)s.bytes, (unsigned long long)s.bad);
		if (o->trusted_keys && verify_signatures(file, o->trusted_keys))
			return 1;
	} else if (!strcmp(what, "pack")) {
		if ((rc = jitk_cache_pack(&s, file, dir, o->arch, report_bundle, NULL))) {
			fail_last();
			if (rc == JITK_EINVAL)
				die_usage(usage_cache);
			return 1;
		}
		printf("%s: packed %llu entries (%llu bytes) from %s; %llu of other architectures "
		       "and %llu bad left out\n",
		       file, (unsigned long long)s.entries, (unsigned long long)s.bytes, dir,
		       (unsigned long long)s.skipped, (unsigned long long)s.bad);
	} else {
		if (jitk_cache_unpack(&s, file, dir, report_bundle, NULL))
			return fail_last();
		printf("%s: unpacked %llu entries (%llu bytes) from %s; %llu already there, %llu bad "
		       "left out\n",
		       dir, (unsigned long long)s.entries, (unsigned long long)s.bytes, file,
		       (unsigned long long)s.skipped, (unsigned long long)s.bad);
	}
	return s.bad ? 1 : 0;
}

static int cmd_cache(int argc, char **argv)
{
	static const char *const cmds[] = { "stats", "verify", "clear", "prune", "pack", "unpack" };
	cli_opts o;
	char *def = NULL;
	const char *what, *dir, *file = NULL;
	size_t i;
	int rc = 0, files;

	parse_opts(&o, argc, argv, usage_cache, "--cache --max-bytes --arch -o --trusted-keys");
	what = o.npos ? o.pos[0] : "";
	/* verify FILE and unpack FILE take a bundle */
	files = !strcmp(what, "unpack") || (!strcmp(what, "verify") && o.npos >= 2);
	if (o.npos != 1 + files) {
		if (o.npos > 1 + files)
			fprintf(stderr, "%s: unexpected argument '%s'\n", prog, o.pos[1 + files]);
		else if (o.npos)
			fprintf(stderr, "%s: cache %s: which bundle file?\n", prog, what);
		else
			fprintf(stderr, "%s: cache: which command? (stats, verify, clear, prune, pack or "
				"unpack)\n", prog);
		die_usage(usage_cache);
	}
	for (i = 0; i < CLI_ARRAY_SIZE(cmds) && strcmp(what, cmds[i]); i++)
		;
	if (i == CLI_ARRAY_SIZE(cmds)) {
		fprintf(stderr, "%s: unknown cache command '%s'\n", prog, what);
		die_usage(usage_cache);
	}
	if (o.max_bytes && strcmp(what, "prune")) {
		fprintf(stderr, "%s: --max-bytes is an option of 'cache prune' only\n", prog);
		die_usage(usage_cache);
	}
	if (o.trusted_keys && strcmp(what, "verify")) {
		fprintf(stderr, "%s: --trusted-keys is an option of 'cache verify' only\n", prog);
		die_usage(usage_cache);
	}
	if ((o.arch || o.out) && strcmp(what, "pack")) {
		fprintf(stderr, "%s: %s is an option of 'cache pack' only\n", prog, o.arch ? "--arch" : "-o");
		die_usage(usage_cache);
	}
	if (!strcmp(what, "pack") && !o.out) {
		fprintf(stderr, "%s: cache pack: which file? (-o FILE)\n", prog);
		die_usage(usage_cache);
	}
	if (files && o.cache && !strcmp(what, "verify")) {
		fprintf(stderr, "%s: cache verify: a bundle FILE or --cache DIR, not both\n", prog);
		die_usage(usage_cache);
	}
	file = !strcmp(what, "pack") ? o.out : files ? o.pos[1] : NULL;
	if (file && !strcmp(what, "verify"))
		return cache_bundle(what, file, NULL, &o);
	if (o.cache) {
		dir = o.cache;
	} else if ((rc = jitk_cache_default_dir(&def))) {
		if (rc == JITK_ENOENT)
			fprintf(stderr, "%s: no cache directory (give --cache DIR)\n", prog);
		else
			fail_last();
		return 1;
	} else {
		dir = def;
	}
	if (file) {
		rc = cache_bundle(what, file, dir, &o);
	} else if (!strcmp(what, "stats") || !strcmp(what, "verify")) {
		int verify = !strcmp(what, "verify");
		jitk_cache_summary s = JITK_CACHE_SUMMARY_INIT;

		if (jitk_cache_stats(&s, dir, verify, verify ? report_item : NULL, NULL)) {
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
			if (verify && o.trusted_keys && verify_signatures(dir, o.trusted_keys))
				rc = 1;
		}
	} else if (!strcmp(what, "clear")) {
		jitk_clear_result r = JITK_CLEAR_RESULT_INIT;

		if (jitk_cache_clear(&r, dir)) {
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
		jitk_prune_result pr = JITK_PRUNE_RESULT_INIT;

		if (cache_prune(&pr, dir, &o)) {
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
	jitk_free(def);
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
		{ "key", jitk_cli_key }, { "header", jitk_cli_header },
	};
	const char *names[CLI_ARRAY_SIZE(cmds)], *cmd;
	size_t i;
	int near;

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
		jitk_nvrtc_version(&major, &minor);
		printf("jitk %s (NVRTC %d.%d, cache format %d)\n", jitk_version(), major, minor,
		       jitk_cache_format());
		return 0;
	}
	for (i = 0; i < CLI_ARRAY_SIZE(cmds); i++) {
		if (!strcmp(cmd, cmds[i].name))
			return cmds[i].fn(argc - 2, argv + 2);
		names[i] = cmds[i].name;
	}
	if (cmd[0] == '-')
		jitk_cli_usage_error(usage_main, "unknown option '%s'", cmd);
	if ((near = jitk_nearest(cmd, names, CLI_ARRAY_SIZE(names))) >= 0)
		jitk_cli_usage_error(usage_main, "unknown command '%s' (did you mean '%s'?)", cmd,
				     names[near]);
	jitk_cli_usage_error(usage_main, "unknown command '%s'", cmd);
	return 2;
}
