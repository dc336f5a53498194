"""A steady put load into a full segment: each PutStart that finds no room
evicts for itself (the oldest of a sample), so no put is refused
NO_AVAILABLE_HANDLE between two eviction passes (docs/architecture.md)."""
from conftest import free_port
from test_bench import bench, check_document


def test_a_pipelined_put_load_into_a_full_fake_segment_sees_no_errors(daemon, tmp_path):
    """crescent-bench's puts, 8 in flight on 2 connections, into a 64 KiB
    segment that holds 16 of them: before PutStart evicted for itself, most
    were refused NO_AVAILABLE_HANDLE until the next pass."""
    rpc = f"tcp://127.0.0.1:{free_port()}"
    d = daemon("--rpc-address", rpc, "--client-ttl", "3600")
    rc, doc, text = bench((d, rpc), tmp_path, "--mount-fake", "--fake-segment-bytes", "65536",
                          "--workload", "put", "--object-bytes", "4096", "--count", "400",
                          "--connections", "2", "--depth", "4", "--warmup", "0")
    assert rc == 0, text
    check_document(doc)
    assert doc["operations"] == 400 and doc["errors"] == 0, doc["errors_by_status"]
