"""The reference's two SSD-offload calls that do not set a tier up
(docs/python.md): `unmount_local_disk_segment` and
`get_offload_rpc_read_count`, over libcrescent's `cr_host_drain_ssd` and
`cr_client_offload_read_count`.  A mixin of MooncakeDistributedStore
(python/crescent/mooncake_store.py), whose `_lock`, `_client` and `_hosts`
it uses."""
import ctypes
import logging
import time

from crescent._lib import lib

log = logging.getLogger("crescent.mooncake")

# How long one host's keep-alive thread may take to tell the master its SSD
# tier is withdrawn (a remount; retried at each ping after a failure).
_DRAIN_TIMEOUT_MS = 10000


def _int_arg(name, value):
    """pybind11's uint64_t argument: an int (bool included) >= 0, else TypeError."""
    if not isinstance(value, int) or value < 0:
        raise TypeError(f"{name}(): incompatible function arguments: grace_period_seconds "
                        f"must be an int >= 0, not {value!r}")
    return value


class _Offload:
    _offload_reads_closed = 0  # the count of clients closed before; see close()

    def unmount_local_disk_segment(self, grace_period_seconds=0):
        """Stops offering the SSD tier of the segments this process hosts to
        the master for offload, then waits out grace_period_seconds (only
        when there was a tier, as the reference).  0; 0 without a tier; -1
        when not set up, or a host could not tell the master."""
        grace = _int_arg("unmount_local_disk_segment", grace_period_seconds)
        drained_any = False
        with self._lock:
            if self._client is None:
                log.error("unmount_local_disk_segment: the store is not set up")
                return -1
            for host in self._hosts:
                drained = ctypes.c_bool(False)
                error = ctypes.create_string_buffer(512)
                rc = lib.cr_host_drain_ssd(host.handle, _DRAIN_TIMEOUT_MS,
                                           ctypes.byref(drained), error, len(error))
                if rc != 0:
                    log.error("unmount_local_disk_segment: segment %s: %s", host.name,
                              error.value.decode(errors="replace"))
                    return -1
                drained_any = drained_any or drained.value
        if not drained_any:
            log.warning("unmount_local_disk_segment: no SSD tier is hosted here (nothing to do)")
            return 0
        if grace > 0:
            time.sleep(grace)
        return 0

    def get_offload_rpc_read_count(self):
        """How many times this store read an object from a store server's SSD
        tier (a local_disk replica), successful or not, since it was made."""
        with self._lock:
            live = lib.cr_client_offload_read_count(self._client) \
                if self._client is not None else 0
            return self._offload_reads_closed + live
