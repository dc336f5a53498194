/* Mooncake master's flags on crescentd's command line (see flags.h): gflags'
 * spellings (-flag, --flag, =value or the next argument, bare bools and
 * --noflag, --flagfile) rewritten into crescent's own flags before its parser
 * runs, so one parser validates every value. */
#include "mooncake/flags.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FLAGFILE_DEPTH_MAX 8  /* gflags has none; a file naming itself must not loop */
#define FLAGFILE_LINE_MAX 4096

const struct cr_mooncake_flag *cr_mooncake_flag_find(const char *name) {
    size_t count;
    const struct cr_mooncake_flag *flags = cr_mooncake_flags(&count);
    for (size_t i = 0; i < count; i++) {
        const char *a = flags[i].name, *b = name;
        while (*a != '\0' && (*a == *b || (*a == '_' && *b == '-'))) a++, b++;
        if (*a == '\0' && *b == '\0') return &flags[i];
    }
    return NULL;
}

/* gflags' bool spellings, to "true"/"false"; NULL when `text` is none. */
static const char *bool_text(const char *text) {
    static const char *const yes[] = {"true", "t", "yes", "y", "1"};
    static const char *const no[] = {"false", "f", "no", "n", "0"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) return "true";
        if (strcasecmp(text, no[i]) == 0) return "false";
    }
    return NULL;
}

struct args {
    int count, cap;
    char **v;
    const char *switched_off; /* a SWITCH's setting the last =false set to 0, or NULL */
};

static bool push(struct args *a, const char *text, size_t len) {
    if (a->count + 2 > a->cap) {
        int cap = a->cap == 0 ? 16 : a->cap * 2;
        char **v = realloc(a->v, (size_t)cap * sizeof(*v));
        if (v == NULL) return false;
        a->v = v, a->cap = cap;
    }
    char *copy = strndup(text, len);
    if (copy == NULL) return false;
    a->v[a->count++] = copy;
    a->v[a->count] = NULL;
    return true;
}

static bool pushf(struct args *a, const char *name, const char *value) {
    char buf[FLAGFILE_LINE_MAX + 128];
    int n = snprintf(buf, sizeof(buf), "--%s=%s", name, value);
    return n > 0 && (size_t)n < sizeof(buf) && push(a, buf, (size_t)n);
}

void cr_mooncake_argv_free(int argc, char **argv) {
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}

static bool expand(struct args *out, int argc, char **argv, int depth, char *error,
                   size_t error_size);

/* gflags' flagfile: one flag a line (--flag=value), '#' comments, blank lines. */
static bool read_flagfile(struct args *out, const char *path, int depth, char *error,
                          size_t error_size) {
    if (depth >= FLAGFILE_DEPTH_MAX) {
        snprintf(error, error_size, "--flagfile %s: flagfiles nest deeper than %d (a loop?)",
                 path, FLAGFILE_DEPTH_MAX);
        return false;
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(error, error_size, "--flagfile %s: %s", path, strerror(errno));
        return false;
    }
    struct args lines = {0};
    char line[FLAGFILE_LINE_MAX];
    int number = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof(line), f) != NULL) {
        number++;
        size_t len = strlen(line);
        if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
            snprintf(error, error_size, "--flagfile %s:%d: line longer than %d bytes", path,
                     number, FLAGFILE_LINE_MAX - 2);
            ok = false;
            break;
        }
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' ||
                           line[len - 1] == ' ' || line[len - 1] == '\t'))
            line[--len] = '\0';
        if (*s == '\0' || *s == '#') continue;
        if (*s != '-') {
            snprintf(error, error_size,
                     "--flagfile %s:%d: '%.100s' is not a flag (--name=value); gflags' "
                     "per-program sections are not supported",
                     path, number, s);
            ok = false;
        } else {
            ok = push(&lines, s, strlen(s));
            if (!ok) snprintf(error, error_size, "--flagfile %s: out of memory", path);
        }
    }
    fclose(f);
    if (ok) {
        /* argv[0] slot: expand() starts at 1. */
        struct args framed = {0};
        ok = push(&framed, path, strlen(path));
        for (int i = 0; ok && i < lines.count; i++)
            ok = push(&framed, lines.v[i], strlen(lines.v[i]));
        if (ok) ok = expand(out, framed.count, framed.v, depth + 1, error, error_size);
        else snprintf(error, error_size, "--flagfile %s: out of memory", path);
        cr_mooncake_argv_free(framed.count, framed.v);
    }
    cr_mooncake_argv_free(lines.count, lines.v);
    return ok;
}

/* The flag's name (after one or two dashes, before '='), or false. */
static bool split_flag(const char *arg, char *name, size_t size, const char **value) {
    if (arg[0] != '-' || arg[1] == '\0') return false;
    const char *s = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(s, '=');
    size_t len = eq != NULL ? (size_t)(eq - s) : strlen(s);
    if (len == 0 || len >= size) return false;
    memcpy(name, s, len);
    name[len] = '\0';
    *value = eq != NULL ? eq + 1 : NULL;
    return true;
}

/* One Mooncake flag with its value: rewritten, dropped, or refused. */
static bool apply(struct args *out, const struct cr_mooncake_flag *f, const char *value,
                  char *error, size_t error_size) {
    switch (f->kind) {
    case CR_MC_SETTING:
        if (!pushf(out, f->target, value)) {
            snprintf(error, error_size, "--%s: value too long", f->name);
            return false;
        }
        return true;
    case CR_MC_IGNORED: return true;
    case CR_MC_SWITCH:
        /* Applied after every flag (cr_mooncake_flags_rewrite), so that
         * --promotion_on_hit=false wins over a threshold given after it, as in
         * the reference; the last of several =true/=false decides. */
        out->switched_off = strcmp(value, "false") == 0 ? f->target : NULL;
        return true;
    case CR_MC_WHEN:
        if (strcmp(value, f->target) == 0) return true;
        snprintf(error, error_size, "--%s=%s (Mooncake master's flag): only %s is supported: %s",
                 f->name, value, f->target, f->reason);
        return false;
    case CR_MC_REFUSED:
        snprintf(error, error_size, "--%s (Mooncake master's flag) is refused: %s", f->name,
                 f->reason);
        return false;
    }
    return false;
}

static bool expand(struct args *out, int argc, char **argv, int depth, char *error,
                   size_t error_size) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL;
        char name[128];
        if (strcmp(arg, "--") == 0 || !split_flag(arg, name, sizeof(name), &value)) {
            if (!push(out, arg, strlen(arg))) goto nomem;
            continue;
        }
        if (strcmp(name, "flagfile") == 0) {
            if (value == NULL && i + 1 < argc) value = argv[++i];
            if (value == NULL || *value == '\0') {
                snprintf(error, error_size, "--flagfile needs a file");
                return false;
            }
            if (!read_flagfile(out, value, depth, error, error_size)) return false;
            continue;
        }
        const struct cr_mooncake_flag *f = cr_mooncake_flag_find(name);
        bool negated = false;
        if (f == NULL && strncmp(name, "no", 2) == 0) {
            f = cr_mooncake_flag_find(name + 2);
            negated = f != NULL && f->is_bool;
            if (!negated) f = NULL;
        }
        /* crescent's --rpc-address (its own spelling, or an endpoint tcp://...
         * in any spelling) is crescent's ZMQ endpoint, not Mooncake's host. */
        if (f != NULL && strcmp(f->name, "rpc_address") == 0 &&
            (strcmp(name, "rpc-address") == 0 ||
             (value != NULL && strstr(value, "://") != NULL) ||
             (value == NULL && i + 1 < argc && strstr(argv[i + 1], "://") != NULL)))
            f = NULL;
        if (f == NULL) {
            if (!push(out, arg, strlen(arg))) goto nomem;
            continue;
        }
        if (negated) {
            if (value != NULL) {
                snprintf(error, error_size, "--no%s takes no value", f->name);
                return false;
            }
            value = "false";
        } else if (f->is_bool) {
            /* Bare --flag is true (gflags); a following true/false/1/0 is taken too,
             * as crescent's own bool flags take their value. */
            if (value == NULL && i + 1 < argc && bool_text(argv[i + 1]) != NULL) value = argv[++i];
            if (value == NULL) value = "true";
            const char *b = bool_text(value);
            if (b == NULL) {
                snprintf(error, error_size, "--%s: '%s' is not true or false (gflags: "
                         "true/false, t/f, yes/no, y/n, 1/0)", f->name, value);
                return false;
            }
            value = b;
        } else if (value == NULL) {
            if (i + 1 >= argc) {
                snprintf(error, error_size, "option --%s needs a value (see --help-mooncake)",
                         f->name);
                return false;
            }
            value = argv[++i];
        }
        if (!apply(out, f, value, error, error_size)) return false;
    }
    return true;
nomem:
    snprintf(error, error_size, "out of memory reading the command line");
    return false;
}

bool cr_mooncake_flags_rewrite(int argc, char **argv, int *out_argc, char ***out_argv,
                               char *error, size_t error_size) {
    assert(argc >= 1 && argv != NULL && out_argc != NULL && out_argv != NULL);
    struct args out = {0};
    bool ok = push(&out, argv[0], strlen(argv[0]));
    if (!ok) snprintf(error, error_size, "out of memory reading the command line");
    if (ok) ok = expand(&out, argc, argv, 0, error, error_size);
    if (ok && out.switched_off != NULL && !pushf(&out, out.switched_off, "0")) {
        snprintf(error, error_size, "out of memory reading the command line");
        ok = false;
    }
    if (!ok) {
        cr_mooncake_argv_free(out.count, out.v);
        return false;
    }
    *out_argc = out.count;
    *out_argv = out.v;
    return true;
}

void cr_mooncake_flags_print(FILE *out) {
    static const char *const kinds[] = {"setting", "when", "ignored", "refused", "switch"};
    size_t count;
    const struct cr_mooncake_flag *flags = cr_mooncake_flags(&count);
    fprintf(out, "flag\tkind\ttarget\treason\n");
    for (size_t i = 0; i < count; i++)
        fprintf(out, "%s\t%s\t%s\t%s\n", flags[i].name, kinds[flags[i].kind],
                flags[i].target != NULL ? flags[i].target : "",
                flags[i].reason != NULL ? flags[i].reason : "");
}
