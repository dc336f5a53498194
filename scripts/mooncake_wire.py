#!/usr/bin/env python3
"""Constants of Mooncake's master RPC (coro_rpc + struct_pack), computed the way
yalantinglibs computes them, for the table in src/mooncake/mc_calls.c.

  function id = MD5("mooncake::WrappedMasterService::" + name)[0:4], big-endian
                (coro_rpc's func_id: MD5Hash32Constexpr of get_func_name)
  type hash   = MD5(type literal)[0:4], big-endian, bit 0 cleared
                (struct_pack's get_types_code; bit 0 is then set on the wire
                because a metainfo byte follows)

The literals are built from struct_pack's type ids (type_id.hpp) and Mooncake's
types at the pinned commit (docs/mooncake.md).  `--check FRAMES.jsonl` compares
the ids and hashes with frames captured between Mooncake's client and
mooncake_master (tests/fixtures/mooncake/frames.jsonl).
Usage: scripts/mooncake_wire.py [--c] [--check FRAMES.jsonl]"""
import hashlib, json, sys

U64, I64, I32, U8, BOOL, STR, MONO = "04", "03", "01", "06", "0b", "800c", "fa"
UUID = "fd04048989ff"  # std::pair<u64,u64>: trivially copyable, alignment 8 twice
ERR = I32              # mooncake::ErrorCode : int32_t
def struct(*f): return "fd" + "".join(f) + "ff"
def vec(x): return "84" + x
def opt(x): return "85" + x
def exp(x): return "87" + x + ERR
def variant(*a): return "86" + "".join(a) + "ff"
def umap(k, v): return "82" + k + v

ALLOC = struct(U64, U64, STR, STR)                     # AllocatedBuffer::Descriptor
DESC = struct(U64, variant(struct(ALLOC), struct(ALLOC), struct(STR, U64),
                           struct(UUID, U64, STR), struct(STR, U64, U64, U64, I32)), I32)
GRLR = struct(vec(DESC), U64, opt(U64))                # GetReplicaListResponse
RCONF = struct(U64, U64, U64, U8, opt(U64), BOOL, vec(STR), STR, vec(STR), BOOL, U8, STR,
               opt(vec(STR)))                          # ReplicateConfig
SEGMENT = struct(UUID, STR, U64, U64, STR, STR, STR)
OMETA = struct(STR, opt(U64))                          # ObjectMeta
RTYPE = I32                                            # ReplicaType
def args(*a):  # one argument is serialized alone, several as a tuple
    return "" if not a else a[0] if len(a) == 1 else struct(*a)

# name: (request tuple literal, response literal)
CALLS = {
    "ServiceReady": (args(), exp(STR)),
    "GetStorageConfig": (args(), exp(struct(STR, BOOL, U64))),
    "GetFsdir": (args(), exp(STR)),
    "Ping": (args(UUID), exp(struct(I64, I32))),
    "FetchTasks": (args(UUID, U64), exp(vec(struct(UUID, I32, STR, I64, "02")))),
    "MountSegment": (args(SEGMENT, UUID), exp(MONO)),
    "ReMountSegment": (args(vec(SEGMENT), UUID), exp(MONO)),
    "UnmountSegment": (args(UUID, UUID), exp(MONO)),
    "PutStart": (args(UUID, STR, U64, RCONF, STR), exp(vec(DESC))),
    "PutEnd": (args(UUID, OMETA, RTYPE, STR), exp(MONO)),
    "PutRevoke": (args(UUID, STR, RTYPE, STR), exp(MONO)),
    "BatchPutStart": (args(UUID, vec(STR), vec(U64), RCONF, STR), vec(exp(vec(DESC)))),
    "BatchPutEnd": (args(UUID, vec(OMETA), RTYPE, STR), vec(exp(MONO))),
    "BatchPutRevoke": (args(UUID, vec(STR), RTYPE, STR), vec(exp(MONO))),
    "ExistKey": (args(STR, STR), exp(BOOL)),
    "BatchExistKey": (args(vec(STR), STR), vec(exp(BOOL))),
    "GetReplicaList": (args(STR, STR), exp(GRLR)),
    "BatchGetReplicaList": (args(vec(STR), STR), vec(exp(GRLR))),
    "GetReplicaListByRegex": (args(STR, STR), exp(umap(STR, vec(DESC)))),
    "Remove": (args(STR, BOOL, STR), exp(MONO)),
    "RemoveByRegex": (args(STR, BOOL, STR), exp(I64)),
    "RemoveAll": (args(BOOL, STR), I64),
    "BatchRemove": (args(vec(STR), BOOL, STR), vec(exp(MONO))),
}
# Calls crescent does not serve whose result is one tl::expected<T, ErrorCode>:
# answered UNAVAILABLE_IN_CURRENT_MODE in that type (only T's literal matters).
VOID = exp(MONO)
UNAVAILABLE = {
    "UpsertStart": exp(vec(DESC)), "UpsertEnd": VOID, "UpsertRevoke": VOID,
    "MountNoFSegment": VOID, "ReMountNoFSegment": VOID, "UnmountNoFSegment": VOID,
    "GracefulUnmountSegment": VOID, "MountLocalDiskSegment": VOID,
    "UnmountLocalDiskSegment": VOID, "ReportSsdCapacity": VOID, "NotifyOffloadSuccess": VOID,
    "NotifyPromotionSuccess": VOID, "NotifyPromotionFailure": VOID, "CopyEnd": VOID,
    "CopyRevoke": VOID, "DynamicReplicaCopyEnd": VOID, "DynamicReplicaCopyRevoke": VOID,
    "MoveEnd": VOID, "MoveRevoke": VOID, "EvictDiskReplica": VOID, "MarkTaskToComplete": VOID,
    "PollRemoveAll": exp(BOOL), "CreateCopyTask": exp(UUID), "CreateMoveTask": exp(UUID),
    "CopyStart": exp(struct(DESC, vec(DESC))), "DynamicReplicaCopyStart": exp(struct(DESC, vec(DESC))),
    "MoveStart": exp(struct(DESC, opt(DESC))), "PromotionAllocStart": exp(struct(DESC)),
    "BatchReplicaClear": exp(vec(STR)), "QuerySegmentStatusById": exp(I32),
    "GetAllNoFSegments": exp(vec(struct(UUID, STR, U64, U64, STR))),
    "BatchQueryIp": exp(umap(UUID, vec(STR))),
}
# The others (a vector of results, whose length the client takes from its
# request, or a type not modelled here) get coro_rpc's function_not_registered,
# which Mooncake's client turns into RPC_FAIL for every entry.
# Every WrappedMasterService call of master_client.cpp crescent does not serve:
OTHERS = ("CalcCacheStats BatchQueryIp BatchReplicaClear UpsertStart BatchUpsertStart UpsertEnd "
          "BatchUpsertEnd UpsertRevoke BatchUpsertRevoke MountNoFSegment ReMountNoFSegment "
          "GracefulUnmountSegment UnmountNoFSegment GetAllNoFSegments GetNoFSegmentsByName "
          "QuerySegmentStatusById MountLocalDiskSegment UnmountLocalDiskSegment "
          "OffloadObjectHeartbeat ReportSsdCapacity NotifyOffloadSuccess PromotionObjectHeartbeat "
          "PromotionAllocStart NotifyPromotionSuccess NotifyPromotionFailure CopyStart "
          "DynamicReplicaCopyStart CopyEnd DynamicReplicaCopyEnd CopyRevoke "
          "DynamicReplicaCopyRevoke MoveStart MoveEnd MoveRevoke CreateCopyTask CreateMoveTask "
          "QueryTask MarkTaskToComplete EvictDiskReplica BatchEvictDiskReplica "
          "PollRemoveAll").split()

def func_id(name):
    return int.from_bytes(hashlib.md5(("mooncake::WrappedMasterService::" + name).encode())
                          .digest()[:4], "big")

def type_hash(lit):
    return int.from_bytes(hashlib.md5(bytes.fromhex(lit)).digest()[:4], "big") & 0xFFFFFFFE

def c_bytes(lit):
    return ", ".join("0x" + lit[i:i + 2] for i in range(0, len(lit), 2))

def emit_c():
    for name, (req, resp) in CALLS.items():
        print(f"/* {name}: id 0x{func_id(name):08x} */")
        for what, lit in (("req", req), ("resp", resp)):
            if lit:
                print(f"static const uint8_t {name}_{what}[] = {{{c_bytes(lit)}}};"
                      f" /* hash 0x{type_hash(lit):08x} */")
    for name in OTHERS:
        lit = UNAVAILABLE.get(name)
        t = f"T(0x{type_hash(lit):08x}u, {c_bytes(lit)})" if lit else "NONE"
        print(f'    {{0x{func_id(name):08x}u, "{name}", {t}}},')

def check(path):
    frames = [json.loads(l) for l in open(path)]
    fid_of = {(f["c"], f["seq"]): f["fid"] for f in frames if f["dir"] == "req"}
    by_id = {f"{func_id(n):08x}": n for n in CALLS}
    bad = seen = 0
    for f in frames:
        fid = f["fid"] if f["dir"] == "req" else fid_of[(f["c"], f["seq"])]
        name = by_id.get(fid)
        body = bytes.fromhex(f["body"])
        if name is None:
            print("unknown function id", fid); bad += 1; continue
        lit = CALLS[name][0 if f["dir"] == "req" else 1]
        if not body:
            ok = lit == ""
        else:
            h = int.from_bytes(body[:4], "little")
            ok = (h & ~1) == type_hash(lit) and body[5:5 + len(lit) // 2] == bytes.fromhex(lit)
        seen += 1
        if not ok:
            bad += 1
            print("MISMATCH", name, f["dir"], body[:4].hex(), body[5:60].hex(), lit)
    print(f"{seen} frames checked, {bad} mismatches")
    return bad == 0

if __name__ == "__main__":
    if "--c" in sys.argv: emit_c()
    if "--check" in sys.argv:
        sys.exit(0 if check(sys.argv[sys.argv.index("--check") + 1]) else 1)
