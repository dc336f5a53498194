/* event_codec_dump: encodes store events described by a small text spec into
 * seed-000 batches and writes them to stdout, for tests/integration/
 * test_event_codec.py (which checks them against Python's msgpack).
 *
 * usage: event_codec_dump [--max-events N] [--ts SECONDS] [--json] [SPEC_FILE]
 *
 * The spec (SPEC_FILE or stdin) has one directive per line; '#' starts a comment:
 *   store  key=K [replica=TYPE:LOCATION]... [model=M] [block_size=N] [hash=H]
 *          [parent=P] [tokens=1,2,3 | tokens=count:N]
 *   update key=K [replica=TYPE:LOCATION]...
 *   removeall
 *   flush                       ends the current batch (a full batch ends by itself)
 * Fields left out keep the seed's unset defaults.  A string value written `*N`
 * stands for N 'x' characters; `tokens=count:N` for the ids 0..N-1.
 *
 * Output: per batch, seq (8 bytes big-endian), payload length (4 bytes
 * big-endian), then the payload; seq starts at 0.  With --json, the decoded
 * events as JSON lines instead (src/msgs/store_event_json).
 * Exit status: 0, or 1 with a message on stderr. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "msgs/store_event.h"
#include "msgs/store_event_json.h"

#define REPLICAS_MAX 16
#define GENERATED_STRINGS_MAX (6 + REPLICAS_MAX)

struct options {
    uint32_t max_events;
    double ts_s;
    int json;
    const char *spec_path;
};

/* One directive's fields, borrowing from the spec line. */
struct directive {
    cr_event_str key;
    cr_store_replica replicas[REPLICAS_MAX];
    size_t replica_count;
    cr_store_event_info info;
    uint32_t *tokens;        /* owned */
    char *generated[GENERATED_STRINGS_MAX]; /* owned `*N` strings */
    size_t generated_count;
};

struct dumper {
    cr_event_encoder *encoder;
    uint64_t next_seq;
    const struct options *options;
    unsigned line_number;
};

static int die(const struct dumper *dumper, const char *message) {
    fprintf(stderr, "event_codec_dump: line %u: %s\n", dumper->line_number, message);
    return 1;
}

static int parse_u64(const char *text, uint64_t max, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value > max) return -1;
    *out = value;
    return 0;
}

/* A string value: literal, or `*N` for N 'x' characters. */
static int parse_string(struct directive *d, const char *value, cr_event_str *out) {
    uint64_t len = 0;
    if (value[0] != '*' || parse_u64(value + 1, 1u << 30, &len) != 0) {
        *out = cr_event_str_c(value);
        return 0;
    }
    if (d->generated_count == GENERATED_STRINGS_MAX) return -1;
    char *text = malloc(len + 1);
    if (text == NULL) return -1;
    memset(text, 'x', len);
    text[len] = '\0';
    d->generated[d->generated_count++] = text;
    *out = (cr_event_str){text, len};
    return 0;
}

/* `tokens=1,2,3` (decimal u32s) or `tokens=count:N` (0..N-1). */
static int parse_tokens(struct directive *d, const char *value) {
    int generated = strncmp(value, "count:", 6) == 0;
    uint64_t count = 0;
    if (generated && parse_u64(value + 6, 1u << 24, &count) != 0) return -1;
    if (!generated && *value != '\0') {
        count = 1;
        for (const char *p = value; *p != '\0'; p++) count += *p == ',';
    }
    free(d->tokens);
    d->tokens = calloc(count + 1, sizeof(uint32_t));
    if (d->tokens == NULL) return -1;
    const char *item = value;
    for (uint64_t i = 0; i < count; i++) {
        if (generated) {
            d->tokens[i] = (uint32_t)i;
            continue;
        }
        char *end = NULL;
        errno = 0;
        unsigned long long token = strtoull(item, &end, 10);
        if (errno != 0 || end == item || *item == '-' || token > UINT32_MAX) return -1;
        if (*end != ',' && *end != '\0') return -1;
        d->tokens[i] = (uint32_t)token;
        item = end + 1;
    }
    d->info.token_ids = d->tokens;
    d->info.token_count = count;
    return 0;
}

static int parse_replica(struct directive *d, const char *value) {
    const char *colon = strchr(value, ':');
    if (colon == NULL || d->replica_count == REPLICAS_MAX) return -1;
    cr_store_replica *replica = &d->replicas[d->replica_count];
    if (cr_replica_type_parse(value, (size_t)(colon - value), &replica->type) != CR_OK) return -1;
    if (parse_string(d, colon + 1, &replica->location) != 0) return -1;
    d->replica_count++;
    return 0;
}

static int parse_field(struct directive *d, char *field) {
    char *equals = strchr(field, '=');
    if (equals == NULL) return -1;
    *equals = '\0';
    const char *name = field, *value = equals + 1;
    uint64_t number = 0;
    if (strcmp(name, "key") == 0) return parse_string(d, value, &d->key);
    if (strcmp(name, "replica") == 0) return parse_replica(d, value);
    if (strcmp(name, "model") == 0) return parse_string(d, value, &d->info.model_name);
    if (strcmp(name, "hash") == 0) return parse_string(d, value, &d->info.block_hash);
    if (strcmp(name, "parent") == 0) return parse_string(d, value, &d->info.parent_block_hash);
    if (strcmp(name, "tokens") == 0) return parse_tokens(d, value);
    if (strcmp(name, "block_size") == 0 && parse_u64(value, UINT32_MAX, &number) == 0) {
        d->info.block_size = (uint32_t)number;
        return 0;
    }
    return -1;
}

static void directive_free(struct directive *d) {
    free(d->tokens);
    for (size_t i = 0; i < d->generated_count; i++) free(d->generated[i]);
}

static int emit_batch(struct dumper *dumper) {
    if (cr_event_encoder_event_count(dumper->encoder) == 0) return 0;
    cr_event_batch *batch = NULL;
    if (cr_event_encoder_finish(dumper->encoder, dumper->next_seq++, dumper->options->ts_s,
                                &batch) != CR_OK) {
        return die(dumper, "finishing a batch failed");
    }
    int failed = 0;
    if (dumper->options->json) {
        char error[256];
        failed = cr_store_event_json_write_lines(batch->bytes, batch->len, batch->seq, stdout,
                                                 error, sizeof(error)) != CR_OK;
        if (failed) fprintf(stderr, "event_codec_dump: decode: %s\n", error);
    } else {
        uint8_t frame[12];
        for (int i = 0; i < 8; i++) frame[i] = (uint8_t)(batch->seq >> (56 - 8 * i));
        for (int i = 0; i < 4; i++) frame[8 + i] = (uint8_t)(batch->len >> (24 - 8 * i));
        failed = fwrite(frame, 1, sizeof(frame), stdout) != sizeof(frame) ||
                 fwrite(batch->bytes, 1, batch->len, stdout) != batch->len;
    }
    cr_event_batch_unref(batch);
    return failed;
}

static int append_event(struct dumper *dumper, cr_store_event *event) {
    if (cr_event_encoder_is_full(dumper->encoder) && emit_batch(dumper) != 0) return 1;
    int status = cr_event_encoder_append(dumper->encoder, event);
    cr_store_event_free(event);
    return status == CR_OK ? 0 : die(dumper, "encoding the event failed");
}

/* Builds the event of one `store`/`update`/`removeall` line and appends it. */
static int run_event(struct dumper *dumper, const char *verb, char **save) {
    struct directive d = {0};
    int failed = 0;
    for (char *field; !failed && (field = strtok_r(NULL, " \t\r\n", save)) != NULL;) {
        failed = parse_field(&d, field) != 0;
    }
    cr_store_event *event = NULL;
    int status = CR_ERR_INVALID_PARAMS;
    if (!failed && strcmp(verb, "store") == 0) {
        status = cr_store_event_new_block_store(d.key, d.replicas, d.replica_count, &d.info,
                                                &event);
    } else if (!failed && strcmp(verb, "update") == 0) {
        status = cr_store_event_new_block_update(d.key, d.replicas, d.replica_count, &event);
    } else if (!failed && strcmp(verb, "removeall") == 0) {
        status = cr_store_event_new_remove_all(&event);
    }
    directive_free(&d);
    if (status != CR_OK) return die(dumper, "bad directive or field");
    return append_event(dumper, event);
}

static int run_spec(struct dumper *dumper, FILE *spec) {
    char *line = NULL;
    size_t capacity = 0;
    int failed = 0;
    while (!failed && getline(&line, &capacity, spec) >= 0) {
        dumper->line_number++;
        char *comment = strchr(line, '#');
        if (comment != NULL) *comment = '\0';
        char *save = NULL;
        char *verb = strtok_r(line, " \t\r\n", &save);
        if (verb == NULL) continue;
        failed = strcmp(verb, "flush") == 0 ? emit_batch(dumper) : run_event(dumper, verb, &save);
    }
    free(line);
    return failed ? 1 : emit_batch(dumper);
}

static int parse_options(int argc, char **argv, struct options *options) {
    *options = (struct options){.ts_s = 1700000000.5};
    for (int i = 1; i < argc; i++) {
        uint64_t number = 0;
        if (strcmp(argv[i], "--json") == 0) {
            options->json = 1;
        } else if (strcmp(argv[i], "--max-events") == 0 && i + 1 < argc &&
                   parse_u64(argv[i + 1], 1u << 24, &number) == 0) {
            options->max_events = (uint32_t)number;
            i++;
        } else if (strcmp(argv[i], "--ts") == 0 && i + 1 < argc) {
            options->ts_s = strtod(argv[++i], NULL);
        } else if (argv[i][0] != '-' && options->spec_path == NULL) {
            options->spec_path = argv[i];
        } else {
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    struct options options;
    if (parse_options(argc, argv, &options) != 0) {
        fprintf(stderr, "usage: event_codec_dump [--max-events N] [--ts SECONDS] [--json] "
                        "[SPEC_FILE]\n");
        return 2;
    }
    FILE *spec = options.spec_path != NULL ? fopen(options.spec_path, "r") : stdin;
    if (spec == NULL) {
        fprintf(stderr, "event_codec_dump: %s: %s\n", options.spec_path, strerror(errno));
        return 1;
    }
    cr_event_encoder_config config = {.max_events = options.max_events};
    struct dumper dumper = {.options = &options};
    if (cr_event_encoder_create(&config, &dumper.encoder) != CR_OK) return 1;
    int failed = run_spec(&dumper, spec);
    cr_event_encoder_destroy(dumper.encoder);
    if (spec != stdin) fclose(spec);
    if (fflush(stdout) != 0) failed = 1;
    return failed;
}
