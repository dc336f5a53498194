/* --state-dir's check at start (state_dir.h). */
#include "daemon/state_dir.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crescent/error.h"
#include "daemon/config.h"

int cr_daemon_state_dir_check(const char *dir, char *error, size_t error_size) {
    assert(dir != NULL && error != NULL);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(error, error_size, "--state-dir %.200s: cannot create it: %s", dir,
                 strerror(errno));
        return CR_ERR_INVALID_PARAMS;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        snprintf(error, error_size, "--state-dir %.200s: %s", dir, strerror(errno));
        return CR_ERR_INVALID_PARAMS;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(error, error_size,
                 "--state-dir %.200s: not a directory (name a directory; crescentd keeps the "
                 "store's log and the indexer's registrations in it)",
                 dir);
        return CR_ERR_INVALID_PARAMS;
    }
    char probe[CR_CONFIG_ADDRESS_MAX + 64];
    snprintf(probe, sizeof(probe), "%s/.crescentd-write-probe-%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(error, error_size, "--state-dir %.200s: cannot write there: %s", dir,
                 strerror(errno));
        return CR_ERR_INVALID_PARAMS;
    }
    close(fd);
    unlink(probe);
    return CR_OK;
}
