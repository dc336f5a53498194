"""A small store-master RPC client for integration tests (a foreign client).

Speaks the three-frame envelope of src/msgs/rpc_frame.h over a ZMQ DEALER
(libcrescent uses the one-frame layout, so both are exercised):

    request  [method u16 BE] [request id u64 BE] [protobuf body]
    reply    [request id u64 BE] [status i32 BE] [body]

`status` is the transport's verdict: 0 means `body` is the method's protobuf
response (which carries its own status_code); anything else means `body` is a
UTF-8 message for a person.

The protobuf classes are generated from proto/master.proto at import time
(`protoc --python_out` into a temporary directory), so the tests always use
the same .proto as the daemon.

API (every blocking call raises TimeoutError when no reply comes in time and
RpcError when the transport status is not 0):

    pb = load_proto()                      # the generated master_pb2 module
    c = MasterClient("tcp://127.0.0.1:PORT", client_id=(1, 2), timeout=5.0)
    c.ping()                               -> PingResponse
    c.mount_segment(name, size, base=..., endpoint="127.0.0.1:1", protocol="tcp")
    c.remount_segment(...), c.unmount_segment(name)
    c.put_start(key, size, replica_num=1, soft_pin=False, preferred_segment=None,
                tenant="default", block=None)  -> PutStartResponse
                (block: dict with model_name, block_size, block_hash,
                 parent_block_hash, token_ids)
    c.put_end(key, tenant=...), c.put_revoke(key, tenant=...)
    c.put(key, size, **kw)                 -> (PutStartResponse, PutEndResponse)
    c.batch_put_start([(key, size), ...], **kw), c.batch_put_end(keys), c.batch_put_revoke(keys)
    c.exist_key(key), c.batch_exist_key(keys)
    c.get_replica_list(key), c.batch_get_replica_list(keys)
    c.get_replica_list_by_regex(pattern)
    c.remove(key, force=False), c.batch_remove(keys, force=False)
    c.remove_by_regex(pattern, force=False), c.remove_all(tenant=None, force=False)
    c.batch_query_ip([(first, second), ...]), c.batch_replica_clear(keys, segment_name=None)
    c.get_version()

    Pipelining and raw frames:
    rid = c.send(method, request_message)  # returns the request id
    rid, status, body = c.recv()           # next reply, any order
    c.send_frames([b"..", ...])            # arbitrary frames (malformed-input tests)
    c.call(method, request)                # send + wait for that id -> decoded response
    c.close()

Method ids: pb.Method values, e.g. pb.PUT_START.  Status codes: STATUS below.

NativeMasterClient has the same API over crescentd's native TCP endpoint
(--rpc-tcp-address; src/msgs/rpc_stream.h): each request is one frame
[length u32 BE][method u16 | request id u64 | body], each reply
[length u32 BE][request id u64 | status i32 | body].  connect(endpoint)
picks the class by scheme (crescent:// is native).  send_raw(bytes) writes
arbitrary bytes (malformed-input tests); send_frames joins the three
request frames into one native frame.
"""
import importlib
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading

import zmq

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")

# crescent status codes (include/crescent/error.h).
STATUS = {
    "OK": 0, "AGAIN": -1, "TIMEOUT": -2, "NOMEM": -3, "SHUTDOWN": -4, "IO": -5,
    "PROTOCOL": -6, "NO_AVAILABLE_HANDLE": -200, "INVALID_PARAMS": -600,
    "ILLEGAL_CLIENT": -601, "SEGMENT_NOT_FOUND": -101, "SEGMENT_ALREADY_EXISTS": -102,
    "OBJECT_NOT_FOUND": -704, "OBJECT_ALREADY_EXISTS": -705, "OBJECT_HAS_LEASE": -706,
    "OBJECT_NOT_READY": -707, "RPC_FAIL": -900,
}

_proto_lock = threading.Lock()
_proto_module = None
_proto_tmp = None


def load_proto():
    """Generates (once per process) and returns the master_pb2 module."""
    global _proto_module, _proto_tmp
    with _proto_lock:
        if _proto_module is None:
            _proto_tmp = tempfile.TemporaryDirectory(prefix="crescent-proto-")
            subprocess.run(["protoc", f"--proto_path={PROTO_DIR}",
                            f"--python_out={_proto_tmp.name}",
                            os.path.join(PROTO_DIR, "master.proto")], check=True)
            sys.path.insert(0, _proto_tmp.name)
            try:
                _proto_module = importlib.import_module("master_pb2")
            finally:
                sys.path.remove(_proto_tmp.name)
        return _proto_module


class RpcError(Exception):
    """The transport refused the request: `status` (non-zero) and `message`."""

    def __init__(self, status, message):
        super().__init__(f"transport status {status}: {message}")
        self.status = status
        self.message = message


def _response_class(pb, method):
    """Maps a Method value to its response class (by naming convention)."""
    name = pb.Method.Name(method)
    camel = "".join(part.capitalize() for part in name.split("_"))
    if name == "REMOUNT_SEGMENT":
        camel = "MountSegment"
    return getattr(pb, camel + "Response")


def encode_request(method, request_id, body):
    return [struct.pack(">H", method), struct.pack(">Q", request_id), body]


# The secrets crescentd issued, by (endpoint, client id): shared by every
# MasterClient of the test process, as libcrescent keeps its client's.  A
# stale one (a daemon restarted on the same port) is harmless: crescentd does
# not check a secret for a client it does not know.
_SECRETS = {}


class MasterClient:
    def __init__(self, endpoint, client_id=(1, 1), timeout=5.0, ctx=None, keep_secrets=True):
        self.keep_secrets = keep_secrets  # False: a caller that knows only the client id
        self.pb = load_proto()
        self.endpoint = endpoint
        self.client_id = client_id
        self.timeout = timeout
        self._own_ctx = ctx is None
        self.ctx = ctx or zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self._next_id = 1
        self._pending = {}  # replies received while waiting for another id

    def close(self):
        self.sock.close(0)
        if self._own_ctx:
            self.ctx.term()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- raw transport -------------------------------------------------
    def uuid(self, client_id=None):
        first, second = client_id or self.client_id
        return self.pb.UUID(first=first, second=second)

    def send_frames(self, frames):
        self.sock.send_multipart(frames)

    def send(self, method, request, request_id=None):
        if request_id is None:
            request_id = self._next_id
            self._next_id += 1
        if not isinstance(request, bytes) and self.keep_secrets:
            self._attach_secrets(request)
        body = request if isinstance(request, bytes) else request.SerializeToString()
        self.send_frames(encode_request(method, request_id, body))
        return request_id

    def _attach_secrets(self, request):
        """Fills client_secret (when unset) of the request, or of each entry of a
        batch, with the secret issued to its client id."""
        entries = list(request.requests) if hasattr(request, "requests") else [request]
        for r in entries:
            if "client_secret" not in r.DESCRIPTOR.fields_by_name or r.HasField("client_secret"):
                continue
            if not r.HasField("client_id"):
                continue
            secret = _SECRETS.get((self.endpoint, r.client_id.first, r.client_id.second))
            if secret is not None:
                r.client_secret = secret

    def _keep_secret(self, request, resp):
        if not self.keep_secrets or "client_secret" not in resp.DESCRIPTOR.fields_by_name:
            return
        if resp.HasField("client_secret"):
            _SECRETS[(self.endpoint, request.client_id.first, request.client_id.second)] = \
                resp.client_secret

    def recv(self, timeout=None):
        """Next reply as (request id, status, body bytes); raises TimeoutError."""
        t = self.timeout if timeout is None else timeout
        if not self.sock.poll(int(t * 1000)):
            raise TimeoutError(f"no reply from {self.endpoint} within {t} s")
        frames = self.sock.recv_multipart()
        if len(frames) == 1 and len(frames[0]) >= 12:  # the one-frame layout
            rid, status = struct.unpack(">Qi", frames[0][:12])
            return rid, status, frames[0][12:]
        if len(frames) != 3 or len(frames[0]) != 8 or len(frames[1]) != 4:
            raise AssertionError(f"malformed reply frames: {frames!r}")
        return (struct.unpack(">Q", frames[0])[0], struct.unpack(">i", frames[1])[0], frames[2])

    def recv_frames(self, timeout=None):
        """The next reply's raw frames (to check its layout)."""
        t = self.timeout if timeout is None else timeout
        if not self.sock.poll(int(t * 1000)):
            raise TimeoutError(f"no reply from {self.endpoint} within {t} s")
        return self.sock.recv_multipart()

    def wait(self, request_id, timeout=None):
        """(status, body) of the reply to request_id; other replies are kept."""
        while request_id not in self._pending:
            rid, status, body = self.recv(timeout)
            self._pending[rid] = (status, body)
        return self._pending.pop(request_id)

    def decode(self, method, status, body):
        if status != 0:
            raise RpcError(status, body.decode("utf-8", "replace"))
        resp = _response_class(self.pb, method)()
        resp.ParseFromString(body)
        return resp

    def call(self, method, request, timeout=None):
        status, body = self.wait(self.send(method, request), timeout)
        resp = self.decode(method, status, body)
        if not isinstance(request, bytes):
            self._keep_secret(request, resp)
        return resp

    # ---- methods --------------------------------------------------------
    def get_version(self):
        return self.call(self.pb.GET_VERSION, self.pb.GetVersionRequest())

    def ping(self, client_id=None, max_tasks=None):
        req = self.pb.PingRequest(client_id=self.uuid(client_id))
        if max_tasks is not None:
            req.max_tasks = max_tasks
        return self.call(self.pb.PING, req)

    def _mount_req(self, name, size, base, endpoint, protocol, client_id):
        return self.pb.MountSegmentRequest(buffer=base, size=size, segment_name=name,
                                           client_id=self.uuid(client_id),
                                           transport_endpoint=endpoint, protocol=protocol)

    def mount_segment(self, name, size, base=0x10000000, endpoint="127.0.0.1:17000",
                      protocol="tcp", client_id=None):
        return self.call(self.pb.MOUNT_SEGMENT,
                         self._mount_req(name, size, base, endpoint, protocol, client_id))

    def remount_segment(self, name, size, base=0x10000000, endpoint="127.0.0.1:17000",
                        protocol="tcp", client_id=None):
        return self.call(self.pb.REMOUNT_SEGMENT,
                         self._mount_req(name, size, base, endpoint, protocol, client_id))

    def unmount_segment(self, name, client_id=None):
        return self.call(self.pb.UNMOUNT_SEGMENT, self.pb.UnmountSegmentRequest(
            segment_name=name, client_id=self.uuid(client_id)))

    def put_start_request(self, key, size, replica_num=1, soft_pin=False, preferred_segment=None,
                          tenant="default", block=None, client_id=None):
        cfg = self.pb.ReplicateConfig(replica_num=replica_num, with_soft_pin=soft_pin)
        if preferred_segment:
            cfg.preferred_segment = preferred_segment
        req = self.pb.PutStartRequest(key=key, value_length=size, config=cfg, tenant_id=tenant,
                                      client_id=self.uuid(client_id))
        if block is not None:
            req.block.CopyFrom(self.pb.BlockInfo(**block))
        return req

    def put_start(self, key, size, **kw):
        return self.call(self.pb.PUT_START, self.put_start_request(key, size, **kw))

    def put_end(self, key, tenant="default", client_id=None):
        return self.call(self.pb.PUT_END, self.pb.PutEndRequest(
            key=key, tenant_id=tenant, client_id=self.uuid(client_id)))

    def put_revoke(self, key, tenant="default", client_id=None):
        return self.call(self.pb.PUT_REVOKE, self.pb.PutRevokeRequest(
            key=key, tenant_id=tenant, client_id=self.uuid(client_id)))

    def put(self, key, size, **kw):
        """PutStart then PutEnd; returns both responses."""
        start = self.put_start(key, size, **kw)
        end = self.put_end(key, tenant=kw.get("tenant", "default"),
                           client_id=kw.get("client_id"))
        return start, end

    def batch_put_start(self, items, **kw):
        reqs = [self.put_start_request(k, s, **kw) for k, s in items]
        return self.call(self.pb.BATCH_PUT_START, self.pb.BatchPutStartRequest(requests=reqs))

    def batch_put_end(self, keys, tenant="default", client_id=None):
        reqs = [self.pb.PutEndRequest(key=k, tenant_id=tenant, client_id=self.uuid(client_id))
                for k in keys]
        return self.call(self.pb.BATCH_PUT_END, self.pb.BatchPutEndRequest(requests=reqs))

    def batch_put_revoke(self, keys, tenant="default", client_id=None):
        reqs = [self.pb.PutRevokeRequest(key=k, tenant_id=tenant, client_id=self.uuid(client_id))
                for k in keys]
        return self.call(self.pb.BATCH_PUT_REVOKE, self.pb.BatchPutRevokeRequest(requests=reqs))

    def exist_key(self, key, tenant="default"):
        return self.call(self.pb.EXIST_KEY, self.pb.ExistKeyRequest(key=key, tenant_id=tenant))

    def batch_exist_key(self, keys, tenant="default"):
        return self.call(self.pb.BATCH_EXIST_KEY,
                         self.pb.BatchExistKeyRequest(keys=keys, tenant_id=tenant))

    def get_replica_list(self, key, tenant="default"):
        return self.call(self.pb.GET_REPLICA_LIST,
                         self.pb.GetReplicaListRequest(key=key, tenant_id=tenant))

    def batch_get_replica_list(self, keys, tenant="default"):
        return self.call(self.pb.BATCH_GET_REPLICA_LIST,
                         self.pb.BatchGetReplicaListRequest(keys=keys, tenant_id=tenant))

    def get_replica_list_by_regex(self, pattern, tenant="default"):
        return self.call(self.pb.GET_REPLICA_LIST_BY_REGEX,
                         self.pb.GetReplicaListByRegexRequest(key_regex=pattern, tenant_id=tenant))

    def remove(self, key, force=False, tenant="default"):
        return self.call(self.pb.REMOVE,
                         self.pb.RemoveRequest(key=key, tenant_id=tenant, force=force))

    def batch_remove(self, keys, force=False, tenant="default"):
        return self.call(self.pb.BATCH_REMOVE,
                         self.pb.BatchRemoveRequest(keys=keys, tenant_id=tenant, force=force))

    def remove_by_regex(self, pattern, force=False, tenant="default"):
        return self.call(self.pb.REMOVE_BY_REGEX, self.pb.RemoveByRegexRequest(
            key_regex=pattern, tenant_id=tenant, force=force))

    def remove_all(self, tenant=None, force=False):
        req = self.pb.RemoveAllRequest(force=force)
        if tenant is not None:
            req.tenant_id = tenant
        return self.call(self.pb.REMOVE_ALL, req)

    def batch_query_ip(self, client_ids):
        ids = [self.pb.UUID(first=f, second=s) for f, s in client_ids]
        return self.call(self.pb.BATCH_QUERY_IP, self.pb.BatchQueryIpRequest(client_ids=ids))

    def batch_replica_clear(self, keys, segment_name=None, tenant="default", client_id=None):
        req = self.pb.BatchReplicaClearRequest(object_keys=keys, client_id=self.uuid(client_id),
                                               tenant_id=tenant)
        if segment_name:
            req.segment_name = segment_name
        return self.call(self.pb.BATCH_REPLICA_CLEAR, req)

    # ---- copy/move tasks --------------------------------------------------
    def create_copy_task(self, key, targets, source=None, tenant="default"):
        req = self.pb.CreateCopyTaskRequest(key=key, targets=targets, tenant_id=tenant)
        if source:
            req.source = source
        return self.call(self.pb.CREATE_COPY_TASK, req)

    def create_move_task(self, key, source, target, tenant="default"):
        return self.call(self.pb.CREATE_MOVE_TASK, self.pb.CreateMoveTaskRequest(
            key=key, source=source, target=target, tenant_id=tenant))

    def query_task(self, task_id):
        return self.call(self.pb.QUERY_TASK, self.pb.QueryTaskRequest(task_id=task_id))

    def fetch_tasks(self, max_tasks=16, client_id=None):
        return self.call(self.pb.FETCH_TASKS, self.pb.FetchTasksRequest(
            client_id=self.uuid(client_id), max_tasks=max_tasks))

    def mark_task_to_complete(self, task_id, success=True, message="", client_id=None):
        status = self.pb.SUCCESS if success else self.pb.FAILED
        return self.call(self.pb.MARK_TASK_TO_COMPLETE, self.pb.MarkTaskToCompleteRequest(
            client_id=self.uuid(client_id), task_id=task_id, status=status, message=message))


class NativeMasterClient(MasterClient):
    """MasterClient over the native TCP endpoint (crescent://HOST:PORT)."""

    def __init__(self, endpoint, client_id=(1, 1), timeout=5.0, keep_secrets=True):
        assert endpoint.startswith("crescent://"), endpoint
        self.keep_secrets = keep_secrets
        self.pb = load_proto()
        self.endpoint = endpoint
        self.client_id = client_id
        self.timeout = timeout
        host, port = endpoint[len("crescent://"):].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._rx = b""
        self._next_id = 1
        self._pending = {}

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send_frames(self, frames):
        payload = b"".join(frames)
        self.sock.sendall(struct.pack(">I", len(payload)) + payload)

    def _fill(self, deadline):
        import time
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.sock], [], [], left)[0]:
            raise TimeoutError(f"no reply from {self.endpoint}")
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError(f"{self.endpoint} closed the connection")
        self._rx += data

    def recv_payload(self, timeout=None):
        """The next reply frame's payload [id u64][status i32][body]."""
        import time
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self._rx) < 4:
            self._fill(deadline)
        (n,) = struct.unpack(">I", self._rx[:4])
        while len(self._rx) < 4 + n:
            self._fill(deadline)
        payload, self._rx = self._rx[4:4 + n], self._rx[4 + n:]
        return payload

    def recv(self, timeout=None):
        payload = self.recv_payload(timeout)
        assert len(payload) >= 12, payload
        rid, status = struct.unpack(">Qi", payload[:12])
        return rid, status, payload[12:]

    def recv_frames(self, timeout=None):
        return [self.recv_payload(timeout)]

    def closed_by_peer(self, timeout=None):
        """True once crescentd has closed this connection (EOF)."""
        import time
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            while True:
                self._fill(deadline)
        except ConnectionError:
            return True
        except (TimeoutError, OSError):
            return False


class ShmMasterClient(NativeMasterClient):
    """MasterClient over the same-host shared-memory endpoint (shm://NAME,
    src/msgs/rpc_shm.h): the hand-shake on the Unix socket, then the same
    length-prefixed frames as NativeMasterClient, through the rings.  A test
    client: it wakes crescentd after every write (an eventfd write, harmless
    when crescentd is awake) instead of the flag handshake, whose fence
    Python cannot issue, and sleeps in 10 ms slices."""

    MAGIC = 0x31435052
    HEADER = 4096
    # Offsets in struct cr_rpc_shm_header (two ring_ctl of four cache lines).
    REQ_HEAD, REQ_TAIL, REP_HEAD, REP_TAIL, REP_WAITING = 64, 128, 320, 384, 512

    def __init__(self, endpoint, client_id=(1, 1), timeout=5.0, keep_secrets=True):
        import mmap
        assert endpoint.startswith("shm://"), endpoint
        self.keep_secrets = keep_secrets
        self.pb = load_proto()
        self.endpoint = endpoint
        self.client_id = client_id
        self.timeout = timeout
        name = endpoint[len("shm://"):]
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        self.sock.connect("\0" + name[1:] if name.startswith("@") else name)
        try:
            self.sock.send(struct.pack("=II", self.MAGIC, 1))
        except BrokenPipeError:
            pass  # refused and closed already: the refusal is still there to read
        msg, fds, _, _ = socket.recv_fds(self.sock, 256, 3)
        magic, status, ring = struct.unpack_from("=IiI", msg)
        if status != 0:
            self.sock.close()
            raise ConnectionError(msg[12:].split(b"\0")[0].decode())
        assert magic == self.MAGIC and len(fds) == 3
        self.map = mmap.mmap(fds[0], self.HEADER + 2 * ring)
        # The indices as whole aligned 8-byte words: struct.pack_into writes
        # byte by byte, and crescentd would see a torn index (and close us).
        self.words = memoryview(self.map)[:self.HEADER].cast("Q")
        os.close(fds[0])
        self.to_server, self.to_client = fds[1], fds[2]
        self.ring = ring
        self._req_pos = self._rep_pos = 0
        self._rx = b""
        self._next_id = 1
        self._pending = {}

    def close(self):
        for fd in (self.to_server, self.to_client):
            os.close(fd)
        self.words.release()
        self.map.close()
        self.sock.close()

    def _u64(self, off):
        return self.words[off // 8]

    def set_u64(self, off, value):
        self.words[off // 8] = value

    def _wake(self):
        try:
            os.write(self.to_server, struct.pack("=Q", 1))
        except BlockingIOError:
            pass

    def send_raw(self, data):
        import time
        deadline = time.monotonic() + self.timeout
        while data:
            room = self.ring - (self._req_pos - self._u64(self.REQ_HEAD))
            if room == 0:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.endpoint}: request ring full")
                time.sleep(0.001)
                continue
            chunk, data = data[:room], data[room:]
            at = self._req_pos % self.ring
            first = min(len(chunk), self.ring - at)
            base = self.HEADER
            self.map[base + at:base + at + first] = chunk[:first]
            self.map[base:base + len(chunk) - first] = chunk[first:]
            self._req_pos += len(chunk)
            self.set_u64(self.REQ_TAIL, self._req_pos)
            self._wake()

    def send_frames(self, frames):
        payload = b"".join(frames)
        self.send_raw(struct.pack(">I", len(payload)) + payload)

    def _fill(self, deadline):
        import time
        while True:
            n = self._u64(self.REP_TAIL) - self._rep_pos
            if n > 0:
                break
            if select.select([self.sock], [], [], 0)[0] and not self.sock.recv(1):
                raise ConnectionError(f"{self.endpoint} closed the connection")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply from {self.endpoint}")
            select.select([self.to_client], [], [], min(left, 0.01))
        at = self._rep_pos % self.ring
        first = min(n, self.ring - at)
        base = self.HEADER + self.ring
        self._rx += self.map[base + at:base + at + first] + self.map[base:base + n - first]
        self._rep_pos += n
        self.set_u64(self.REP_HEAD, self._rep_pos)
        if self._u64(self.REP_WAITING) & 0xffffffff:  # crescentd waits for room
            self._wake()


def connect(endpoint, **kw):
    """A client for `endpoint`: native for crescent://, shm for shm://, ZMQ
    otherwise."""
    if endpoint.startswith("crescent://"):
        return NativeMasterClient(endpoint, **kw)
    if endpoint.startswith("shm://"):
        return ShmMasterClient(endpoint, **kw)
    return MasterClient(endpoint, **kw)
