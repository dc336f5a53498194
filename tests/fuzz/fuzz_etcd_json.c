/* libFuzzer target: etcd's JSON gateway answers (src/ha/etcd_json.c), as an
 * etcd endpoint or something posing as one could send them.  Every decoder
 * gets every input; an accepted answer must hold what etcd_json.h promises,
 * a refused one must say why. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crescent/error.h"
#include "ha/etcd_json.h"

static void check_kv(const struct cr_etcd_kv *kv) {
    if (!kv->found) return;
    assert(kv->key_len > 0 && kv->key_len <= CR_ETCD_KEY_MAX && kv->key[kv->key_len] == '\0');
    assert(strlen(kv->key) == kv->key_len);
    assert(kv->value_len <= CR_ETCD_VALUE_MAX && kv->value[kv->value_len] == '\0');
    assert(kv->create_revision >= 1 && kv->mod_revision >= kv->create_revision && kv->lease >= 0);
}

static void refused(int rc, const char *err) {
    assert(rc == CR_OK || rc == CR_ERR_PROTOCOL);
    if (rc != CR_OK) assert(err[0] != '\0' && strlen(err) < CR_ETCD_ERROR_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *json = (const char *)data;
    char err[CR_ETCD_ERROR_MAX] = "";
    int64_t rev = 0, id = 0, ttl = 0;
    struct cr_etcd_kv kv;
    int rc = cr_etcd_decode_range(json, size, &rev, &kv, err);
    refused(rc, err);
    if (rc == CR_OK) check_kv(&kv), assert(rev >= 0);
    bool ok = false;
    err[0] = '\0';
    rc = cr_etcd_decode_txn(json, size, &ok, &rev, &kv, err);
    refused(rc, err);
    if (rc == CR_OK) check_kv(&kv), assert(rev >= 1 && !(ok && kv.found));
    err[0] = '\0';
    rc = cr_etcd_decode_grant(json, size, &id, &ttl, err);
    refused(rc, err);
    if (rc == CR_OK) assert(id >= 1 && ttl >= 1);
    err[0] = '\0';
    rc = cr_etcd_decode_keepalive(json, size, 7, &ttl, err);
    refused(rc, err);
    if (rc == CR_OK) assert(ttl >= 0);
    uint32_t events = 0;
    bool deleted = false;
    err[0] = '\0';
    rc = cr_etcd_decode_watch(json, size, &events, &deleted, &rev, err);
    refused(rc, err);
    if (rc == CR_OK) assert(!deleted || events > 0);
    return 0;
}
