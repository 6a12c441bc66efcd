/* key.c - jitk key generate NAME -o PREFIX: a builder's signing key
 * (docs/cache-format.md, "Signatures"; docs/ci-images.md has the recipe).
 * Exit status: 0 ok, 1 failure, 2 usage. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "jitk.h"

static const char usage_key[] =
	"usage: jitk key generate NAME -o PREFIX\n"
	"\n"
	"Make an ed25519 signing key named NAME (1 to 64 letters, digits, '.', '_'\n"
	"or '-'; say who signs and when, e.g. ci-2026a): the secret key goes to\n"
	"PREFIX.secret (mode 0600: keep it on the builder, JITK_SIGNING_KEY=FILE),\n"
	"the public key line NAME:BASE64 to PREFIX.public and to stdout (give it\n"
	"to the nodes: JITK_TRUSTED_KEYS). Neither file may exist: an existing\n"
	"file or a symbolic link is refused, never overwritten.\n";

/* Write line and a newline to path, which must not exist (0644). */
static int write_new(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
	size_t n = strlen(line);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, line, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && !fsync(fd);
	if (close(fd) || !ok) {
		(void)unlink(path);
		return -1;
	}
	return 0;
}

int jitk_cli_key(int argc, char **argv)
{
	const char *name = NULL, *prefix = NULL;
	char *secret, *public_path, *line = NULL;
	struct stat st;
	int i, npos = 0, rc = 0;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage_key, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "-o")) {
			if (i + 1 >= argc)
				jitk_cli_usage_error(usage_key, "option '-o' needs a value");
			prefix = argv[++i];
		} else if (!strncmp(argv[i], "-o", 2) && argv[i][2]) {
			prefix = argv[i] + 2 + (argv[i][2] == '=');
		} else if (argv[i][0] == '-' && argv[i][1]) {
			jitk_cli_usage_error(usage_key, "unknown option '%.64s'", argv[i]);
		} else if (npos == 0) {
			if (strcmp(argv[i], "generate"))
				jitk_cli_usage_error(usage_key, "unknown key command '%.64s' (generate?)",
						     argv[i]);
			npos++;
		} else if (npos == 1) {
			name = argv[i];
			npos++;
		} else {
			jitk_cli_usage_error(usage_key, "unexpected argument '%.64s'", argv[i]);
		}
	}
	if (!npos)
		jitk_cli_usage_error(usage_key, "key: which command? (generate)");
	if (!name)
		jitk_cli_usage_error(usage_key, "missing NAME");
	if (!prefix || !*prefix)
		jitk_cli_usage_error(usage_key, "key generate: where? (-o PREFIX)");
	secret = malloc(strlen(prefix) + 8);
	public_path = malloc(strlen(prefix) + 8);
	if (!secret || !public_path) {
		fprintf(stderr, "jitk: out of memory\n");
		exit(1);
	}
	sprintf(secret, "%s.secret", prefix);
	sprintf(public_path, "%s.public", prefix);
	/* both names checked first, so that a refusal leaves nothing behind */
	errno = 0;
	if (!lstat(public_path, &st) || errno != ENOENT) {
		fprintf(stderr, "jitk: %s: %s\n", public_path,
			errno != ENOENT && errno ? strerror(errno)
			: S_ISLNK(st.st_mode)	 ? "is a symbolic link (refused)"
						 : "exists (a key file is never overwritten)");
		rc = 1;
	} else if (jitk_key_generate(&line, name, secret)) {
		fprintf(stderr, "jitk: %s\n", jitk_error_last()->message);
		rc = jitk_error_last()->status == JITK_EINVAL ? 2 : 1;
	} else if (write_new(public_path, line)) {
		fprintf(stderr, "jitk: %s: %s\n", public_path, strerror(errno));
		(void)unlink(secret);
		rc = 1;
	} else {
		printf("%s\n", line);
		fprintf(stderr, "jitk: wrote the secret key %s (keep it on the builder: "
			"JITK_SIGNING_KEY) and the public key %s (JITK_TRUSTED_KEYS on the nodes)\n",
			secret, public_path);
	}
	jitk_free(line);
	free(secret);
	free(public_path);
	return rc;
}
