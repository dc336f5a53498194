/* CurveZMQ client settings (see client_curve.h). */
#include "client/client_curve.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "crescent/error.h"

#define Z85_LEN 40u

static const char *pick(const char *given, const char *env) {
    if (given != NULL && given[0] != '\0') return given;
    const char *value = getenv(env);
    return value != NULL && value[0] != '\0' ? value : NULL;
}

static bool z85_key(const char *text) {
    uint8_t raw[32];
    return strlen(text) == Z85_LEN && zmq_z85_decode(raw, text) != NULL;
}

int cr_curve_client_setup(void *sock, const struct cr_curve_client_keys *keys, char *error,
                          size_t error_size) {
    static const struct cr_curve_client_keys none = {0};
    if (keys == NULL) keys = &none;
    const char *names[3] = {"CRESCENT_CURVE_SERVER_KEY", "CRESCENT_CURVE_PUBLIC_KEY",
                            "CRESCENT_CURVE_SECRET_KEY"};
    const char *key[3] = {pick(keys->server_key, names[0]), pick(keys->public_key, names[1]),
                          pick(keys->secret_key, names[2])};
    int set = (key[0] != NULL) + (key[1] != NULL) + (key[2] != NULL);
    if (set == 0) return CR_OK;
    for (int i = 0; i < 3; i++) {
        if (key[i] == NULL) {
            snprintf(error, error_size,
                     "CURVE needs three keys and %s is not set (server key, client public and "
                     "secret key: the options or CRESCENT_CURVE_SERVER_KEY, _PUBLIC_KEY, "
                     "_SECRET_KEY)",
                     names[i]);
            return CR_ERR_INVALID_PARAMS;
        }
        if (!z85_key(key[i])) {
            snprintf(error, error_size, "%s is not a Z85 CURVE key (40 characters)", names[i]);
            return CR_ERR_INVALID_PARAMS;
        }
    }
    if (!zmq_has("curve")) {
        snprintf(error, error_size, "this libzmq is built without CURVE (libsodium)");
        return CR_ERR_INVALID_PARAMS;
    }
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, key[0], Z85_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, key[1], Z85_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, key[2], Z85_LEN) != 0) {
        snprintf(error, error_size, "cannot set the CURVE keys: %s", zmq_strerror(zmq_errno()));
        return CR_ERR_INVALID_PARAMS;
    }
    return CR_OK;
}

bool cr_curve_client_wanted(const struct cr_curve_client_keys *keys) {
    return pick(keys->server_key, "CRESCENT_CURVE_SERVER_KEY") != NULL ||
           pick(keys->public_key, "CRESCENT_CURVE_PUBLIC_KEY") != NULL ||
           pick(keys->secret_key, "CRESCENT_CURVE_SECRET_KEY") != NULL;
}
