/* bundle.c - a cache in one file.
 *
 *   header (128 bytes) | entries, in key order, each at a multiple of 64 |
 *   index: one 64-byte record per entry (key, target, offset, size), sorted
 *
 * Each entry is the exact bytes of a cache entry file (format 2), so it is
 * verified on lookup exactly as one; the header's checksum covers the
 * header and the index. The layout is canonical (no gaps but the zero
 * padding to 64 bytes, nothing after the index), so that verify can
 * account for every byte and packing the same cache gives the same file.
 * Nothing needs parsing to find an entry: the file can be mapped and the
 * index searched in place. jitk itself reads with pread: a mapped file
 * that someone truncates raises SIGBUS, and the library never crashes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spec/spec.h"
#include "store/bundle.h"
#include "store/cache.h"
#include "store/sign.h"

static const char bundle_magic[8] = { 'J', 'I', 'T', 'K', 'B', 'N', 'D', '1' };

/* Header fields (little endian):
 *   0 magic[8]  8 bundle format u32  12 header size u32  16 entry format u32
 *  20 entry count u32  24 index offset u64  32 file size u64  40 checksum[32]
 *  72 reserved[56], zero
 * Index record: 0 key[32]  32 target[16] (NUL-padded)  48 offset u64
 *  56 size u64. */
#define SUM_AT 40
#define RESERVED_AT 72

typedef struct {
	uint8_t key[JITK_HASH_SIZE];
	char target[16];
	uint64_t offset, size;
} record;

struct jitk_bundle {
	char *path;
	int fd;
	record *index;
	uint32_t count;
	uint64_t index_at, file_size;
};

static uint64_t align_up(uint64_t v)
{
	return (v + JITK_BUNDLE_ALIGN - 1) & ~(uint64_t)(JITK_BUNDLE_ALIGN - 1);
}

static int checksum(uint8_t out[JITK_HASH_SIZE], const uint8_t *head, const uint8_t *index,
		    size_t index_len)
{
	return jitk__checksum_hole(out, head, JITK_BUNDLE_HEADER, SUM_AT, index, index_len);
}

static int read_at(int fd, void *buf, size_t n, uint64_t at)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t k = pread(fd, p, n, (off_t)at);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
		at += (uint64_t)k;
	}
	return 0;
}

static int write_all_at(int fd, const void *buf, size_t n, uint64_t at)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t k = pwrite(fd, p, n, (off_t)at);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (!k)
				errno = EIO;
			return -1;
		}
		p += k;
		n -= (size_t)k;
		at += (uint64_t)k;
	}
	return 0;
}

/* ---------------------------------------------------------------- open */

/* Check header and index (already read) and fill b; NULL or why. */
static const char *parse(jitk_bundle *b, const uint8_t *h, const uint8_t *idx, size_t idx_len)
{
	uint8_t sum[JITK_HASH_SIZE];
	uint64_t at = JITK_BUNDLE_HEADER;
	uint32_t i;
	size_t k;

	for (k = RESERVED_AT; k < JITK_BUNDLE_HEADER; k++)
		if (h[k])
			return "bad header fields (reserved bytes are not zero)";
	if (checksum(sum, h, idx, idx_len) || memcmp(sum, h + SUM_AT, JITK_HASH_SIZE))
		return "header or index checksum mismatch";
	b->index = calloc(b->count ? b->count : 1, sizeof(*b->index));
	if (!b->index)
		return "out of memory";
	for (i = 0; i < b->count; i++) {
		const uint8_t *r = idx + (size_t)i * JITK_BUNDLE_RECORD;
		record *e = &b->index[i];

		memcpy(e->key, r, JITK_HASH_SIZE);
		memcpy(e->target, r + 32, 16);
		e->offset = jitk__get64(r + 48);
		e->size = jitk__get64(r + 56);
		if (e->target[15] || !e->target[0])
			return "an index record with a bad target";
		for (k = strlen(e->target); k < 16; k++)
			if (e->target[k])
				return "an index record with a bad target";
		if (i && memcmp(b->index[i - 1].key, e->key, JITK_HASH_SIZE) >= 0)
			return "the index is not in strictly increasing key order";
		/* Canonical layout: each entry right after the one before (at a
		 * multiple of 64), within the limits of an entry. */
		if (e->offset != at || e->size < JITK_ENTRY_HEADER ||
		    e->size > JITK_ENTRY_MAX_SIZE)
			return "an index record with a bad offset or size";
		at = align_up(e->offset + e->size);
	}
	if (at != b->index_at)
		return "the index does not start after the last entry";
	return NULL;
}

int jitk__bundle_open(jitk_bundle **out, const char *path, int trusted, char *why, size_t n)
{
	jitk_bundle *b = calloc(1, sizeof(*b));
	uint8_t h[JITK_BUNDLE_HEADER], *idx = NULL;
	const char *bad = NULL;
	struct stat st;
	size_t idx_len = 0;

	*out = NULL;
	why[0] = '\0';
	if (b)
		b->fd = -1;
	if (!b || !(b->path = jitk__strdup(path))) {
		snprintf(why, n, "out of memory");
		goto fail;
	}
	/* O_NONBLOCK: a FIFO named as a bundle is refused, not waited on. */
	b->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (b->fd < 0 || fstat(b->fd, &st)) {
		snprintf(why, n, "%s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode))
		bad = "not a regular file";
	else if (trusted && st.st_uid != jitk__trusted_uid() && st.st_uid != 0)
		bad = "owned by another user";
	else if (trusted && (st.st_mode & (S_IWGRP | S_IWOTH)))
		bad = "writable by others";
	else if (read_at(b->fd, h, sizeof(h), 0))
		bad = st.st_size ? "truncated header" : "empty file";
	else if (memcmp(h, bundle_magic, 8))
		bad = "not a jitk bundle (bad magic)";
	else if (jitk__get32(h + 8) != JITK_BUNDLE_FORMAT || jitk__get32(h + 12) != JITK_BUNDLE_HEADER)
		bad = "unsupported bundle format version";
	else if (jitk__get32(h + 16) != JITK_CACHE_FORMAT && jitk__get32(h + 16) != 3)
		bad = "its entries are of another cache format";
	if (bad)
		goto bad;
	b->count = jitk__get32(h + 20);
	b->index_at = jitk__get64(h + 24);
	b->file_size = jitk__get64(h + 32);
	/* Sizes are checked against limits and the file before any use. */
	if (b->count > JITK_BUNDLE_MAX_ENTRIES || b->file_size != (uint64_t)st.st_size ||
	    b->index_at < JITK_BUNDLE_HEADER || b->index_at > b->file_size ||
	    b->file_size - b->index_at != (uint64_t)b->count * JITK_BUNDLE_RECORD) {
		bad = b->file_size != (uint64_t)st.st_size ? "its size is not the size in its header"
							   : "sizes out of range";
		goto bad;
	}
	idx_len = (size_t)b->count * JITK_BUNDLE_RECORD;
	if (!(idx = malloc(idx_len ? idx_len : 1))) {
		bad = "out of memory";
		goto bad;
	}
	if (read_at(b->fd, idx, idx_len, b->index_at)) {
		bad = "truncated index";
		goto bad;
	}
	if (!(bad = parse(b, h, idx, idx_len))) {
		free(idx);
		*out = b;
		return 0;
	}
bad:
	snprintf(why, n, "%s", bad);
fail:
	free(idx);
	jitk__bundle_close(b);
	return -1;
}

void jitk__bundle_close(jitk_bundle *b)
{
	if (!b)
		return;
	if (b->fd >= 0)
		close(b->fd);
	free(b->index);
	free(b->path);
	free(b);
}

const char *jitk__bundle_path(const jitk_bundle *b)
{
	return b->path;
}

int jitk__bundle_magic(const char *path)
{
	char m[8];
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), ok;

	if (fd < 0)
		return 0;
	ok = read_at(fd, m, sizeof(m), 0) == 0 && !memcmp(m, bundle_magic, 8);
	close(fd);
	return ok;
}

/* -------------------------------------------------------------- lookup */

static int by_key(const void *k, const void *r)
{
	return memcmp(k, ((const record *)r)->key, JITK_HASH_SIZE);
}

/* Read and verify the entry of index record r. */
static int read_entry(jitk_bundle *b, const record *r, jitk_cache_entry *out,
		      const char **problem)
{
	uint8_t *buf = malloc((size_t)r->size);
	int rc = -1;

	memset(out, 0, sizeof(*out));
	*problem = NULL;
	if (!buf)
		*problem = "out of memory";
	else if (read_at(b->fd, buf, (size_t)r->size, r->offset))
		*problem = "truncated (the file is shorter than its index says)";
	else if (!jitk__entry_decode(out, buf, (size_t)r->size, problem) &&
		 (*problem = jitk__entry_mismatch(out, r->key, r->target)))
		jitk__cache_entry_free(out);
	else if (!*problem)
		rc = 0;
	free(buf);
	return rc;
}

int jitk__bundle_get(jitk_bundle *b, const uint8_t key[JITK_HASH_SIZE], const char *target,
		     jitk_cache_entry *out, const char **problem)
{
	const record *r = bsearch(key, b->index, b->count, sizeof(*b->index), by_key);

	memset(out, 0, sizeof(*out));
	*problem = NULL;
	if (!r)
		return JITK_ENOENT;
	if (strcmp(r->target, target)) {
		*problem = "target mismatch";
		return -1;
	}
	return read_entry(b, r, out, problem);
}

uint32_t jitk__bundle_count(const jitk_bundle *b)
{
	return b->count;
}

int jitk__bundle_entry(jitk_bundle *b, uint32_t i, jitk_cache_entry *out, const char **problem)
{
	memset(out, 0, sizeof(*out));
	*problem = i < b->count ? NULL : "no such entry";
	return *problem ? -1 : read_entry(b, &b->index[i], out, problem);
}

/* ------------------------------------------------------------- public */

static void report_problem(jitk_bundle_report_fn report, void *payload, const char *what,
			   const char *problem)
{
	if (report)
		report(payload, what, problem);
}

static void record_name(char *out, size_t n, const record *r)
{
	char hex[2 * JITK_HASH_SIZE + 1];

	jitk__hex(hex, r->key, JITK_HASH_SIZE);
	snprintf(out, n, "key %s (%s)", hex, r->target);
}

/* The public calls count into a summary of the library's own, then fill
 * the caller's (NULL allowed) up to its version (jitk.h, "Output
 * structs"): sizes[v] is version v's size. */
static const size_t summary_sizes[] = { 0, JITK_OUT_END(jitk_bundle_summary, bad) };

static int summary_check(const jitk_bundle_summary *out)
{
	return out ? jitk__out_check("jitk_bundle_summary", out->version, JITK_BUNDLE_SUMMARY_VERSION)
		   : 0;
}

static int summary_put(jitk_bundle_summary *out, const jitk_bundle_summary *sum, int rc)
{
	if (out)
		jitk__out_fill(out, sum, summary_sizes);
	return rc;
}

/* Open file as an administration command does: JITK_ENOENT or JITK_EIO
 * with one message naming the file. */
static int admin_open(jitk_bundle **b, const char *file)
{
	char why[256];
	struct stat st;

	if (stat(file, &st) && (errno == ENOENT || errno == ENOTDIR))
		return jitk__error(JITK_ENOENT, "no bundle at %s", file);
	if (jitk__bundle_open(b, file, 0, why, sizeof(why)))
		return jitk__error(JITK_EIO, "%s: %s", file, why);
	return 0;
}

static int bundle_verify(jitk_bundle_summary *out, const char *file, jitk_bundle_report_fn report,
			 void *payload)
{
	jitk_bundle *b;
	uint8_t pad[JITK_BUNDLE_ALIGN];
	uint32_t i;
	int rc;

	if (!file)
		return jitk__error(JITK_EINVAL, "jitk_bundle_verify: file is NULL");
	if ((rc = admin_open(&b, file)))
		return rc;
	for (i = 0; i < b->count; i++) {
		const record *r = &b->index[i];
		uint64_t end = r->offset + r->size, gap = align_up(end) - end, k;
		const char *problem = NULL;
		jitk_cache_entry e;
		char what[128];

		if (!read_entry(b, r, &e, &problem)) {
			problem = jitk__entry_kind_problem(&e);
			jitk__cache_entry_free(&e);
		}
		/* The padding is covered by no checksum: it must be zeros. */
		if (!problem && gap && read_at(b->fd, pad, (size_t)gap, end))
			problem = "truncated padding";
		for (k = 0; !problem && k < gap; k++)
			if (pad[k])
				problem = "padding after the entry is not zero";
		if (problem) {
			record_name(what, sizeof(what), r);
			report_problem(report, payload, what, problem);
			if (out)
				out->bad++;
		} else if (out) {
			out->entries++;
			out->bytes += r->size;
		}
	}
	jitk__bundle_close(b);
	return 0;
}

int jitk_bundle_verify(jitk_bundle_summary *out, const char *file, jitk_bundle_report_fn report,
		       void *payload)
{
	jitk_bundle_summary sum = JITK_BUNDLE_SUMMARY_INIT;
	int rc;

	if ((rc = summary_check(out)))
		return rc;
	return summary_put(out, &sum, bundle_verify(&sum, file, report, payload));
}

/* ---------------------------------------------------------------- pack */

typedef struct {
	int *ccs; /* SM numbers asked for; NULL: all */
	size_t nccs;
	record *items;
	char **paths;
	size_t n, cap;
	jitk_bundle_summary *out;
	jitk_bundle_report_fn report;
	void *payload;
	int oom;
} pack_ctx;

static int wanted(const pack_ctx *p, const char *target)
{
	jitk_arch a;
	size_t i;

	if (!p->ccs)
		return 1;
	if (jitk__arch_parse(&a, target))
		return 0;
	for (i = 0; i < p->nccs; i++)
		if (p->ccs[i] == a.cc)
			return 1;
	return 0;
}

static void pack_bad(void *ctx, const char *path, const char *problem)
{
	pack_ctx *p = ctx;

	report_problem(p->report, p->payload, path, problem);
	if (p->out)
		p->out->bad++;
}

static int pack_collect(void *ctx, const char *path, const jitk_cache_entry *e)
{
	pack_ctx *p = ctx;
	const char *why = jitk__entry_kind_problem(e);

	if (why) {
		pack_bad(p, path, why);
		return 0;
	}
	if (!wanted(p, e->target)) {
		if (p->out)
			p->out->skipped++;
		return 0;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		record *items = realloc(p->items, cap * sizeof(*items));
		char **paths = items ? realloc(p->paths, cap * sizeof(*paths)) : NULL;

		if (items)
			p->items = items;
		if (!paths) {
			p->oom = 1;
			errno = ENOMEM;
			return -1;
		}
		p->paths = paths;
		p->cap = cap;
	}
	memset(&p->items[p->n], 0, sizeof(p->items[p->n]));
	memcpy(p->items[p->n].key, e->key, JITK_HASH_SIZE);
	/* decoded targets are at most 15 characters */
	memcpy(p->items[p->n].target, e->target, strnlen(e->target, sizeof(p->items[p->n].target) - 1));
	/* the index of its path, kept through the sort */
	p->items[p->n].offset = p->n;
	if (!(p->paths[p->n] = jitk__strdup(path))) {
		p->oom = 1;
		errno = ENOMEM;
		return -1;
	}
	p->n++;
	return 0;
}

static int by_record_key(const void *a, const void *b)
{
	return memcmp(((const record *)a)->key, ((const record *)b)->key, JITK_HASH_SIZE);
}

static int parse_archs(pack_ctx *p, const char *archs)
{
	const char *s = archs;

	if (!archs)
		return 0;
	p->ccs = calloc(strlen(archs) + 1, sizeof(*p->ccs));
	if (!p->ccs)
		return jitk__error(JITK_ENOMEM, "out of memory");
	while (*s) {
		size_t n = strcspn(s, ",");
		char name[JITK_ARCH_STRLEN];
		jitk_arch a;

		snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), s);
		if (!n || n >= sizeof(name) || jitk__arch_parse(&a, name))
			return jitk__spec_arch_error(s, n);
		p->ccs[p->nccs++] = a.cc;
		s += n + (s[n] == ',');
	}
	if (!p->nccs)
		return jitk__error(JITK_EINVAL, "no architecture given");
	return 0;
}

/* The directory of file (for the temporary file and its fsync). */
static char *dir_of(const char *file)
{
	const char *slash = strrchr(file, '/');

	return slash ? jitk__strndup(file, slash == file ? 1 : (size_t)(slash - file)) : jitk__strdup(".");
}

/* Write the entries p collected (sorted) to fd; out: the index bytes,
 * where they go (the end of the last entry, padded), how many. */
static int pack_write(pack_ctx *p, int fd, uint8_t **index_out, uint64_t *index_at,
		      size_t *count_out)
{
	uint8_t *index = calloc(p->n ? p->n : 1, JITK_BUNDLE_RECORD);
	static const uint8_t zeros[JITK_BUNDLE_HEADER];
	uint64_t at = JITK_BUNDLE_HEADER;
	size_t i, count = 0;
	jitk_signer *signer = NULL;
	int rc = 0;

	*index_out = NULL;
	if (!index)
		return jitk__error(JITK_ENOMEM, "out of memory");
	/* provenance: with $JITK_SIGNING_KEY, every entry is signed with it (a
	 * key that cannot be used is an I/O error here: EINVAL is the
	 * caller's bad architecture list) */
	if (jitk__signer_open(&signer, NULL)) {
		char why[512];

		snprintf(why, sizeof(why), "%s", jitk_error_last()->message);
		free(index);
		return jitk__error(JITK_EIO, "%s", why);
	}
	if (write_all_at(fd, zeros, sizeof(zeros), 0))
		rc = -1;
	for (i = 0; !rc && i < p->n; i++) {
		record *r = &p->items[i];
		const char *path = p->paths[r->offset], *problem = NULL;
		jitk_cache_entry e;
		uint8_t *bytes = NULL, *rec;
		size_t len = 0;

		/* Read again (the first pass kept only names): the entry may
		 * have been replaced or removed since. */
		if (jitk__entry_read(&e, path, 1, &problem)) {
			if (problem)
				pack_bad(p, path, problem);
			continue;
		}
		if ((problem = jitk__entry_mismatch(&e, r->key, r->target)) ||
		    (problem = jitk__entry_kind_problem(&e))) {
			pack_bad(p, path, problem);
			jitk__cache_entry_free(&e);
			continue;
		}
		/* where the entry came from is the cache's story, not the bundle's */
		e.from = JITK_FROM_HERE;
		if (!(signer && (rc = jitk__sign_entry(signer, &e))))
			rc = jitk__entry_encode(&bytes, &len, &e);
		jitk__cache_entry_free(&e);
		if (rc)
			break;
		if (write_all_at(fd, bytes, len, at)) {
			free(bytes);
			rc = -1;
			break;
		}
		free(bytes);
		rec = index + count * JITK_BUNDLE_RECORD;
		memcpy(rec, r->key, JITK_HASH_SIZE);
		memcpy(rec + 32, r->target, strlen(r->target));
		jitk__put64(rec + 48, at);
		jitk__put64(rec + 56, len);
		if (p->out) {
			p->out->entries++;
			p->out->bytes += len;
		}
		count++;
		/* zero padding up to the next entry (pwrite past the end
		 * leaves a hole, which reads as zeros; write it anyway) */
		if (align_up(at + len) > at + len &&
		    write_all_at(fd, zeros, (size_t)(align_up(at + len) - (at + len)), at + len))
			rc = -1;
		at = align_up(at + len);
	}
	jitk__signer_free(signer);
	if (rc) {
		free(index);
		return rc < 0 ? jitk__error(JITK_EIO, "cannot write the bundle: %s", strerror(errno)) : rc;
	}
	*index_out = index;
	*index_at = at;
	*count_out = count;
	return 0;
}

static int cache_pack(jitk_bundle_summary *out, const char *file, const char *cache_dir,
		      const char *archs, jitk_bundle_report_fn report, void *payload)
{
	pack_ctx p;
	uint8_t head[JITK_BUNDLE_HEADER], *index = NULL;
	size_t count = 0, i;
	uint64_t index_at = JITK_BUNDLE_HEADER;
	char *dir = NULL, *root = NULL, *tmp = NULL;
	int rc, fd = -1, dfd = -1;

	if (!file)
		return jitk__error(JITK_EINVAL, "jitk_cache_pack: file is NULL");
	memset(&p, 0, sizeof(p));
	p.out = out;
	p.report = report;
	p.payload = payload;
	if ((rc = parse_archs(&p, archs)) || (rc = jitk__output_check("the bundle", file)))
		goto done;
	if (!cache_dir)
		rc = jitk_cache_default_dir(&root);
	else if (!(root = jitk__strdup(cache_dir)))
		rc = jitk__error(JITK_ENOMEM, "out of memory");
	if (rc)
		goto done;
	if ((rc = jitk__cache_each(root, pack_collect, pack_bad, &p))) {
		if (p.oom)
			rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto done;
	}
	if (p.n)
		qsort(p.items, p.n, sizeof(*p.items), by_record_key);
	if (!(dir = dir_of(file))) {
		rc = jitk__error(JITK_ENOMEM, "out of memory");
		goto done;
	}
	if ((rc = jitk__temp_create(&tmp, &fd, file)))
		goto done;
	if ((rc = pack_write(&p, fd, &index, &index_at, &count)))
		goto done;
	memset(head, 0, sizeof(head));
	memcpy(head, bundle_magic, 8);
	jitk__put32(head + 8, JITK_BUNDLE_FORMAT);
	jitk__put32(head + 12, JITK_BUNDLE_HEADER);
	jitk__put32(head + 16, JITK_CACHE_FORMAT);
	jitk__put32(head + 20, (uint32_t)count);
	jitk__put64(head + 24, index_at);
	jitk__put64(head + 32, index_at + (uint64_t)count * JITK_BUNDLE_RECORD);
	if (checksum(head + SUM_AT, head, index, count * JITK_BUNDLE_RECORD)) {
		rc = jitk__error(JITK_ENOMEM, "SHA-256 failed");
		goto done;
	}
	if (write_all_at(fd, index, count * JITK_BUNDLE_RECORD, index_at) ||
	    write_all_at(fd, head, sizeof(head), 0) ||
	    ftruncate(fd, (off_t)(index_at + (uint64_t)count * JITK_BUNDLE_RECORD)) ||
	    fchmod(fd, 0644) || fsync(fd)) {
		rc = jitk__error(JITK_EIO, "cannot write %s: %s", tmp, strerror(errno));
		goto done;
	}
	/* once more: what is at FILE may have changed while packing */
	if ((rc = jitk__output_check("the bundle", file)))
		goto done;
	if (rename(tmp, file)) {
		rc = jitk__error(JITK_EIO, "cannot rename %s to %s: %s", tmp, file, strerror(errno));
		goto done;
	}
	free(tmp);
	tmp = NULL;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0)
		(void)fsync(dfd);
	rc = JITK_OK;
done:
	if (tmp)
		jitk__temp_remove(tmp, fd);
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	for (i = 0; i < p.n; i++)
		free(p.paths[i]);
	free(p.paths);
	free(p.items);
	free(p.ccs);
	free(index);
	free(tmp);
	free(dir);
	free(root);
	return rc;
}

int jitk_cache_pack(jitk_bundle_summary *out, const char *file, const char *cache_dir,
		    const char *archs, jitk_bundle_report_fn report, void *payload)
{
	jitk_bundle_summary sum = JITK_BUNDLE_SUMMARY_INIT;
	int rc;

	if ((rc = summary_check(out)))
		return rc;
	return summary_put(out, &sum, cache_pack(&sum, file, cache_dir, archs, report, payload));
}

/* -------------------------------------------------------------- unpack */

static int cache_unpack(jitk_bundle_summary *out, const char *file, const char *cache_dir,
			jitk_bundle_report_fn report, void *payload)
{
	jitk_logger quiet = { NULL, NULL, JITK_LOG_ERROR };
	jitk_bundle *b = NULL;
	jitk_cache *c = NULL;
	jitk_trust *trust = NULL;
	char *root = NULL;
	uint64_t failed = 0;
	char why[256] = "";
	uint32_t i;
	int rc;

	if (!file)
		return jitk__error(JITK_EINVAL, "jitk_cache_unpack: file is NULL");
	if ((rc = admin_open(&b, file)))
		return rc;
	/* provenance: what a node would refuse is not written into its cache */
	if ((rc = jitk__trust_new(&trust, NULL, -1, &quiet)))
		goto done;
	if (!cache_dir)
		rc = jitk_cache_default_dir(&root);
	else if (!(root = jitk__strdup(cache_dir)))
		rc = jitk__error(JITK_ENOMEM, "out of memory");
	if (rc)
		goto done;
	/* what a compiler only warns about (and then compiles in memory) is
	 * the whole failure here */
	if (!*root || jitk__cache_writable(root)) {
		rc = jitk__error(JITK_EIO, "cannot unpack into %s: %s",
				 *root ? root : "(no cache directory)",
				 *root ? jitk_error_last()->message : "no cache directory given");
		goto done;
	}
	if ((rc = jitk__cache_open(&c, root, &quiet)))
		goto done;
	if (!jitk__cache_root(c)) {
		rc = jitk__error(JITK_EIO, "cannot unpack into %s: not a usable cache directory", root);
		goto done;
	}
	for (i = 0; i < b->count; i++) {
		const record *r = &b->index[i];
		jitk_cache_entry e, have;
		const char *problem = NULL;
		char what[128];

		if (!read_entry(b, r, &e, &problem) && ((problem = jitk__entry_kind_problem(&e)) ||
							 (problem = jitk__trust_verdict(trust, &e, JITK_FROM_BUNDLE))))
			jitk__cache_entry_free(&e);
		if (problem) {
			record_name(what, sizeof(what), r);
			report_problem(report, payload, what, problem);
			if (out)
				out->bad++;
			continue;
		}
		if (!jitk__cache_get(c, r->key, r->target, &have, NULL)) {
			jitk__cache_entry_free(&have);
			if (out)
				out->skipped++;
		} else if (jitk__cache_put(c, &e)) {
			if (!failed++)
				snprintf(why, sizeof(why), "%s", jitk_error_last()->message);
		} else if (out) {
			out->entries++;
			out->bytes += r->size;
		}
		jitk__cache_entry_free(&e);
	}
	rc = failed ? jitk__error(JITK_EIO, "%llu entries could not be written into %s: %s",
				  (unsigned long long)failed, root, why)
		    : JITK_OK;
done:
	jitk__cache_close(c);
	jitk__bundle_close(b);
	jitk__trust_free(trust);
	free(root);
	return rc;
}

int jitk_cache_unpack(jitk_bundle_summary *out, const char *file, const char *cache_dir,
		      jitk_bundle_report_fn report, void *payload)
{
	jitk_bundle_summary sum = JITK_BUNDLE_SUMMARY_INIT;
	int rc;

	if ((rc = summary_check(out)))
		return rc;
	return summary_put(out, &sum, cache_unpack(&sum, file, cache_dir, report, payload));
}
