/* file.c - files, directories, the environment, sizes. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/internal.h"

/* --------------------------------------------------------------- files */

const char *jitk__file_kind(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "a regular file";
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFSOCK: return "a socket";
	case S_IFLNK: return "a symbolic link";
	default: return "not a regular file";
	}
}

int jitk__read_file(char **out, size_t *out_len, const char *path, size_t max)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, rc = JITK_OK;

	*out = NULL;
	if (out_len)
		*out_len = 0;
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer
	 * forever; a device may block too. Nothing but a regular file is read
	 * (the flag changes nothing for those). Symbolic links are followed:
	 * specs and templates are the user's own files, and a tree may link
	 * them in from elsewhere. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return jitk__error(JITK_EIO, "%s: cannot open: %s", path,
				   strerror(errno));
	if (fstat(fd, &st)) {
		rc = jitk__error(JITK_EIO, "%s: cannot stat: %s", path, strerror(errno));
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = jitk__error(JITK_EIO, "%s: is %s, not a regular file", path,
				 jitk__file_kind((unsigned)st.st_mode));
		goto done;
	}
	if ((uint64_t)st.st_size > max) {
		rc = jitk__error(JITK_EINVAL,
				 "%s: file is %lld bytes; the limit is %zu",
				 path, (long long)st.st_size, max);
		goto done;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = jitk__error(JITK_ENOMEM, "out of memory reading %s", path);
		goto done;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = jitk__error(JITK_EIO, "%s: read failed: %s", path,
					 n ? strerror(errno) : "file shrank");
			goto done;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	buf = NULL;
	if (out_len)
		*out_len = got;
done:
	free(buf);
	close(fd);
	return rc;
}

int jitk__mkdirs(const char *path, unsigned mode)
{
	char *p = jitk__strdup(path), *s;
	int rc = 0;

	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;

			*s = '\0';
			if (mkdir(p, (mode_t)mode) && errno != EEXIST) {
				rc = -1;
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	return rc;
}

const char *jitk__env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int jitk__env_bool(const jitk_logger *lg, const char *name, int safe, const char *safe_means)
{
	static const char *const on[] = { "1", "true", "yes", "on" };
	static const char *const off[] = { "0", "false", "no", "off" };
	const char *v = jitk__env(name);
	char shown[48];
	size_t i;

	if (!v)
		return 0;
	for (i = 0; i < JITK_ARRAY_SIZE(on); i++) {
		if (!strcasecmp(v, on[i]))
			return 1;
		if (!strcasecmp(v, off[i]))
			return 0;
	}
	/* the value as one printable line, however it was spelled */
	for (i = 0; v[i] && i < sizeof(shown) - 4; i++)
		shown[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
	snprintf(shown + i, sizeof(shown) - i, "%s", v[i] ? "..." : "");
	if (lg)
		jitk__log(lg, JITK_LOG_WARN, "%s='%s' is not one of " JITK_ENV_BOOL_VALUES
			  ": taken as %d (%s)", name, shown, safe ? 1 : 0, safe_means);
	return safe ? 1 : 0;
}

int jitk__parse_size(uint64_t *out, const char *s)
{
	static const char units[] = "KMGT";
	uint64_t v = 0, mul = 1;
	const char *p = s, *u;

	*out = 0;
	if (!s || *p < '0' || *p > '9')
		return -1; /* also refuses "", "-1", "+1", " 1" */
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (*p && (u = strchr(units, toupper((unsigned char)*p)))) {
		int i;

		for (i = 0; i <= u - units; i++)
			mul *= 1024;
		p++;
		if (*p == 'i' && p[1] == 'B')
			p++;
	}
	if (*p == 'B')
		p++;
	if (*p || v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}
