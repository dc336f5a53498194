/* Several RDMA devices per host (xfer_verbs.h): which devices a server or
 * client opens, and memory registered on each of them.
 *
 * A host may have several HCAs (two ports of a ConnectX as two devices, or
 * one NIC per GPU).  Each device has its own protection domain, so a segment
 * or buffer is registered once per device, with an lkey and an rkey per
 * device; a QP set spreads its QPs over the devices (QP i on device i %
 * count) and an op of 4 MiB or more puts one stripe on each QP, so every
 * device carries part of it. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer_verbs.h"

void cr_xfer_verbs_devices_close(struct cr_xfer_verbs_device **devs, uint32_t count) {
    for (uint32_t d = 0; d < count; d++) {
        cr_xfer_verbs_device_close(devs[d]);
        devs[d] = NULL;
    }
}

/* Index of the device called name[0, len) in list, or -1. */
static int find_named(struct ibv_device **list, int n, const char *name, size_t len) {
    for (int i = 0; i < n; i++) {
        const char *have = ibv_get_device_name(list[i]);
        if (strlen(have) == len && memcmp(have, name, len) == 0) return i;
    }
    return -1;
}

/* "mlx5_0, mlx5_1": the names a host has, for error messages. */
static void list_names(struct ibv_device **list, int n, char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "",
                                 ibv_get_device_name(list[i]));
}

/* Opens exactly the devices named in `names` (comma-separated). */
static uint32_t open_named(struct ibv_device **list, int n, const char *names, int gid_index,
                           struct cr_xfer_verbs_device **out, char *why, size_t why_size) {
    uint32_t count = 0;
    for (const char *at = names; *at != '\0';) {
        size_t len = strcspn(at, ",");
        int index = find_named(list, n, at, len);
        char have[160];
        list_names(list, n, have, sizeof(have));
        if (len == 0 || index < 0 || count == CR_XFER_VERBS_DEVICES_MAX) {
            if (count == CR_XFER_VERBS_DEVICES_MAX)
                snprintf(why, why_size, "more than %u RDMA devices named", CR_XFER_VERBS_DEVICES_MAX);
            else
                snprintf(why, why_size, "RDMA device '%.*s' not found (this host has: %s)",
                         (int)(len > 64 ? 64 : len), at, have);
            cr_xfer_verbs_devices_close(out, count);
            return 0;
        }
        char fail[160];
        if (cr_xfer_verbs_device_open((uint32_t)index, 1, gid_index, &out[count], fail,
                                      sizeof(fail)) != CR_OK) {
            snprintf(why, why_size, "RDMA device '%.*s' unusable: %s", (int)(len > 64 ? 64 : len),
                     at, fail);
            cr_xfer_verbs_devices_close(out, count);
            return 0;
        }
        count++;
        at += len;
        if (*at == ',') at++;
    }
    return count;
}

/* Opens every device whose port is active, up to the maximum. */
static uint32_t open_active(int n, int gid_index, struct cr_xfer_verbs_device **out, char *why,
                            size_t why_size) {
    uint32_t count = 0;
    size_t used = (size_t)snprintf(why, why_size, "no usable RDMA device (");
    for (int i = 0; i < n; i++) {
        if (count == CR_XFER_VERBS_DEVICES_MAX) {
            CR_WARN("xfer", "%d RDMA devices found, %u used (name them to choose: "
                    "--data-rdma-devices / --rdma-devices)", n, CR_XFER_VERBS_DEVICES_MAX);
            break;
        }
        char fail[160];
        if (cr_xfer_verbs_device_open((uint32_t)i, 1, gid_index, &out[count], fail,
                                      sizeof(fail)) == CR_OK) {
            count++;
            continue;
        }
        CR_WARN("xfer", "RDMA device left out: %s", fail);
        if (used < why_size)
            used += (size_t)snprintf(why + used, why_size - used, "%s%s", i ? "; " : "", fail);
    }
    if (count == 0 && used < why_size) snprintf(why + used, why_size - used, ")");
    return count;
}

uint32_t cr_xfer_verbs_devices_open(const char *names, int gid_index,
                                    struct cr_xfer_verbs_device **out, char *why, size_t why_size) {
    assert(out != NULL && why != NULL);
    int n = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL || n <= 0) {
        snprintf(why, why_size, "no RDMA device (ibv_get_device_list: %s)",
                 list == NULL ? strerror(errno ? errno : ENODEV) : "found none");
        if (list != NULL) ibv_free_device_list(list);
        return 0;
    }
    uint32_t count = names != NULL && names[0] != '\0'
                         ? open_named(list, n, names, gid_index, out, why, why_size)
                         : open_active(n, gid_index, out, why, why_size);
    ibv_free_device_list(list);
    return count;
}

int cr_xfer_verbs_region_register(struct cr_xfer_verbs_device *const *devs, uint32_t count,
                                  void *addr, uint64_t len, struct cr_xfer_verbs_region *out,
                                  char *why, size_t why_size) {
    assert(devs != NULL && count >= 1 && count <= CR_XFER_VERBS_DEVICES_MAX && out != NULL);
    memset(out, 0, sizeof(*out));
    for (uint32_t d = 0; d < count; d++) {
        int rc = cr_xfer_verbs_register(devs[d], addr, len, &out->mr[d], &out->lkey[d],
                                        &out->rkey[d], why, why_size);
        if (rc != CR_OK) {
            out->count = d;
            cr_xfer_verbs_region_deregister(out);
            return rc;
        }
    }
    out->count = count;
    return CR_OK;
}

void cr_xfer_verbs_region_deregister(struct cr_xfer_verbs_region *region) {
    for (uint32_t d = 0; d < region->count; d++) cr_xfer_verbs_deregister(region->mr[d]);
    memset(region, 0, sizeof(*region));
}
