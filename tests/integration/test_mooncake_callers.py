"""Engines' own Mooncake store code, run unmodified against crescent's
MooncakeDistributedStore (python/compat on PYTHONPATH), storing and loading
torch tensors between two processes that each host a segment (prefill
writes, decode reads), bytes compared.

Fixtures (tests/integration/callers/, each file byte for byte as published,
Apache-2.0 like its project):
- sglang_mooncake_store.py: SGLang's HiCache Mooncake backend,
  sgl-project/sglang python/sglang/srt/mem_cache/storage/mooncake_store/
  mooncake_store.py, an early version of HiCache's Mooncake backend (2025:
  MooncakeStore(HiCacheStorage) with zero-copy batch_set/batch_get, the
  MC_MS_FILTERS device auto-discovery; 12215 bytes).  The exact commit was not
  recorded: the text came from a public code index that gave none.  SGLang is
  Apache-2.0 (https://github.com/sgl-project/sglang/blob/main/LICENSE); the
  file itself carries no header.
- vllm_v0_mooncake_store.py: vLLM's v0 store, vllm-project/vllm
  vllm/distributed/kv_transfer/kv_lookup_buffer/mooncake_store.py at
  fb6c0501838195b3f6d715e5a1cf0be42546d27a (SPDX header in the file).
- standins/vllm/distributed/kv_transfer/kv_connector/v1/mooncake/
  mooncake_store_worker.py and mooncake_store_data.py: vLLM v1's
  MooncakeStoreConnector worker side (store worker, transfer threads) and its
  data classes, vllm-project/vllm at 0c7053c3abdfe3ed96306c4b24f9f17351f9ce34 and
  45f109584e64aded03ab8012f6e87cf9c2f4b1a2 (SPDX headers in the files); in
  vLLM's package path because of their relative imports.
- lmcache_mooncakestore_connector.py: LMCache's Mooncake connector,
  LMCache/LMCache lmcache/v1/storage_backend/connector/mooncakestore_connector.py
  at 01aed921caf3d2597bbf1b6570d61a7b1a70e3a9 (SPDX header in the file).

Stand-ins (tests/integration/callers/standins/, README.md there), replacing
only framework imports that cannot be installed here:
- sglang.srt.mem_cache.hicache_storage (HiCacheStorage, HiCacheStorageConfig)
- vllm.config (VllmConfig), vllm.logger (init_logger),
  vllm.distributed.kv_transfer.kv_lookup_buffer.base (KVStoreBufferBase)
- safetensors.torch (save, load: the safetensors format; no Debian package)
- vllm.distributed (parallel groups), vllm.distributed.kv_events,
  vllm.utils.network_utils, vllm.utils.math_utils, vllm.v1.core.kv_cache_utils,
  vllm.v1.serial_utils, vllm.distributed.kv_transfer.kv_connector.v1.base, and the
  connector's scheduler module (get_zmq_rpc_path_lookup only)
- lmcache.config, lmcache.logging, lmcache.utils, lmcache.v1.config,
  lmcache.v1.memory_management, lmcache.v1.protocol,
  lmcache.v1.storage_backend.local_cpu_backend,
  lmcache.v1.storage_backend.connector.base_connector
"""
import json
import os

import pytest

from conftest import free_port
from test_mooncake_store import COMPAT, HERE, PYTHON, Peer, segments

CALLERS = os.path.join(HERE, "callers")
STANDINS = os.path.join(CALLERS, "standins")
MiB = 1 << 20

pytest.importorskip("torch")


@pytest.fixture
def master(daemon):
    rpc_port = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc_port}", "--default-kv-lease-ttl", "500")
    d.rpc = f"127.0.0.1:{rpc_port}"
    return d


@pytest.fixture
def engines():
    started = []

    def start(env=None):
        p = Peer(pythonpath=f"{CALLERS}:{STANDINS}:{COMPAT}:{PYTHON}", env=env)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


SGLANG_ENGINE = """
import torch
from sglang.srt.mem_cache.hicache_storage import HiCacheStorageConfig
from sglang_mooncake_store import MooncakeStore
cfg = HiCacheStorageConfig(tp_rank=0, tp_size=1, is_mla_model=False, extra_config={{
    "master_server_address": "{rpc}", "local_hostname": "127.0.0.1",
    "metadata_server": "P2PHANDSHAKE", "global_segment_size": {size},
    "protocol": "tcp", "device_name": ""}})
backend = MooncakeStore(cfg)
# the host KV pool: 8 pages of K and V, 64 KiB each
pool = torch.zeros(16, 64 * 1024, dtype=torch.uint8)
backend.register_buffer(pool)
bufs["backend"], bufs["pool"] = backend, pool
result = 0
"""


def test_sglang_hicache_backend_prefill_to_decode(master, engines):
    prefill, decode = engines(), engines()
    for engine in (prefill, decode):
        assert engine.run(SGLANG_ENGINE.format(rpc=master.rpc, size=32 * MiB)) == 0
    assert len(segments(master)) == 2                       # each engine hosts its own
    keys = [f"page{i}_0_{kv}" for i in range(8) for kv in ("k", "v")]
    put = prefill.run(f"""
import hashlib
b, pool = bufs["backend"], bufs["pool"]
torch.manual_seed(11)
pool.copy_(torch.randint(0, 256, pool.shape, dtype=torch.uint8))
keys = {keys!r}
ptrs = [pool[i].data_ptr() for i in range(16)]
sizes = [pool[i].numel() for i in range(16)]
result = [b.batch_set(keys, target_locations=ptrs, target_sizes=sizes),
          b.batch_exists([f"page{{i}}" for i in range(8)]),
          b.set(keys[0], target_location=ptrs[0], target_sizes=sizes[0]),   # again: True
          hashlib.sha256(pool.numpy().tobytes()).hexdigest()]
""")
    assert put[:3] == [True, 8, True]
    got = decode.run(f"""
import hashlib
b, pool = bufs["backend"], bufs["pool"]
keys = {keys!r}
ptrs = [pool[i].data_ptr() for i in range(16)]
sizes = [pool[i].numel() for i in range(16)]
result = [b.batch_exists([f"page{{i}}" for i in range(8)] + ["page-missing"]),
          b.batch_get(keys, ptrs, sizes),
          hashlib.sha256(pool.numpy().tobytes()).hexdigest(),
          b.exists("nope_0_k"),
          b.get("nope_0_k", ptrs[0], sizes[0]),
          b.batch_get(keys[:2] + ["nope_0_k", "nope_0_v"], ptrs[:4], sizes[:4])]
""")
    assert got[0] == 8                                      # consecutive pages present
    assert got[1] == 8                                      # pages read (K and V each)
    assert got[2] == put[3]                                 # bytes identical
    assert got[3:] == [False, False, 1]


VLLM_V0_ENGINE = """
import torch
from vllm.config import VllmConfig
from vllm_v0_mooncake_store import MooncakeStore
kv = MooncakeStore(VllmConfig())
bufs["kv"] = kv
result = 0
"""


def test_vllm_v0_store_prefill_to_decode(master, engines, tmp_path):
    config = tmp_path / "mooncake.json"
    config.write_text(json.dumps({"local_hostname": "127.0.0.1",
                                  "metadata_server": "P2PHANDSHAKE",
                                  "global_segment_size": 32 * MiB,
                                  "local_buffer_size": 16 * MiB, "protocol": "tcp",
                                  "device_name": "", "master_server_address": master.rpc}))
    env = {"MOONCAKE_CONFIG_PATH": str(config)}
    prefill, decode = engines(env), engines(env)
    assert prefill.run(VLLM_V0_ENGINE) == 0 and decode.run(VLLM_V0_ENGINE) == 0
    assert len(segments(master)) == 2
    # decode polls for a key prefill has not stored yet: the reference's b"" -> None
    assert decode.run("result = bufs['kv'].get('req1-layer0') is None") is True
    sent = prefill.run("""
import hashlib
torch.manual_seed(3)
t = torch.randn(2, 16, 8, 128, dtype=torch.float16)
bufs["kv"].put("req1-layer0", t)
result = [list(t.shape), hashlib.sha256(t.numpy().tobytes()).hexdigest()]
""")
    got = decode.run("""
import hashlib
t = bufs["kv"].get("req1-layer0")
result = [list(t.shape), str(t.dtype), hashlib.sha256(t.numpy().tobytes()).hexdigest()]
""")
    assert got == [sent[0], "torch.float16", sent[1]]
    # a duplicate put (the same request again) keeps the first value, no error
    assert prefill.run("bufs['kv'].put('req1-layer0', torch.zeros(3)); result = 0") == 0
    assert decode.run("result = list(bufs['kv'].get('req1-layer0').shape)") == sent[0]


LMCACHE_ENGINE = """
import asyncio, torch
from lmcache.config import LMCacheEngineMetadata
from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend
from lmcache_mooncakestore_connector import MooncakestoreConnector
loop = asyncio.new_event_loop()
conn = MooncakestoreConnector("", 0, "", loop, LocalCPUBackend(),
                              LMCacheEngineConfig(save_chunk_meta={meta}, extra_config={{
                                  "local_hostname": "127.0.0.1",
                                  "metadata_server": "P2PHANDSHAKE",
                                  "global_segment_size": {size}, "local_buffer_size": 0,
                                  "protocol": "tcp", "device_name": "",
                                  "master_server_address": "{rpc}",
                                  "transfer_timeout": 30}}))
conn.init_chunk_meta(LMCacheEngineConfig(save_chunk_meta={meta}), LMCacheEngineMetadata())
key = lambda h: CacheEngineKey("vllm", "m", 1, 0, h)
bufs["conn"], bufs["loop"], bufs["key"] = conn, loop, key
result = conn.registered_buffer_ptr is not None
"""


@pytest.mark.parametrize("save_chunk_meta", [True, False],
                         ids=["put_parts+batch_get_buffer", "put_from+batch_get_into"])
def test_lmcache_connector_prefill_to_decode(master, engines, save_chunk_meta):
    prefill, decode = engines(), engines()
    for engine in (prefill, decode):
        assert engine.run(LMCACHE_ENGINE.format(meta=save_chunk_meta, size=32 * MiB,
                                                rpc=master.rpc)) is True
    assert len(segments(master)) == 2
    sent = prefill.run("""
import hashlib
from lmcache.v1.memory_management import MemoryObj
torch.manual_seed(5)
hashes = []
for h in ("c0", "c1"):
    t = torch.randn(2, 16, 64).to(torch.float16)
    bufs["loop"].run_until_complete(bufs["conn"].put(bufs["key"](h), MemoryObj(t, 1)))
    hashes.append(hashlib.sha256(t.numpy().tobytes()).hexdigest())
result = hashes
""")
    got = decode.run("""
import hashlib
c, k = bufs["conn"], bufs["key"]
objs = bufs["loop"].run_until_complete(c.batched_get([k("c0"), k("missing"), k("c1")]))
result = [None if o is None else [list(o.tensor.shape), str(o.tensor.dtype),
          hashlib.sha256(o.tensor.numpy().tobytes()).hexdigest()] for o in objs]
result += [c.exists_sync(k("c0")), c.exists_sync(k("missing"))]
bufs["loop"].run_until_complete(c.close())
""")
    assert got[0] == [[2, 16, 64], "torch.float16", sent[0]]
    assert got[1] is None                                   # a missing chunk: None
    assert got[2] == [[2, 16, 64], "torch.float16", sent[1]]
    assert got[3:] == [1, 0]


VLLM_V1_ENGINE = """
import threading, torch
from types import SimpleNamespace as NS
from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_store_worker import (
    KVCacheStoreRecvingThread, KVCacheStoreSendingThread, MooncakeStoreWorker)
from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_store_data import (
    LoadSpec, ReqMeta)
model = NS(model="org/llama-test", use_mla=False, get_num_layers=lambda p: 2,
           get_total_num_kv_heads=lambda: 8)
cfg = NS(model_config=model,
         parallel_config=NS(data_parallel_rank=0, pipeline_parallel_size=1, rank=0),
         kv_transfer_config=NS(kv_role="kv_both"),
         cache_config=NS(block_size=16, num_gpu_blocks=8), kv_events_config=None)
w = MooncakeStoreWorker(cfg)
# the KV caches of 2 layers, K/V outermost (FlashAttention's layout), and the
# addresses register_kv_caches computes (it needs torch>=2's untyped_storage;
# Debian's torch is 1.13): per layer a K and a V segment, block_len bytes a block
caches = [torch.zeros(2, 8, 16, 64, dtype=torch.float16) for _ in range(2)]
bases, lens = [], []
for c in caches:
    assert w.store.register_buffer(c.data_ptr(), c.numel() * c.element_size()) == 0
    seg = c.stride(0) * c.element_size()
    bases += [c.data_ptr(), c.data_ptr() + seg]
    lens += [seg // 8, seg // 8]
w.token_database.set_kv_caches_base_addr(bases)
w.token_database.set_block_len(lens)
bufs.update(w=w, caches=caches, LoadSpec=LoadSpec, ReqMeta=ReqMeta,
            Send=KVCacheStoreSendingThread, Recv=KVCacheStoreRecvingThread,
            threading=threading, torch=torch)
result = w.store.get_hostname()
"""


def test_vllm_v1_store_worker_prefill_to_decode(master, engines, tmp_path):
    config = tmp_path / "mooncake.json"
    config.write_text(json.dumps({"metadata_server": "P2PHANDSHAKE",
                                  "global_segment_size": "32MB", "local_buffer_size": "1MB",
                                  "protocol": "tcp", "device_name": "",
                                  "master_server_address": master.rpc}))
    env = {"MOONCAKE_CONFIG_PATH": str(config)}
    prefill, decode = engines(env), engines(env)
    names = {prefill.run(VLLM_V1_ENGINE), decode.run(VLLM_V1_ENGINE)}
    assert set(segments(master)) == names                  # setup(config_dict) hosted each
    hashes = "[b'h0', b'h1', b'h2']"
    sent = prefill.run(f"""
import hashlib
w, caches = bufs["w"], bufs["caches"]
torch.manual_seed(9)
for c in caches:
    c.copy_(torch.randn(c.shape).to(torch.float16))
ready = threading.Event()
send = bufs["Send"](w.store, w.token_database, 16, 0, w.put_step, "kv_both", ready)
send.start(); ready.wait()
send.add_stored_request("req1")
send.add_request(bufs["ReqMeta"](req_id="req1", token_len_chunk=48, block_ids=[1, 3, 5],
                                 block_hashes={hashes}, can_save=True))
send.request_queue.join()
result = [send.stored_requests["req1"], w.lookup(48, {hashes}),
          [hashlib.sha256(c[:, [1, 3, 5]].numpy().tobytes()).hexdigest() for c in caches]]
""")
    assert sent[:2] == [0, 48]                               # stored; all 3 blocks found
    got = decode.run(f"""
import hashlib, time
w, caches = bufs["w"], bufs["caches"]
ready = threading.Event()
recv = bufs["Recv"](w.store, w.token_database, 16, 0, ready)
recv.start(); ready.wait()
spec = bufs["LoadSpec"](vllm_cached_tokens=0, kvpool_cached_tokens=48, can_load=True,
                        token_len=48)
recv.add_request(bufs["ReqMeta"](req_id="req1", token_len_chunk=48, block_ids=[0, 2, 4],
                                 block_hashes={hashes}, load_spec=spec))
recv.request_queue.join()
result = [sorted(recv.get_and_clear_finished_requests()),
          [hashlib.sha256(c[:, [0, 2, 4]].numpy().tobytes()).hexdigest() for c in caches],
          w.lookup(48, {hashes}), w.lookup(48, [b'x0', b'h1', b'h2']),
          w.lookup(48, [b'h0', b'h1', b'nope'])]
""")
    assert got[0] == ["req1"]
    assert got[1] == sent[2]                                 # K and V of 3 blocks, 2 layers
    assert got[2:] == [48, 0, 32]                            # prefix lookups
