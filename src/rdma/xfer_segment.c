/* Segment memory for store servers: a memfd mapped MAP_SHARED, so the shm
 * transport can pass the fd to same-host clients (SCM_RIGHTS) and they map
 * the very same pages.
 *
 * Huge pages first: MFD_HUGETLB with the mapping reserved at mmap time (no
 * MAP_NORESERVE: a hugetlb mapping without a reservation would SIGBUS on a
 * later touch when the pool runs dry, so we want mmap to fail now instead).
 * Otherwise normal shmem pages, which tmpfs allocates on first touch (the
 * lazy reservation crescentd's 1 GiB default relies on), with MADV_HUGEPAGE
 * so transparent huge pages back it where shmem THP is set to "advise".
 *
 * Sealed (F_SEAL_SHRINK, F_SEAL_GROW, then F_SEAL_SEAL) before it is mapped:
 * the shm transport hands the fd to same-host clients, and one that could
 * ftruncate it to 0 would make every later touch of the segment by this
 * process (a transfer, a checksum, a copy task) a SIGBUS.  Its size is
 * fixed for good; xfer_server_shm.c hands out only fds sealed so. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "crescent/error.h"
#include "rdma/xfer.h"

#define HUGE_PAGE_BYTES (UINT64_C(2) << 20)

static uint64_t round_up(uint64_t value, uint64_t align) {
    return (value + align - 1) / align * align;
}

/* One attempt with the given memfd flags; returns CR_OK or a status, the
 * caller decides whether to try again without huge pages. */
static int map_memfd(uint64_t size, unsigned flags, struct cr_xfer_segment *out) {
    int fd = memfd_create("crescent-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
    if (fd < 0) return errno == ENOMEM ? CR_ERR_NOMEM : CR_ERR_IO;
    if (ftruncate(fd, (off_t)size) != 0 || !cr_xfer_seal_size(fd)) {
        int saved = errno;
        close(fd);
        errno = saved;
        return CR_ERR_IO;
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int saved = errno;
        close(fd);
        errno = saved;
        return saved == ENOMEM ? CR_ERR_NOMEM : CR_ERR_IO;
    }
    out->base = base;
    out->size = size;
    out->fd = fd;
    out->huge_pages = (flags & MFD_HUGETLB) != 0;
    return CR_OK;
}

bool cr_xfer_seal_size(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0;
}

bool cr_xfer_size_sealed(int fd) {
    int seals = fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) == (F_SEAL_SHRINK | F_SEAL_SEAL);
}

int cr_xfer_segment_alloc(uint64_t size, struct cr_xfer_segment *out) {
    assert(out != NULL);
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    if (size == 0 || size > (UINT64_C(1) << 46)) return CR_ERR_INVALID_PARAMS;
    if (size >= HUGE_PAGE_BYTES &&
        map_memfd(round_up(size, HUGE_PAGE_BYTES), MFD_HUGETLB, out) == CR_OK) {
        CR_INFO("xfer", "segment of %llu bytes on 2 MiB huge pages",
                (unsigned long long)out->size);
        return CR_OK;
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    int rc = map_memfd(round_up(size, page), 0, out);
    if (rc != CR_OK) {
        CR_ERROR("xfer", "segment of %llu bytes: memfd/ftruncate/seal/mmap failed: %s",
                 (unsigned long long)size, strerror(errno));
        return rc;
    }
    /* Advice only: shmem THP may be off, which is not an error. */
    (void)madvise(out->base, out->size, MADV_HUGEPAGE);
    return CR_OK;
}

void cr_xfer_segment_free(struct cr_xfer_segment *seg) {
    if (seg == NULL || seg->base == NULL) return;
    munmap(seg->base, seg->size);
    if (seg->fd >= 0) close(seg->fd);
    memset(seg, 0, sizeof(*seg));
    seg->fd = -1;
}
