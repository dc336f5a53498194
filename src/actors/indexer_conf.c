/* Registrations: the conductor's /register body and conductor_config.json
 * (see indexer_internal.h).  Pure parsing, used on the main thread (create)
 * and on HTTP workers (POST /register). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/indexer_internal.h"
#include "crescent/error.h"
#include "daemon/config.h"

#define REGS_MAX CR_INDEXER_SOURCES_MAX

const char *cr_indexer_conf_path(const char *setting) {
    if (setting != NULL && setting[0] != '\0') return setting;
    const char *env = getenv("CONDUCTOR_CONFIG_PATH");
    return env != NULL ? env : "";
}

/* Copies an optional string field; returns false (error set) when mistyped or too long. */
static bool get_str(json_t *obj, const char *name, bool required, char *out, size_t size,
                    char *error, size_t error_size) {
    json_t *v = json_object_get(obj, name);
    if (v == NULL || json_is_null(v)) {
        if (required) snprintf(error, error_size, "field '%s' is required", name);
        return !required;
    }
    if (!json_is_string(v)) {
        snprintf(error, error_size, "field '%s' must be a string", name);
        return false;
    }
    if (json_string_length(v) >= size || strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(error, error_size, "field '%s' is longer than %zu bytes or holds a NUL", name,
                 size - 1);
        return false;
    }
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return true;
}

static bool get_uint(json_t *obj, const char *name, bool required, uint32_t max, uint32_t *out,
                     char *error, size_t error_size) {
    json_t *v = json_object_get(obj, name);
    if (v == NULL || json_is_null(v)) {
        if (required) snprintf(error, error_size, "field '%s' is required", name);
        return !required;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max) {
        snprintf(error, error_size, "field '%s' must be an integer from 0 to %u", name, max);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

static bool get_bool(json_t *obj, const char *name, bool *out, char *error, size_t error_size) {
    json_t *v = json_object_get(obj, name);
    if (v == NULL || json_is_null(v)) return true;
    if (!json_is_boolean(v)) {
        snprintf(error, error_size, "field '%s' must be true or false", name);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

/* A bind endpoint: ipc://PATH, or tcp://HOST:PORT with a port from 1 to
 * 65535 (crescent must know where the publisher connects) and a host that is
 * not a wildcard (listening on every interface is not done by default: name
 * the interface, 127.0.0.1 for a local engine). */
static bool check_bind_endpoint(const char *endpoint, char *error, size_t error_size) {
    if (strncmp(endpoint, "ipc://", 6) == 0 && endpoint[6] != '\0') return true;
    const char *colon = strrchr(endpoint, ':');
    char *end = NULL;
    long port = colon != NULL ? strtol(colon + 1, &end, 10) : 0;
    if (strncmp(endpoint, "tcp://", 6) != 0 || colon == endpoint + 5 || colon == endpoint + 6 ||
        end == colon + 1 || *end != '\0' || port < 1 || port > 65535) {
        snprintf(error, error_size,
                 "with \"bind\": true the endpoint must be tcp://HOST:PORT (port 1 to 65535) or "
                 "ipc://PATH, not '%.200s'",
                 endpoint);
        return false;
    }
    /* Any '*' in the host, 0.0.0.0 or [::] (fuzzing found a host of "*:1" with port 2). */
    const char *host = endpoint + 6;
    size_t host_len = (size_t)(colon - host);
    if (memchr(host, '*', host_len) != NULL || strncmp(host, "0.0.0.0", 7) == 0 ||
        strncmp(host, "[::]", 4) == 0) {
        {
            snprintf(error, error_size,
                     "with \"bind\": true the endpoint '%.200s' would listen on every interface; "
                     "name one (127.0.0.1 for an engine on this host)",
                     endpoint);
            return false;
        }
    }
    return true;
}

/* ---- where a publisher endpoint may point ---- */

/* Splits "tcp://HOST:PORT" or "HOST:PORT" (brackets kept on an IPv6 host);
 * false when there is no numeric port. */
static bool split_host_port(const char *address, char *host, size_t host_size, long *port) {
    if (strncmp(address, "tcp://", 6) == 0) address += 6;
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon[1] == '\0') return false;
    char *end = NULL;
    *port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || *port < 1 || *port > 65535) return false;
    snprintf(host, host_size, "%.*s", (int)(colon - address), address);
    return true;
}

static bool host_is_link_local(const char *host) {
    if (strncmp(host, "169.254.", 8) == 0) return true;
    /* fe80::/10: the first hextet is fe80 to febf. */
    const char *h = host[0] == '[' ? host + 1 : host;
    return strlen(h) >= 5 && strncasecmp(h, "fe", 2) == 0 && strchr("89abAB", h[2]) != NULL &&
           h[4] == ':';
}

/* Hosts that reach this machine whatever crescentd's own address names. */
static bool host_is_this_machine(const char *host) {
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
           strcmp(host, "[::1]") == 0 || strcmp(host, "0.0.0.0") == 0 ||
           strcmp(host, "[::]") == 0 || strcmp(host, "*") == 0;
}

int cr_indexer_endpoint_check(const struct cr_daemon_config *config, const char *field,
                              const char *endpoint, char *error, size_t error_size) {
    assert(field != NULL && endpoint != NULL && error != NULL);
    char host[CR_CONFIG_ADDRESS_MAX];
    long port = 0;
    if (endpoint[0] == '\0' || !split_host_port(endpoint, host, sizeof(host), &port))
        return CR_OK; /* ipc:// or a syntax zmq itself refuses */
    if (host_is_link_local(host)) {
        snprintf(error, error_size,
                 "%s '%.200s' is link-local (169.254.0.0/16, fe80::/10: cloud metadata and "
                 "neighbour services); crescent does not connect there",
                 field, endpoint);
        return CR_ERR_INVALID_PARAMS;
    }
    if (config == NULL) return CR_OK;
    char metrics[CR_CONFIG_ADDRESS_MAX + 16] = ""; /* HOST:PORT, the port up to 10 digits */
    char http_host[CR_CONFIG_ADDRESS_MAX];
    long http_port = 0;
    if (config->metrics_port != 0 && config->metrics_host[0] != '\0')
        snprintf(metrics, sizeof(metrics), "%s:%u", config->metrics_host, config->metrics_port);
    else if (config->metrics_port != 0 &&
             split_host_port(config->http_address, http_host, sizeof(http_host), &http_port))
        snprintf(metrics, sizeof(metrics), "%s:%u", http_host, config->metrics_port);
    const struct {
        const char *flag, *address;
    } own[] = {
        {"--rpc-address", config->rpc_address},       {"--event-address", config->event_address},
        {"--replay-address", config->replay_address}, {"--http-address", config->http_address},
        {"--metrics-port", metrics},                  {"--data-address", config->data_address},
    };
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        char own_host[CR_CONFIG_ADDRESS_MAX];
        long own_port = 0;
        if (!split_host_port(own[i].address, own_host, sizeof(own_host), &own_port) ||
            own_port != port)
            continue;
        if (host_is_this_machine(host) || strcmp(host, own_host) == 0) {
            snprintf(error, error_size,
                     "%s '%.200s' is crescentd's own %s (%.200s); a publisher must be an "
                     "engine's KV-event socket, not crescentd itself",
                     field, endpoint, own[i].flag, own[i].address);
            return CR_ERR_INVALID_PARAMS;
        }
    }
    return CR_OK;
}

int cr_indexer_registration_check(struct cr_indexer_registration *reg, char *error,
                                  size_t error_size) {
    if (reg->instance_id[0] == '\0') {
        snprintf(error, error_size, "instance_id must not be empty");
        return CR_ERR_INVALID_PARAMS;
    }
    if (strchr(reg->instance_id, '|') != NULL || strchr(reg->tenant_id, '|') != NULL) {
        snprintf(error, error_size, "instance_id and tenant_id must not contain '|'");
        return CR_ERR_INVALID_PARAMS;
    }
    if (reg->endpoint[0] == '\0') {
        snprintf(error, error_size, "endpoint must not be empty");
        return CR_ERR_INVALID_PARAMS;
    }
    if (reg->bind && !check_bind_endpoint(reg->endpoint, error, error_size))
        return CR_ERR_INVALID_PARAMS;
    if (reg->block_size == 0) {
        snprintf(error, error_size, "block_size must be greater than 0");
        return CR_ERR_INVALID_PARAMS;
    }
    if (reg->dp_rank >= CR_PREFIX_DP_RANKS) {
        snprintf(error, error_size, "dp_rank must be below %u", CR_PREFIX_DP_RANKS);
        return CR_ERR_INVALID_PARAMS;
    }
    if (reg->tenant_id[0] == '\0') snprintf(reg->tenant_id, sizeof(reg->tenant_id), "default");
    if (reg->type[0] == '\0') snprintf(reg->type, sizeof(reg->type), "vLLM");
    return CR_OK;
}

/* The conductor's registration fields: anything else is refused, so a typo
 * ("block-size", "model") never silently registers something else. */
static const char *const registration_fields[] = {
    "instance_id", "endpoint",       "replay_endpoint", "type",       "modelname",
    "lora_name",   "tenant_id",      "additionalsalt",  "block_size", "dp_rank",
    "bind",
};

/* Engine types (the publisher's dialect is read from its messages; the type
 * names the engine for people, so only known names are taken). */
static const char *const engine_types[] = {"vLLM", "SGLang", "Mooncake", "standard"};

static bool check_fields(json_t *obj, char *error, size_t error_size) {
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value) {
        bool known = false;
        for (size_t i = 0; i < sizeof(registration_fields) / sizeof(registration_fields[0]); i++)
            known |= strcmp(key, registration_fields[i]) == 0;
        if (!known) {
            snprintf(error, error_size,
                     "unknown field '%.64s' (a registration takes instance_id, endpoint, "
                     "replay_endpoint, type, modelname, lora_name, tenant_id, additionalsalt, "
                     "block_size, dp_rank, bind)",
                     key);
            return false;
        }
    }
    return true;
}

static bool check_type(char *type, char *error, size_t error_size) {
    if (type[0] == '\0') return true; /* vLLM by default */
    for (size_t i = 0; i < sizeof(engine_types) / sizeof(engine_types[0]); i++) {
        if (strcasecmp(type, engine_types[i]) == 0) {
            snprintf(type, 32, "%s", engine_types[i]); /* the usual spelling */
            return true;
        }
    }
    snprintf(error, error_size,
             "type '%.32s' is not an engine crescent knows (vLLM, SGLang, Mooncake, standard)",
             type);
    return false;
}

int cr_indexer_registration_from_json(json_t *obj, const char *default_instance,
                                      struct cr_indexer_registration *reg, char *error,
                                      size_t error_size) {
    assert(reg != NULL && error != NULL && error_size > 0);
    memset(reg, 0, sizeof(*reg));
    if (!json_is_object(obj)) {
        snprintf(error, error_size, "a registration must be a JSON object");
        return CR_ERR_INVALID_PARAMS;
    }
    if (!check_fields(obj, error, error_size)) return CR_ERR_INVALID_PARAMS;
    bool ok =
        get_str(obj, "instance_id", default_instance == NULL, reg->instance_id,
                sizeof(reg->instance_id), error, error_size) &&
        get_str(obj, "endpoint", true, reg->endpoint, sizeof(reg->endpoint), error, error_size) &&
        get_str(obj, "replay_endpoint", false, reg->replay_endpoint, sizeof(reg->replay_endpoint),
                error, error_size) &&
        get_str(obj, "type", false, reg->type, sizeof(reg->type), error, error_size) &&
        get_str(obj, "modelname", true, reg->model, sizeof(reg->model), error, error_size) &&
        get_str(obj, "lora_name", false, reg->lora_name, sizeof(reg->lora_name), error,
                error_size) &&
        get_str(obj, "tenant_id", false, reg->tenant_id, sizeof(reg->tenant_id), error,
                error_size) &&
        get_str(obj, "additionalsalt", false, reg->salt, sizeof(reg->salt), error, error_size) &&
        get_uint(obj, "block_size", true, CR_KV_MAX_BLOCK_SIZE, &reg->block_size, error,
                 error_size) &&
        get_uint(obj, "dp_rank", false, CR_PREFIX_DP_RANKS - 1, &reg->dp_rank, error, error_size) &&
        get_bool(obj, "bind", &reg->bind, error, error_size) &&
        check_type(reg->type, error, error_size);
    if (!ok) return CR_ERR_INVALID_PARAMS;
    if (reg->instance_id[0] == '\0' && default_instance != NULL)
        snprintf(reg->instance_id, sizeof(reg->instance_id), "%s", default_instance);
    return cr_indexer_registration_check(reg, error, error_size);
}

static int parse_instances(json_t *instances, struct cr_indexer_registration *regs, uint32_t *count,
                           char *error, size_t error_size) {
    const char *name;
    json_t *entry;
    json_object_foreach(instances, name, entry) {
        if (*count >= REGS_MAX) {
            snprintf(error, error_size, "more than %u entries in kvevent_instance", REGS_MAX);
            return CR_ERR_INVALID_PARAMS;
        }
        char why[CR_INDEXER_ERROR_MAX];
        if (cr_indexer_registration_from_json(entry, name, &regs[*count], why, sizeof(why)) !=
            CR_OK) {
            snprintf(error, error_size, "kvevent_instance '%.64s': %s", name, why);
            return CR_ERR_INVALID_PARAMS;
        }
        (*count)++;
    }
    return CR_OK;
}

int cr_indexer_conf_parse(const char *text, struct cr_indexer_registration **regs, uint32_t *count,
                          char *error, size_t error_size) {
    assert(text != NULL && regs != NULL && count != NULL && error != NULL);
    *regs = NULL;
    *count = 0;
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(error, error_size, "bad JSON at line %d column %d: %s", jerr.line, jerr.column,
                 jerr.text);
        return CR_ERR_INVALID_PARAMS;
    }
    json_t *instances = json_object_get(root, "kvevent_instance");
    int rc = CR_OK;
    if (!json_is_object(root)) {
        snprintf(error, error_size, "the top level must be a JSON object");
        rc = CR_ERR_INVALID_PARAMS;
    } else if (instances != NULL && !json_is_object(instances)) {
        snprintf(error, error_size, "kvevent_instance must be an object of registrations");
        rc = CR_ERR_INVALID_PARAMS;
    }
    if (rc == CR_OK && instances != NULL) {
        *regs = calloc(json_object_size(instances) + 1, sizeof(**regs));
        rc = *regs == NULL ? CR_ERR_NOMEM
                           : parse_instances(instances, *regs, count, error, error_size);
    }
    json_decref(root);
    if (rc != CR_OK) {
        free(*regs);
        *regs = NULL;
        *count = 0;
    }
    return rc;
}

int cr_indexer_conf_load(const char *path, struct cr_indexer_registration **regs, uint32_t *count,
                         char *error, size_t error_size) {
    /* Opened without blocking and checked to be a regular file before a
     * byte is read: a FIFO (or a device) would hang start-up. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(error, error_size, "cannot open: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return CR_ERR_INVALID_PARAMS;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(error, error_size, "not a regular file (a %s)",
                 S_ISFIFO(sb.st_mode) ? "FIFO" : S_ISDIR(sb.st_mode) ? "directory"
                 : S_ISSOCK(sb.st_mode) ? "socket" : "device");
        close(fd);
        return CR_ERR_INVALID_PARAMS;
    }
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        snprintf(error, error_size, "cannot open: %s", strerror(errno));
        close(fd);
        return CR_ERR_INVALID_PARAMS;
    }
    char *text = malloc(1u << 20);
    size_t n = text != NULL ? fread(text, 1, (1u << 20) - 1, f) : 0;
    bool too_big = text != NULL && n == (1u << 20) - 1 && fgetc(f) != EOF;
    fclose(f);
    if (text == NULL) return CR_ERR_NOMEM;
    text[n] = '\0';
    int rc;
    if (too_big) {
        snprintf(error, error_size, "larger than 1 MiB");
        rc = CR_ERR_INVALID_PARAMS;
    } else {
        rc = cr_indexer_conf_parse(text, regs, count, error, error_size);
    }
    free(text);
    return rc;
}
