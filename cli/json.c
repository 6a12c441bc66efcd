/* json.c - the JSON reader of json.h: recursive descent over the text,
 * one malloc'd node array per array or object. Depth is bounded so that
 * a hostile document cannot exhaust the stack. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define JSON_MAX_DEPTH 64

typedef struct {
	const char *s, *p;
	char *err;
	size_t errlen;
} reader;

static int fail(reader *r, const char *what)
{
	if (r->err && r->errlen && !*r->err)
		snprintf(r->err, r->errlen, "offset %zu: %s", (size_t)(r->p - r->s), what);
	return -1;
}

static void skip_space(reader *r)
{
	while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')
		r->p++;
}

static void json_clear(json *j)
{
	size_t i;

	for (i = 0; i < j->n; i++)
		json_clear(&j->items[i]);
	free(j->items);
	free(j->key);
	free(j->str);
}

void json_free(json *j)
{
	if (!j)
		return;
	json_clear(j);
	free(j);
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Code point cp as UTF-8 at o; the bytes written. */
static size_t utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string at r->p (its opening quote) into *out. The decoded text is
 * never longer than the escaped one. */
static int read_string(reader *r, char **out)
{
	const char *p = r->p + 1, *end = p;
	char *o;
	size_t n = 0;

	while (*end && *end != '"')
		end += *end == '\\' && end[1] ? 2 : 1;
	if (*end != '"')
		return fail(r, "unterminated string");
	if (!(o = malloc((size_t)(end - p) + 1)))
		return fail(r, "out of memory");
	while (p < end) {
		unsigned cp, lo;

		if ((unsigned char)*p < 0x20) {
			free(o);
			r->p = p;
			return fail(r, "control character in a string");
		}
		if (*p != '\\') {
			o[n++] = *p++;
			continue;
		}
		p++;
		switch (*p++) {
		case '"': o[n++] = '"'; break;
		case '\\': o[n++] = '\\'; break;
		case '/': o[n++] = '/'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'u':
			if (end - p < 4 || hex4(p, &cp))
				goto bad;
			p += 4;
			/* a surrogate pair, else one code unit */
			if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
			    !hex4(p + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			} else if (cp >= 0xd800 && cp < 0xe000) {
				goto bad;
			}
			n += utf8(o + n, cp);
			break;
		default:
			goto bad;
		}
	}
	o[n] = '\0';
	*out = o;
	r->p = end + 1;
	return 0;
bad:
	free(o);
	r->p = p;
	return fail(r, "bad escape in a string");
}

static int read_value(reader *r, json *j, int depth);

/* The items of an array or object, up to close. */
static int read_items(reader *r, json *j, char close, int depth)
{
	size_t cap = 0;

	r->p++;
	skip_space(r);
	if (*r->p == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		json item;

		memset(&item, 0, sizeof(item));
		skip_space(r);
		if (close == '}') {
			if (*r->p != '"')
				return fail(r, "expected a member name");
			if (read_string(r, &item.key))
				return -1;
			skip_space(r);
			if (*r->p != ':') {
				free(item.key);
				return fail(r, "expected ':'");
			}
			r->p++;
		}
		if (read_value(r, &item, depth + 1)) {
			json_clear(&item);
			return -1;
		}
		if (j->n == cap) {
			json *grown;

			cap = cap ? 2 * cap : 8;
			if (!(grown = realloc(j->items, cap * sizeof(*grown)))) {
				json_clear(&item);
				return fail(r, "out of memory");
			}
			j->items = grown;
		}
		j->items[j->n++] = item;
		skip_space(r);
		if (*r->p == ',') {
			r->p++;
			continue;
		}
		if (*r->p == close) {
			r->p++;
			return 0;
		}
		return fail(r, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int read_value(reader *r, json *j, int depth)
{
	char *end;

	if (depth > JSON_MAX_DEPTH)
		return fail(r, "nested too deeply");
	skip_space(r);
	switch (*r->p) {
	case '{':
		j->type = JSON_OBJECT;
		return read_items(r, j, '}', depth);
	case '[':
		j->type = JSON_ARRAY;
		return read_items(r, j, ']', depth);
	case '"':
		j->type = JSON_STRING;
		return read_string(r, &j->str);
	case 't':
	case 'f':
	case 'n':
		if (!strncmp(r->p, "true", 4) || !strncmp(r->p, "null", 4)) {
			j->type = *r->p == 't' ? JSON_BOOL : JSON_NULL;
			j->number = *r->p == 't';
			r->p += 4;
			return 0;
		}
		if (!strncmp(r->p, "false", 5)) {
			j->type = JSON_BOOL;
			r->p += 5;
			return 0;
		}
		return fail(r, "expected a value");
	default:
		if (*r->p != '-' && (*r->p < '0' || *r->p > '9'))
			return fail(r, "expected a value");
		j->type = JSON_NUMBER;
		j->number = strtod(r->p, &end);
		if (end == r->p)
			return fail(r, "expected a number");
		r->p = end;
		return 0;
	}
}

int json_parse(json **out, const char *text, char *err, size_t errlen)
{
	reader r = { text, text, err, errlen };
	json *j;

	if (err && errlen)
		*err = '\0';
	*out = NULL;
	if (!(j = calloc(1, sizeof(*j))))
		return fail(&r, "out of memory");
	if (read_value(&r, j, 0)) {
		json_free(j);
		return -1;
	}
	skip_space(&r);
	if (*r.p) {
		json_free(j);
		return fail(&r, "text after the value");
	}
	*out = j;
	return 0;
}

const json *json_get(const json *j, const char *key)
{
	size_t i;

	if (!j || j->type != JSON_OBJECT)
		return NULL;
	for (i = 0; i < j->n; i++)
		if (!strcmp(j->items[i].key, key))
			return &j->items[i];
	return NULL;
}

const char *json_get_str(const json *j, const char *key)
{
	const json *v = json_get(j, key);

	return v && v->type == JSON_STRING ? v->str : NULL;
}
