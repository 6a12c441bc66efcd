/* json.h - a small JSON reader for the jitk command: what it needs to read
 * jitk_describe's output (jitk header). Values become a tree of nodes;
 * numbers are doubles, strings UTF-8 (\u escapes included). */
#ifndef JITK_CLI_JSON_H
#define JITK_CLI_JSON_H

#include <stddef.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json json;
struct json {
	json_type type;
	char *key;     /* a member's name (in an object), else NULL */
	char *str;     /* JSON_STRING */
	double number; /* JSON_NUMBER; JSON_BOOL: 0 or 1 */
	json *items;   /* JSON_ARRAY, JSON_OBJECT: n of them, in order */
	size_t n;
};

/* Parse the whole of text into *out (json_free it). -1 with a message in
 * err (byte offset and what was expected) when it is not one JSON value. */
int json_parse(json **out, const char *text, char *err, size_t errlen);
void json_free(json *j);

/* The member key of object j, NULL when j is no object or lacks it. */
const json *json_get(const json *j, const char *key);
/* The string member key of j, NULL when it is missing or not a string. */
const char *json_get_str(const json *j, const char *key);

#endif
