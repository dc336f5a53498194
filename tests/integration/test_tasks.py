"""Copy/move tasks over the store-master RPC, driven as foreign clients: the
task's creator, the executor (the client that mounted the source segment,
which fetches the task and reports it), readers, and a seed-000 subscriber
that checks the BlockUpdateEvent of every completed task.

The executor here reports without moving bytes (the data plane of issue 12
runs the real executors); what is checked is the master's side: targets
reserved but never readable before the commit, commit and rollback,
a move's source released only once no lease protects it, deadlines,
retention, refusals, events, HTTP and metrics."""
import json
import subprocess
import urllib.request
import uuid

import pytest

from conftest import binary, http_get
from master_client import STATUS, MasterClient
from test_events import WAIT_S, Plane, recv_batch
from test_store_master import wait_for

SIZE = 4096
A = (0xA, 1)  # the executor: mounts seg-a and seg-b
B = (0xB, 2)  # another store: mounts seg-c
EP = {"seg-a": "10.0.0.1:7001", "seg-b": "10.0.0.1:7002", "seg-c": "10.0.0.2:7003"}


class Cluster(Plane):
    """crescentd, two store clients with three segments, and a put key."""

    def __init__(self, daemon, *extra):
        super().__init__(daemon, *extra)
        self.a = MasterClient(self.rpc, client_id=A, timeout=WAIT_S)
        self.b = MasterClient(self.rpc, client_id=B, timeout=WAIT_S)
        self.pb = self.client.pb
        for c, name, base in ((self.a, "seg-a", 0x1000_0000), (self.a, "seg-b", 0x2000_0000),
                              (self.b, "seg-c", 0x3000_0000)):
            assert c.mount_segment(name, 1 << 20, base=base, endpoint=EP[name]).status_code == 0

    def close(self):
        self.a.close()
        self.b.close()
        super().close()

    def put_on(self, key, segment):
        start, end = self.a.put(key, SIZE, preferred_segment=segment)
        assert start.status_code == 0 and end.status_code == 0, (start, end)
        assert start.replica_list[0].handles[0].segment_name == segment

    def segments_of(self, key):
        r = self.client.get_replica_list(key)
        assert r.status_code == 0, r
        return sorted(i.handles[0].segment_name for i in r.replica_list)

    def status(self, task_id):
        q = self.client.query_task(task_id)
        assert q.status_code == 0, q
        return q

    def wait_status(self, task_id, status):
        wait_for(lambda: self.status(task_id).status == status, timeout=WAIT_S,
                 what=f"task status {status}")
        return self.status(task_id)

    def used_bytes(self):
        status, body = http_get(self.daemon.port, "/api/v1/stats")
        assert status == 200
        return json.loads(body)["used_bytes"]

    def update_events(self, sub, key):
        """BlockUpdateEvents of `key` until one arrives (the sub is ready)."""
        while True:
            _, events = recv_batch(sub, self.topic)
            updates = [e for e in events if e[0] == "BlockUpdateEvent" and e[1] == key]
            if updates:
                return updates


@pytest.fixture
def cluster(daemon):
    made = []

    def start(*extra):
        c = Cluster(daemon, *extra)
        made.append(c)
        return c

    yield start
    for c in made:
        c.close()


def test_copy_reserves_then_commits_with_event(cluster):
    c = cluster()
    sub = c.subscriber()
    c.ready(sub)
    c.put_on("k", "seg-a")
    used = c.used_bytes()
    created = c.client.create_copy_task("k", ["seg-b", "seg-c"])
    assert created.status_code == 0, created
    tid = created.task_id
    q = c.status(tid)
    assert q.status == c.pb.PENDING and q.type == c.pb.REPLICA_COPY
    assert (q.assigned_client.first, q.assigned_client.second) == A  # owns the source
    assert q.created_at_ms_epoch > 1.6e12 and q.last_updated_at_ms_epoch >= q.created_at_ms_epoch
    # Reserved: space taken, but nothing readable or published yet.
    assert c.used_bytes() == used + 2 * SIZE
    assert c.segments_of("k") == ["seg-a"]
    assert len(c.b.fetch_tasks().tasks) == 0  # B does not hold the source
    got = c.a.fetch_tasks().tasks
    assert len(got) == 1 and got[0].task_id == tid and got[0].key == "k"
    assert got[0].source.segment_name == "seg-a" and got[0].source.size == SIZE
    assert got[0].source.transport_endpoint == EP["seg-a"]
    assert sorted(t.segment_name for t in got[0].targets) == ["seg-b", "seg-c"]
    assert 0 < got[0].deadline_in_ms <= 300_000
    assert c.status(tid).status == c.pb.PROCESSING
    assert len(c.a.fetch_tasks().tasks) == 0  # handed out once
    assert c.segments_of("k") == ["seg-a"]
    assert c.a.mark_task_to_complete(tid).status_code == 0
    q = c.status(tid)
    assert q.status == c.pb.SUCCESS and q.message == "Task completed successfully"
    assert c.segments_of("k") == ["seg-a", "seg-b", "seg-c"]
    status, body = http_get(c.daemon.port, "/metrics")
    assert "\ncrescent_tasks_succeeded_total 1\n" in body.decode()
    assert f"\ncrescent_tasks_bytes_moved_total {2 * SIZE}\n" in body.decode()
    updates = c.update_events(sub, "k")
    assert sorted(loc for _, loc in updates[-1][2]) == sorted(EP.values())
    # A second report of a finished task is refused.
    late = c.a.mark_task_to_complete(tid)
    assert late.status_code == STATUS["INVALID_PARAMS"] and "already ended" in late.error_message


def test_ping_hands_tasks_out(cluster):
    """Seed 004's hand-out: the executor's Ping response carries its PENDING
    tasks (PingRequest.max_tasks), once; a plain ping carries none."""
    c = cluster()
    for i in range(3):
        c.put_on(f"p{i}", "seg-a")
    ids = {c.client.create_copy_task(f"p{i}", ["seg-c"]).task_id.SerializeToString()
           for i in range(3)}
    plain = c.a.ping()
    assert plain.status_code == 0 and len(plain.tasks) == 0
    assert len(c.b.ping(max_tasks=16).tasks) == 0  # B does not hold the sources
    first = c.a.ping(max_tasks=2)
    assert first.status_code == 0 and first.client_known and first.client_ttl_ms > 0
    assert len(first.tasks) == 2
    rest = c.a.ping(max_tasks=16).tasks
    assert len(rest) == 1 and len(c.a.ping(max_tasks=16).tasks) == 0  # handed out once
    got = list(first.tasks) + list(rest)
    assert {t.task_id.SerializeToString() for t in got} == ids
    for t in got:
        assert t.source.segment_name == "seg-a" and [x.segment_name for x in t.targets] == ["seg-c"]
        assert c.status(t.task_id).status == c.pb.PROCESSING
        assert c.a.mark_task_to_complete(t.task_id).status_code == 0
        assert c.wait_status(t.task_id, c.pb.SUCCESS).status == c.pb.SUCCESS
    bad = c.a.ping(max_tasks=257)
    assert bad.status_code == STATUS["INVALID_PARAMS"] and "max_tasks" in bad.error_message
    unknown = MasterClient(c.rpc, client_id=(0xC, 3), timeout=WAIT_S)
    try:  # a client the master does not know gets no tasks, and is told so
        r = unknown.ping(max_tasks=16)
        assert not r.client_known and len(r.tasks) == 0
    finally:
        unknown.close()


def test_move_waits_for_a_live_lease(cluster):
    c = cluster("--default-kv-lease-ttl", "1500")
    sub = c.subscriber()
    c.ready(sub)
    c.put_on("m", "seg-a")
    tid = c.client.create_move_task("m", "seg-a", "seg-c").task_id
    assert c.a.fetch_tasks().tasks[0].task_id == tid
    assert c.segments_of("m") == ["seg-a"]  # a reader: the source is leased now
    assert c.a.mark_task_to_complete(tid).status_code == 0
    q = c.status(tid)
    # Committed, source kept while leased: readers see both.
    if q.status == c.pb.PROCESSING:
        assert "leased" in q.message
    both = c.update_events(sub, "m")[-1]
    assert sorted(loc for _, loc in both[2]) == [EP["seg-a"], EP["seg-c"]]
    q = c.wait_status(tid, c.pb.SUCCESS)
    assert q.message == "Task completed successfully"
    final = c.update_events(sub, "m")[-1]
    assert [loc for _, loc in final[2]] == [EP["seg-c"]]
    assert c.segments_of("m") == ["seg-c"]


def test_executor_that_never_reports_is_rolled_back(cluster):
    c = cluster("--task-timeout-sec", "2")
    c.put_on("d", "seg-a")
    used = c.used_bytes()
    tid = c.client.create_copy_task("d", ["seg-c"]).task_id
    assert c.a.fetch_tasks().tasks[0].task_id == tid
    assert c.used_bytes() == used + SIZE
    q = c.wait_status(tid, c.pb.FAILED)  # the executor "died" after fetching
    assert "deadline passed" in q.message and "--task-timeout-sec" in q.message
    assert c.used_bytes() == used  # the reserved replica is freed
    assert c.segments_of("d") == ["seg-a"]  # the source is intact
    late = c.a.mark_task_to_complete(tid)
    assert late.status_code == STATUS["INVALID_PARAMS"]
    status, body = http_get(c.daemon.port, "/metrics")
    assert status == 200
    text = body.decode()
    assert "\ncrescent_tasks_timed_out_total 1\n" in text
    assert "\ncrescent_tasks_failed_total 1\n" in text
    assert "\ncrescent_tasks_in_flight 0\n" in text


def test_failed_report_rolls_back(cluster):
    c = cluster()
    c.put_on("f", "seg-a")
    used = c.used_bytes()
    tid = c.client.create_copy_task("f", ["seg-c"]).task_id
    # Reserved: the object cannot be removed without force meanwhile.
    assert c.client.remove("f").status_code == STATUS["OBJECT_HAS_LEASE"]
    unfetched = c.a.mark_task_to_complete(tid)
    assert unfetched.status_code == STATUS["INVALID_PARAMS"]
    assert "not fetched" in unfetched.error_message
    c.a.fetch_tasks()
    wrong = c.b.mark_task_to_complete(tid)
    assert wrong.status_code == STATUS["ILLEGAL_CLIENT"]
    assert c.a.mark_task_to_complete(tid, success=False,
                                     message="checksum mismatch").status_code == 0
    q = c.status(tid)
    assert q.status == c.pb.FAILED and "checksum mismatch" in q.message
    assert c.used_bytes() == used
    assert c.segments_of("f") == ["seg-a"]
    assert c.client.remove("f").status_code == STATUS["OBJECT_HAS_LEASE"]  # the get's lease


def test_bad_requests_are_refused_with_reasons(cluster):
    c = cluster()
    c.put_on("k", "seg-a")
    start = c.a.put_start("open", SIZE)
    assert start.status_code == 0
    used = c.used_bytes()

    def refused(resp, status, words):
        assert resp.status_code == STATUS[status], resp
        assert words in resp.error_message, resp.error_message

    refused(c.client.create_copy_task("nope", ["seg-b"]), "OBJECT_NOT_FOUND", "no such key")
    refused(c.client.create_copy_task("open", ["seg-b"]), "OBJECT_NOT_READY", "not ended")
    refused(c.client.create_copy_task("k", ["seg-x"]), "SEGMENT_NOT_FOUND", "seg-x")
    refused(c.client.create_copy_task("k", ["seg-a"]), "INVALID_PARAMS", "is the source")
    refused(c.client.create_copy_task("k", ["seg-b", "seg-b"]), "INVALID_PARAMS", "same segment")
    refused(c.client.create_copy_task("k", []), "INVALID_PARAMS", "targets")
    refused(c.client.create_move_task("k", "seg-b", "seg-c"), "INVALID_PARAMS",
            "holds no complete replica")
    refused(c.client.create_move_task("k", "seg-a", "seg-a"), "INVALID_PARAMS",
            "equals the source")
    refused(c.client.create_move_task("k", "seg-x", "seg-c"), "SEGMENT_NOT_FOUND", "seg-x")
    tid = c.client.create_copy_task("k", ["seg-b"]).task_id
    refused(c.client.create_copy_task("k", ["seg-b"]), "INVALID_PARAMS", "already holds")
    refused(c.client.query_task(c.pb.UUID(first=1, second=2)), "OBJECT_NOT_FOUND", "no such task")
    assert c.used_bytes() == used + SIZE  # only the one accepted task reserved anything
    refused(c.a.fetch_tasks(max_tasks=0), "INVALID_PARAMS", "max_tasks")
    assert c.status(tid).status == c.pb.PENDING


def test_finished_tasks_kept_up_to_retention(cluster):
    c = cluster("--task-retention", "3")
    c.put_on("r", "seg-a")
    ids = []
    for _ in range(5):
        tid = c.client.create_copy_task("r", ["seg-c"]).task_id
        c.a.fetch_tasks()
        assert c.a.mark_task_to_complete(tid, success=False, message="test").status_code == 0
        ids.append(tid)
    for tid in ids[:2]:  # the oldest finished ones went first
        assert c.client.query_task(tid).status_code == STATUS["OBJECT_NOT_FOUND"]
    for tid in ids[2:]:
        assert c.status(tid).status == c.pb.FAILED
    status, body = http_get(c.daemon.port, "/api/v1/tasks")
    assert status == 200
    listing = json.loads(body)
    assert listing["finished_kept"] == 3 and listing["in_flight"] == 0
    assert [t["status"] for t in listing["tasks"]] == ["FAILED"] * 3
    text = str(uuid.UUID(int=(ids[-1].first << 64) | ids[-1].second))
    status, body = http_get(c.daemon.port, f"/api/v1/tasks/{text}")
    assert status == 200 and json.loads(body)["id"] == text
    assert http_get(c.daemon.port, "/api/v1/tasks/not-a-uuid")[0] == 400
    gone = str(uuid.UUID(int=(ids[0].first << 64) | ids[0].second))
    assert http_get(c.daemon.port, f"/api/v1/tasks/{gone}")[0] == 404


def test_crescentctl_copy_move_and_task_wait(cluster):
    c = cluster()
    c.put_on("ctl", "seg-a")
    ctl = [binary("crescentctl"), "--rpc", c.rpc, "--http", f"127.0.0.1:{c.daemon.port}"]
    out = subprocess.run(ctl + ["copy", "ctl", "seg-c"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    text = out.stdout.strip()
    tid = uuid.UUID(text)
    waiter = subprocess.Popen(ctl + ["task", text, "--wait"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        pb_id = c.pb.UUID(first=tid.int >> 64, second=tid.int & (2**64 - 1))
        assert [t.task_id for t in c.a.fetch_tasks().tasks] == [pb_id]
        assert c.a.mark_task_to_complete(pb_id).status_code == 0
        stdout, stderr = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, stderr
    assert "status    SUCCESS" in stdout
    assert "SUCCESS: Task completed successfully" in stderr
    doc = subprocess.run(ctl + ["task", text, "--json"], capture_output=True, text=True,
                         timeout=30)
    assert doc.returncode == 0, doc.stderr
    assert json.loads(doc.stdout)["status"] == "SUCCESS" and json.loads(doc.stdout)["id"] == text
    bad = subprocess.run(ctl + ["move", "ctl", "seg-a", "seg-a"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 1 and "equals the source" in bad.stderr
    assert subprocess.run(ctl + ["task", "xyz"], capture_output=True,
                          timeout=30).returncode == 2


def query_store(c, tokens):
    """crescentd's /query for `tokens`: what its own indexer says the store
    (instance `crescent-store`, docs/http-api.md) holds, per medium."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{c.daemon.port}/query", method="POST",
        data=json.dumps({"model": "m", "block_size": 4, "token_ids": tokens}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=WAIT_S) as r:
        return json.loads(r.read()).get("default", {}).get("crescent-store", {})


def test_indexer_follows_copies_and_moves(cluster):
    """crescentd's prefix indexer ingests the store's own events: an object
    copied and then moved stays matched under instance crescent-store, medium
    CPU (its replicas are memory), through each task's BlockUpdateEvent; the
    move's event lists the target alone; a removal drops it from /query."""
    c = cluster()
    sub = c.subscriber()
    c.ready(sub)
    tokens = [7, 8, 9, 10]
    block = {"model_name": "m", "block_size": 4, "block_hash": "h-task", "token_ids": tokens}
    start, end = c.a.put("blk", SIZE, preferred_segment="seg-a", block=block)
    assert start.status_code == 0 and end.status_code == 0
    wait_for(lambda: query_store(c, tokens).get("CPU") == 4, timeout=WAIT_S,
             what="the put indexed")
    tid = c.client.create_copy_task("blk", ["seg-c"]).task_id
    assert c.a.fetch_tasks().tasks[0].task_id == tid
    assert c.a.mark_task_to_complete(tid).status_code == 0
    copied = c.update_events(sub, "blk")[-1]
    assert sorted(loc for _, loc in copied[2]) == [EP["seg-a"], EP["seg-c"]]
    answer = query_store(c, tokens)
    assert answer["longest_matched"] == 4 and answer["CPU"] == 4 and answer.get("DISK", 0) == 0
    tid = c.client.create_move_task("blk", "seg-a", "seg-b").task_id
    assert c.a.fetch_tasks().tasks[0].task_id == tid
    assert c.a.mark_task_to_complete(tid).status_code == 0
    c.wait_status(tid, c.pb.SUCCESS)
    moved = c.update_events(sub, "blk")[-1]
    assert sorted(loc for _, loc in moved[2]) == [EP["seg-b"], EP["seg-c"]]
    answer = query_store(c, tokens)
    assert answer["longest_matched"] == 4 and answer["CPU"] == 4
    assert c.client.remove("blk").status_code == 0
    wait_for(lambda: query_store(c, tokens) == {}, timeout=WAIT_S, what="the removal indexed")


def test_in_flight_bound_is_a_flag(cluster):
    """--task-max-in-flight (here in gflags' spelling): one task more is
    refused naming the flag, counted in /metrics; the refused task's
    reservation is handed back (nothing stays used)."""
    c = cluster("--task_max_in_flight", "1")
    c.put_on("one", "seg-a")
    c.put_on("two", "seg-a")
    used = c.used_bytes()
    assert c.client.create_copy_task("one", ["seg-c"]).status_code == 0
    refused = c.client.create_copy_task("two", ["seg-c"])
    assert refused.status_code == STATUS["NOMEM"]
    assert "--task-max-in-flight" in refused.error_message
    wait_for(lambda: c.used_bytes() == used + SIZE, timeout=WAIT_S, what="two's reservation freed")
    text = http_get(c.daemon.port, "/metrics")[1].decode()
    assert "\ncrescent_tasks_refused_full_total 1\n" in text
    assert "\ncrescent_tasks_max_in_flight 1\n" in text
