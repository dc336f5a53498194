/* Mooncake's master calls ⇄ crescent's store-master calls: see mc_calls.h.
 *
 * The table's literals and ids come from scripts/mooncake_wire.py (built
 * from yalantinglibs' rules and Mooncake's types, and checked against
 * frames captured between Mooncake's client and mooncake_master,
 * tests/fixtures/mooncake/frames.jsonl); docs/mooncake.md explains each. */
#include "mooncake/mc_calls.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crescent/error.h"
#include "master.pb-c.h"

/* ------------------------------------------------------------------------ */
/* Type literals (scripts/mooncake_wire.py --c) */

#define L(...) (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})
#define T(h, ...) {h, L(__VA_ARGS__)}
#define NONE {0, NULL, 0}
/* Pieces, for reading the rows below: UUID fd 04 04 89 89 ff; string 80 0c;
 * Replica::Descriptor DESC; GetReplicaListResponse fd 84 DESC 04 85 04 ff. */
#define DESC 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, \
    0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, \
    0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, \
    0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff
#define RCONF 0xfd, 0x04, 0x04, 0x04, 0x06, 0x85, 0x04, 0x0b, 0x84, 0x80, 0x0c, 0x80, 0x0c, \
    0x84, 0x80, 0x0c, 0x0b, 0x06, 0x80, 0x0c, 0x85, 0x84, 0x80, 0x0c, 0xff
#define SEGMENT 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x80, 0x0c, 0x04, 0x04, 0x80, 0x0c, \
    0x80, 0x0c, 0x80, 0x0c, 0xff
#define UUID_L 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff

enum shape {
    R_STRING,       /* expected<string> */
    R_STORAGE,      /* expected<GetStorageConfigResponse> */
    R_PING,         /* expected<PingResponse> */
    R_TASKS,        /* expected<vector<TaskAssignment>> */
    R_VOID,         /* expected<void> */
    R_DESCS,        /* expected<vector<Descriptor>> */
    R_VEC_DESCS,    /* vector<expected<vector<Descriptor>>> */
    R_VEC_VOID,     /* vector<expected<void>> */
    R_BOOL,         /* expected<bool> */
    R_VEC_BOOL,     /* vector<expected<bool>> */
    R_GRLR,         /* expected<GetReplicaListResponse> */
    R_VEC_GRLR,     /* vector<expected<GetReplicaListResponse>> */
    R_MAP,          /* expected<unordered_map<string, vector<Descriptor>>> */
    R_LONG,         /* expected<long> */
    R_PLAIN_LONG,   /* long */
};

enum fn_id {
    FN_SERVICE_READY, FN_GET_STORAGE_CONFIG, FN_GET_FSDIR, FN_PING, FN_FETCH_TASKS,
    FN_MOUNT, FN_REMOUNT, FN_UNMOUNT, FN_PUT_START, FN_PUT_END, FN_PUT_REVOKE,
    FN_BATCH_PUT_START, FN_BATCH_PUT_END, FN_BATCH_PUT_REVOKE, FN_EXIST, FN_BATCH_EXIST,
    FN_GET, FN_BATCH_GET, FN_GET_REGEX, FN_REMOVE, FN_REMOVE_REGEX, FN_REMOVE_ALL,
    FN_BATCH_REMOVE, FN_COUNT
};

struct cr_mc_fn {
    uint32_t id; /* MD5("mooncake::WrappedMasterService::" + name)[0..4] BE */
    const char *name;
    struct cr_sp_type req, resp;
    enum shape shape;
    uint16_t method; /* crescent's; 0: answered here */
    const ProtobufCMessageDescriptor *reply_desc;
};

#define M(x) CRESCENT__MASTER__METHOD__##x
#define D(x) &crescent__master__##x##_response__descriptor

static const struct cr_mc_fn fns[FN_COUNT] = {
    [FN_SERVICE_READY] = {0x7b81bb56u, "ServiceReady", NONE,
                          T(0x1cb3cc34u, 0x87, 0x80, 0x0c, 0x01), R_STRING, 0, NULL},
    [FN_GET_STORAGE_CONFIG] = {0x8da9b0a6u, "GetStorageConfig", NONE,
                               T(0x9cb568eau, 0x87, 0xfd, 0x80, 0x0c, 0x0b, 0x04, 0xff, 0x01),
                               R_STORAGE, 0, NULL},
    [FN_GET_FSDIR] = {0x3e585123u, "GetFsdir", NONE, T(0x1cb3cc34u, 0x87, 0x80, 0x0c, 0x01),
                      R_STRING, 0, NULL},
    [FN_PING] = {0xd6c2dae5u, "Ping", T(0x3c6d83e0u, UUID_L),
                 T(0x742a8f52u, 0x87, 0xfd, 0x03, 0x01, 0xff, 0x01), R_PING, M(PING), D(ping)},
    [FN_FETCH_TASKS] = {0xdf141844u, "FetchTasks",
                        T(0x759a9b84u, 0xfd, UUID_L, 0x04, 0xff),
                        T(0x59e14526u, 0x87, 0x84, 0xfd, UUID_L, 0x01, 0x80, 0x0c, 0x03, 0x02,
                          0xff, 0x01),
                        R_TASKS, 0, NULL},
    [FN_MOUNT] = {0x3e7ec4bbu, "MountSegment", T(0x9ef70daeu, 0xfd, SEGMENT, UUID_L, 0xff),
                  T(0xaf2868ccu, 0x87, 0xfa, 0x01), R_VOID, M(MOUNT_SEGMENT), D(mount_segment)},
    [FN_REMOUNT] = {0x0b053b72u, "ReMountSegment",
                    T(0xc6c66b88u, 0xfd, 0x84, SEGMENT, UUID_L, 0xff),
                    T(0xaf2868ccu, 0x87, 0xfa, 0x01), R_VOID, M(REMOUNT_SEGMENT),
                    D(mount_segment)},
    [FN_UNMOUNT] = {0x6f10b465u, "UnmountSegment", T(0xd4c512e0u, 0xfd, UUID_L, UUID_L, 0xff),
                    T(0xaf2868ccu, 0x87, 0xfa, 0x01), R_VOID, M(UNMOUNT_SEGMENT),
                    D(unmount_segment)},
    [FN_PUT_START] = {0x65ea9ac1u, "PutStart",
                      T(0xe385bd0eu, 0xfd, UUID_L, 0x80, 0x0c, 0x04, RCONF, 0x80, 0x0c, 0xff),
                      T(0xc43927a6u, 0x87, 0x84, DESC, 0x01), R_DESCS, M(PUT_START),
                      D(put_start)},
    [FN_PUT_END] = {0x8e8b2099u, "PutEnd",
                    T(0xd1819222u, 0xfd, UUID_L, 0xfd, 0x80, 0x0c, 0x85, 0x04, 0xff, 0x01, 0x80,
                      0x0c, 0xff),
                    T(0xaf2868ccu, 0x87, 0xfa, 0x01), R_VOID, M(PUT_END), D(put_end)},
    [FN_PUT_REVOKE] = {0xa0767c44u, "PutRevoke",
                       T(0x1b7a228au, 0xfd, UUID_L, 0x80, 0x0c, 0x01, 0x80, 0x0c, 0xff),
                       T(0xaf2868ccu, 0x87, 0xfa, 0x01), R_VOID, M(PUT_REVOKE), D(put_revoke)},
    [FN_BATCH_PUT_START] = {0x56be1822u, "BatchPutStart",
                            T(0x5870c0a4u, 0xfd, UUID_L, 0x84, 0x80, 0x0c, 0x84, 0x04, RCONF,
                              0x80, 0x0c, 0xff),
                            T(0xad006d02u, 0x84, 0x87, 0x84, DESC, 0x01), R_VEC_DESCS,
                            M(BATCH_PUT_START), D(batch_put_start)},
    [FN_BATCH_PUT_END] = {0x80e020abu, "BatchPutEnd",
                          T(0xf57ea7c8u, 0xfd, UUID_L, 0x84, 0xfd, 0x80, 0x0c, 0x85, 0x04, 0xff,
                            0x01, 0x80, 0x0c, 0xff),
                          T(0x39fc52ceu, 0x84, 0x87, 0xfa, 0x01), R_VEC_VOID, M(BATCH_PUT_END),
                          D(batch_put_end)},
    [FN_BATCH_PUT_REVOKE] = {0xb82567aau, "BatchPutRevoke",
                             T(0x94ee5d44u, 0xfd, UUID_L, 0x84, 0x80, 0x0c, 0x01, 0x80, 0x0c,
                               0xff),
                             T(0x39fc52ceu, 0x84, 0x87, 0xfa, 0x01), R_VEC_VOID,
                             M(BATCH_PUT_REVOKE), D(batch_put_revoke)},
    [FN_EXIST] = {0x89385f09u, "ExistKey", T(0x7cf91ed8u, 0xfd, 0x80, 0x0c, 0x80, 0x0c, 0xff),
                  T(0x90e800d2u, 0x87, 0x0b, 0x01), R_BOOL, M(EXIST_KEY), D(exist_key)},
    [FN_BATCH_EXIST] = {0xb89fa6b0u, "BatchExistKey",
                        T(0x00f78d62u, 0xfd, 0x84, 0x80, 0x0c, 0x80, 0x0c, 0xff),
                        T(0x2a5f8c5cu, 0x84, 0x87, 0x0b, 0x01), R_VEC_BOOL, M(BATCH_EXIST_KEY),
                        D(batch_exist_key)},
    [FN_GET] = {0x1f7ef174u, "GetReplicaList", T(0x7cf91ed8u, 0xfd, 0x80, 0x0c, 0x80, 0x0c, 0xff),
                T(0x88c6276cu, 0x87, 0xfd, 0x84, DESC, 0x04, 0x85, 0x04, 0xff, 0x01), R_GRLR,
                M(GET_REPLICA_LIST), D(get_replica_list)},
    [FN_BATCH_GET] = {0x1b0d20ffu, "BatchGetReplicaList",
                      T(0x00f78d62u, 0xfd, 0x84, 0x80, 0x0c, 0x80, 0x0c, 0xff),
                      T(0x20c5453au, 0x84, 0x87, 0xfd, 0x84, DESC, 0x04, 0x85, 0x04, 0xff, 0x01),
                      R_VEC_GRLR, M(BATCH_GET_REPLICA_LIST), D(batch_get_replica_list)},
    [FN_GET_REGEX] = {0xfe6af93cu, "GetReplicaListByRegex",
                      T(0x7cf91ed8u, 0xfd, 0x80, 0x0c, 0x80, 0x0c, 0xff),
                      T(0x7343c040u, 0x87, 0x82, 0x80, 0x0c, 0x84, DESC, 0x01), R_MAP,
                      M(GET_REPLICA_LIST_BY_REGEX), D(get_replica_list_by_regex)},
    [FN_REMOVE] = {0xf1b09774u, "Remove", T(0x18e89feeu, 0xfd, 0x80, 0x0c, 0x0b, 0x80, 0x0c, 0xff),
                   T(0xaf2868ccu, 0x87, 0xfa, 0x01), R_VOID, M(REMOVE), D(remove)},
    [FN_REMOVE_REGEX] = {0xfccc1fd3u, "RemoveByRegex",
                         T(0x18e89feeu, 0xfd, 0x80, 0x0c, 0x0b, 0x80, 0x0c, 0xff),
                         T(0xb83381feu, 0x87, 0x03, 0x01), R_LONG, M(REMOVE_BY_REGEX),
                         D(remove_by_regex)},
    [FN_REMOVE_ALL] = {0xd978ceb0u, "RemoveAll", T(0x48a6c274u, 0xfd, 0x0b, 0x80, 0x0c, 0xff),
                       T(0x86666834u, 0x03), R_PLAIN_LONG, M(REMOVE_ALL), D(remove_all)},
    [FN_BATCH_REMOVE] = {0x5902407du, "BatchRemove",
                         T(0x197a9ca0u, 0xfd, 0x84, 0x80, 0x0c, 0x0b, 0x80, 0x0c, 0xff),
                         T(0x39fc52ceu, 0x84, 0x87, 0xfa, 0x01), R_VEC_VOID, M(BATCH_REMOVE),
                         D(batch_remove)},
};

/* Calls of WrappedMasterService crescent does not serve, by id: named in the
 * log, and answered UNAVAILABLE_IN_CURRENT_MODE in their result type when it
 * is one tl::expected (the literal; NONE: coro_rpc's function_not_registered,
 * see docs/mooncake.md).  Generated: scripts/mooncake_wire.py --c. */
static const struct {
    uint32_t id;
    const char *name;
    struct cr_sp_type resp;
} others[] = {
    {0x8ecf1981u, "CalcCacheStats", NONE},
    {0x7ce454a9u, "BatchQueryIp", T(0xf594fb3cu, 0x87, 0x82, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x84, 0x80, 0x0c, 0x01)},
    {0x137b01fcu, "BatchReplicaClear", T(0xe108bdeau, 0x87, 0x84, 0x80, 0x0c, 0x01)},
    {0xa1335e41u, "UpsertStart", T(0xc43927a6u, 0x87, 0x84, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0x01)},
    {0xd564b423u, "BatchUpsertStart", NONE},
    {0x2e20e258u, "UpsertEnd", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0xb1bcd72fu, "BatchUpsertEnd", NONE},
    {0x610b042eu, "UpsertRevoke", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x9093ae79u, "BatchUpsertRevoke", NONE},
    {0x14d3f74cu, "MountNoFSegment", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0xc15a1a37u, "ReMountNoFSegment", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0xa4ec3175u, "GracefulUnmountSegment", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0xbb263e21u, "UnmountNoFSegment", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x04eb3c85u, "GetAllNoFSegments", T(0x8c274b46u, 0x87, 0x84, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x80, 0x0c, 0x04, 0x04, 0x80, 0x0c, 0xff, 0x01)},
    {0x6b194364u, "GetNoFSegmentsByName", NONE},
    {0x573fd453u, "QuerySegmentStatusById", T(0x9851e9a8u, 0x87, 0x01, 0x01)},
    {0x281fc089u, "MountLocalDiskSegment", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x59fe76e4u, "UnmountLocalDiskSegment", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x2a9b08f8u, "OffloadObjectHeartbeat", NONE},
    {0x7e109a9cu, "ReportSsdCapacity", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x2df85842u, "NotifyOffloadSuccess", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x0a19072au, "PromotionObjectHeartbeat", NONE},
    {0x36430f70u, "PromotionAllocStart", T(0x5c032896u, 0x87, 0xfd, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0xff, 0x01)},
    {0xfe6e3d25u, "NotifyPromotionSuccess", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0xcbecf2b4u, "NotifyPromotionFailure", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x29836d38u, "CopyStart", T(0x7c1668ccu, 0x87, 0xfd, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0x84, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0xff, 0x01)},
    {0x21118d62u, "DynamicReplicaCopyStart", T(0x7c1668ccu, 0x87, 0xfd, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0x84, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0xff, 0x01)},
    {0xf696f1d9u, "CopyEnd", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x4f22bba4u, "DynamicReplicaCopyEnd", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x1f558b5cu, "CopyRevoke", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x99768752u, "DynamicReplicaCopyRevoke", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x458e4ce0u, "MoveStart", T(0x3e9ed4b8u, 0x87, 0xfd, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0x85, 0xfd, 0x04, 0x86, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x80, 0x0c, 0x80, 0x0c, 0xff, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0xff, 0xfd, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x04, 0x80, 0x0c, 0xff, 0xfd, 0x80, 0x0c, 0x04, 0x04, 0x04, 0x01, 0xff, 0xff, 0x01, 0xff, 0xff, 0x01)},
    {0x636a8b47u, "MoveEnd", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x919b315fu, "MoveRevoke", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x7801dba0u, "CreateCopyTask", T(0x8f9bae8au, 0x87, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x01)},
    {0x97200d2cu, "CreateMoveTask", T(0x8f9bae8au, 0x87, 0xfd, 0x04, 0x04, 0x89, 0x89, 0xff, 0x01)},
    {0x07816a74u, "QueryTask", NONE},
    {0xa7060015u, "MarkTaskToComplete", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0xd00ac42bu, "EvictDiskReplica", T(0xaf2868ccu, 0x87, 0xfa, 0x01)},
    {0x74d1e980u, "BatchEvictDiskReplica", NONE},
    {0x05b21025u, "PollRemoveAll", T(0x90e800d2u, 0x87, 0x0b, 0x01)},
};

/* A tl::expected<T, ErrorCode> holding the error *ctx. */
static void fill_code(struct cr_sp_writer *w, const void *ctx) {
    cr_sp_put_u8(w, 0);
    cr_sp_put_u32(w, (uint32_t)*(const int32_t *)ctx);
}

const struct cr_mc_fn *cr_mc_fn_find(uint32_t id, const char **name) {
    assert(name != NULL);
    *name = NULL;
    for (size_t i = 0; i < FN_COUNT; i++)
        if (fns[i].id == id) return &fns[i];
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        if (others[i].id == id) *name = others[i].name;
    return NULL;
}

bool cr_mc_unavailable(uint32_t id, struct cr_sp_writer *w) {
    assert(w != NULL);
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        if (others[i].id != id) continue;
        if (others[i].resp.literal == NULL) return false;
        int32_t code = CR_MC_UNAVAILABLE_IN_CURRENT_MODE;
        return cr_sp_write_value(w, &others[i].resp, fill_code, &code);
    }
    return false;
}

const char *cr_mc_fn_name(const struct cr_mc_fn *fn) { return fn->name; }
uint16_t cr_mc_fn_method(const struct cr_mc_fn *fn) { return fn->method; }
uint16_t cr_mc_fn_index(const struct cr_mc_fn *fn) { return (uint16_t)(fn - fns); }
const struct cr_mc_fn *cr_mc_fn_at(uint16_t index) {
    return index < FN_COUNT ? &fns[index] : NULL;
}

/* ------------------------------------------------------------------------ */
/* State: segments and secrets */

static bool uuid_eq(const struct cr_mc_uuid *a, const struct cr_mc_uuid *b) {
    return a->first == b->first && a->second == b->second;
}

void cr_mc_state_free(struct cr_mc_state *st) {
    free(st->segments);
    free(st->secrets);
    *st = (struct cr_mc_state){0};
}

static bool grow(void **items, size_t *cap, size_t count, size_t size) {
    if (count < *cap) return true;
    size_t ncap = *cap < 8 ? 8 : *cap * 2;
    void *n = realloc(*items, ncap * size);
    if (n == NULL) return false;
    *items = n;
    *cap = ncap;
    return true;
}

static struct cr_mc_segment *segment_by_id(struct cr_mc_state *st, const struct cr_mc_uuid *id) {
    for (size_t i = 0; i < st->segment_count; i++)
        if (uuid_eq(&st->segments[i].id, id)) return &st->segments[i];
    return NULL;
}

static const char *protocol_of(const struct cr_mc_state *st, const char *name) {
    for (size_t i = 0; i < st->segment_count; i++)
        if (strcmp(st->segments[i].name, name) == 0) return st->segments[i].protocol;
    return "tcp"; /* mounted by a crescent client: crescent's transfer layer is tcp */
}

/* Remembers a segment a mount names (replacing the entry of the same id). */
static bool segment_note(struct cr_mc_state *st, const struct cr_mc_segment *seg) {
    struct cr_mc_segment *old = segment_by_id(st, &seg->id);
    if (old != NULL) {
        *old = *seg;
        return true;
    }
    if (!grow((void **)&st->segments, &st->segment_cap, st->segment_count, sizeof(*seg)))
        return false;
    st->segments[st->segment_count++] = *seg;
    return true;
}

static const struct cr_mc_secret *secret_of(const struct cr_mc_state *st,
                                            const struct cr_mc_uuid *client) {
    for (size_t i = 0; i < st->secret_count; i++)
        if (uuid_eq(&st->secrets[i].client, client)) return &st->secrets[i];
    return NULL;
}

static void secret_note(struct cr_mc_state *st, const struct cr_mc_uuid *client,
                        const ProtobufCBinaryData *secret) {
    if (secret->len == 0 || secret->len > CR_MC_SECRET_MAX) return;
    struct cr_mc_secret *s = (struct cr_mc_secret *)secret_of(st, client);
    if (s == NULL) {
        if (!grow((void **)&st->secrets, &st->secret_cap, st->secret_count, sizeof(*s))) return;
        s = &st->secrets[st->secret_count++];
    }
    s->client = *client;
    s->len = (uint8_t)secret->len;
    memcpy(s->bytes, secret->data, secret->len);
}

/* ------------------------------------------------------------------------ */
/* Requests */

/* The reader and a scratch area for the NUL-terminated copies protobuf-c
 * wants: a string's copy takes its length plus one, so twice the body plus
 * a little always suffices. */
struct dec {
    struct cr_sp_reader r;
    char *scratch;
    size_t used, cap;
    struct cr_mc_state *st;
    struct cr_mc_request *req;
};

static char *str(struct dec *d, size_t max) {
    size_t n;
    const uint8_t *p = cr_sp_str(&d->r, max, &n);
    if (d->r.bad || d->cap - d->used < n + 1) {
        d->r.bad = true;
        return (char *)"";
    }
    char *s = d->scratch + d->used;
    memcpy(s, p, n);
    s[n] = '\0';
    if (memchr(s, '\0', n) != NULL) d->r.bad = true; /* protobuf strings end at NUL */
    d->used += n + 1;
    return s;
}

static struct cr_mc_uuid uuid(struct dec *d) {
    struct cr_mc_uuid u = {0, 0};
    const uint8_t *p = cr_sp_raw(&d->r, 16);
    if (p == NULL) return u;
    for (int i = 7; i >= 0; i--) u.first = u.first << 8 | p[i];
    for (int i = 15; i >= 8; i--) u.second = u.second << 8 | p[i];
    return u;
}

/* Packs `msg` into req->body (or a `more` slot). */
static int pack(const ProtobufCMessage *msg, uint8_t **out, size_t *out_len) {
    size_t n = protobuf_c_message_get_packed_size(msg);
    *out = malloc(n > 0 ? n : 1);
    if (*out == NULL) return CR_ERR_NOMEM;
    *out_len = protobuf_c_message_pack(msg, *out);
    return CR_OK;
}

static Crescent__Master__UUID *pb_uuid(Crescent__Master__UUID *slot, const struct cr_mc_uuid *u) {
    crescent__master__uuid__init(slot);
    slot->first = u->first;
    slot->second = u->second;
    return slot;
}

/* The secret crescent issued to the call's client, if any. */
static void attach_secret(const struct dec *d, protobuf_c_boolean *has, ProtobufCBinaryData *out) {
    const struct cr_mc_secret *s = secret_of(d->st, &d->req->client);
    if (s == NULL) return;
    *has = 1;
    out->len = s->len;
    out->data = (uint8_t *)s->bytes;
}

static void set_client(struct dec *d, struct cr_mc_uuid u) {
    d->req->client = u;
    d->req->has_client = true;
}

/* ReplicateConfig: only what crescent's config holds is kept (docs). */
struct rconf {
    uint64_t replica_num;
    bool soft_pin;
    char *preferred;
};

static void read_rconf(struct dec *d, struct rconf *c) {
    c->replica_num = cr_sp_u64(&d->r);
    (void)cr_sp_u64(&d->r); /* nof_replica_num */
    (void)cr_sp_u64(&d->r); /* dfs_replica_num */
    c->soft_pin = cr_sp_u8(&d->r) == 1; /* SoftPinAction::ENABLE */
    if (cr_sp_bool(&d->r)) (void)cr_sp_u64(&d->r); /* soft_pin_ttl_ms */
    (void)cr_sp_bool(&d->r);                       /* with_hard_pin */
    c->preferred = (char *)"";
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1);
    for (size_t i = 0; i < n; i++) {
        char *s = str(d, CR_MC_NAME_MAX);
        if (i == 0) c->preferred = s;
    }
    char *single = str(d, CR_MC_NAME_MAX); /* deprecated preferred_segment */
    if (c->preferred[0] == '\0') c->preferred = single;
    n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1); /* preferred_nof_segments */
    for (size_t i = 0; i < n; i++) (void)str(d, CR_MC_NAME_MAX);
    (void)cr_sp_bool(&d->r);         /* prefer_alloc_in_same_node */
    (void)cr_sp_u8(&d->r);           /* data_type */
    (void)str(d, CR_MC_NAME_MAX);    /* host_id */
    if (cr_sp_bool(&d->r)) {         /* group_ids */
        n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1);
        for (size_t i = 0; i < n; i++) (void)str(d, CR_MC_KEY_MAX);
    }
}

static Crescent__Master__ReplicateConfig *pb_rconf(Crescent__Master__ReplicateConfig *slot,
                                                   const struct rconf *c) {
    crescent__master__replicate_config__init(slot);
    slot->has_replica_num = 1;
    slot->replica_num = c->replica_num;
    slot->has_with_soft_pin = 1;
    slot->with_soft_pin = c->soft_pin;
    if (c->preferred[0] != '\0') slot->preferred_segment = c->preferred;
    return slot;
}

static void read_segment(struct dec *d, struct cr_mc_segment *seg,
                         Crescent__Master__MountSegmentRequest *m) {
    crescent__master__mount_segment_request__init(m);
    seg->id = uuid(d);
    char *name = str(d, CR_MC_NAME_MAX);
    m->buffer = cr_sp_u64(&d->r);
    m->size = cr_sp_u64(&d->r);
    m->transport_endpoint = str(d, CR_MC_NAME_MAX);
    m->protocol = str(d, sizeof(seg->protocol) - 1);
    (void)str(d, CR_MC_NAME_MAX); /* host_id */
    m->segment_name = name;
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    snprintf(seg->protocol, sizeof(seg->protocol), "%s", m->protocol);
}

static int dec_mount(struct dec *d, bool remount) {
    size_t n = 1;
    if (remount) n = cr_sp_len(&d->r, 64, 16);
    struct cr_mc_segment *segs = calloc(n > 0 ? n : 1, sizeof(*segs));
    Crescent__Master__MountSegmentRequest *m = calloc(n > 0 ? n : 1, sizeof(*m));
    int rc = segs != NULL && m != NULL ? CR_OK : CR_ERR_NOMEM;
    for (size_t i = 0; rc == CR_OK && i < n; i++) read_segment(d, &segs[i], &m[i]);
    struct cr_mc_uuid client = uuid(d);
    if (rc != CR_OK || !cr_sp_read_done(&d->r)) goto out;
    set_client(d, client);
    Crescent__Master__UUID id;
    d->req->method = remount ? M(REMOUNT_SEGMENT) : M(MOUNT_SEGMENT);
    if (n > 1) {
        d->req->more = calloc(n - 1, sizeof(*d->req->more));
        d->req->more_len = calloc(n - 1, sizeof(*d->req->more_len));
        if (d->req->more == NULL || d->req->more_len == NULL) rc = CR_ERR_NOMEM;
    }
    for (size_t i = 0; rc == CR_OK && i < n; i++) {
        segs[i].client = client;
        m[i].client_id = pb_uuid(&id, &client);
        attach_secret(d, &m[i].has_client_secret, &m[i].client_secret);
        if (!segment_note(d->st, &segs[i])) rc = CR_ERR_NOMEM;
        else if (i == 0) rc = pack(&m[i].base, &d->req->body, &d->req->body_len);
        else if ((rc = pack(&m[i].base, &d->req->more[i - 1], &d->req->more_len[i - 1])) == CR_OK)
            d->req->more_count++;
    }
    if (rc == CR_OK && n == 0) d->req->method = 0; /* nothing to remount: OK now */
out:
    free(segs);
    free(m);
    return rc;
}

static int dec_unmount(struct dec *d) {
    struct cr_mc_uuid seg_id = uuid(d), client = uuid(d);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    set_client(d, client);
    const struct cr_mc_segment *seg = segment_by_id(d->st, &seg_id);
    Crescent__Master__UnmountSegmentRequest m = CRESCENT__MASTER__UNMOUNT_SEGMENT_REQUEST__INIT;
    Crescent__Master__UUID id;
    /* An id this endpoint never saw mounted: crescent answers
     * SEGMENT_NOT_FOUND for the name "" as for any unknown one. */
    m.segment_name = seg != NULL ? (char *)seg->name : (char *)"";
    m.client_id = pb_uuid(&id, &client);
    attach_secret(d, &m.has_client_secret, &m.client_secret);
    d->req->method = M(UNMOUNT_SEGMENT);
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static int dec_ping(struct dec *d) {
    struct cr_mc_uuid client = uuid(d);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    set_client(d, client);
    Crescent__Master__PingRequest m = CRESCENT__MASTER__PING_REQUEST__INIT;
    Crescent__Master__UUID id;
    m.client_id = pb_uuid(&id, &client);
    attach_secret(d, &m.has_client_secret, &m.client_secret);
    d->req->method = M(PING);
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static void put_start_init(struct dec *d, Crescent__Master__PutStartRequest *m, char *key,
                           uint64_t *len, Crescent__Master__ReplicateConfig *conf, char *tenant,
                           Crescent__Master__UUID *id) {
    crescent__master__put_start_request__init(m);
    m->key = key;
    m->value_length = (int64_t)*len;
    m->config = conf;
    m->n_slice_lengths = 1;
    m->slice_lengths = len;
    m->tenant_id = tenant;
    m->client_id = id;
    attach_secret(d, &m->has_client_secret, &m->client_secret);
}

static int dec_put_start(struct dec *d) {
    struct cr_mc_uuid client = uuid(d);
    char *key = str(d, CR_MC_KEY_MAX);
    uint64_t len = cr_sp_u64(&d->r);
    struct rconf c;
    read_rconf(d, &c);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r) || len > INT64_MAX) return d->r.bad = true, CR_OK;
    set_client(d, client);
    Crescent__Master__PutStartRequest m;
    Crescent__Master__ReplicateConfig conf;
    Crescent__Master__UUID id;
    put_start_init(d, &m, key, &len, pb_rconf(&conf, &c), tenant, pb_uuid(&id, &client));
    d->req->method = M(PUT_START);
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static int dec_batch_put_start(struct dec *d) {
    struct cr_mc_uuid client = uuid(d);
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 2);
    char **keys = calloc(n + 1, sizeof(*keys));
    uint64_t *lens = calloc(n + 1, sizeof(*lens));
    Crescent__Master__PutStartRequest *m = calloc(n + 1, sizeof(*m));
    Crescent__Master__PutStartRequest **ptrs = calloc(n + 1, sizeof(*ptrs));
    int rc = keys && lens && m && ptrs ? CR_OK : CR_ERR_NOMEM;
    for (size_t i = 0; rc == CR_OK && i < n; i++) keys[i] = str(d, CR_MC_KEY_MAX);
    size_t nl = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 8);
    for (size_t i = 0; rc == CR_OK && i < nl && i < n; i++) lens[i] = cr_sp_u64(&d->r);
    struct rconf c;
    read_rconf(d, &c);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (rc != CR_OK || nl != n || !cr_sp_read_done(&d->r)) {
        d->r.bad = d->r.bad || nl != n;
        goto out;
    }
    set_client(d, client);
    Crescent__Master__ReplicateConfig conf;
    Crescent__Master__UUID id;
    pb_rconf(&conf, &c);
    pb_uuid(&id, &client);
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > INT64_MAX) lens[i] = INT64_MAX; /* refused by crescent's validation */
        put_start_init(d, &m[i], keys[i], &lens[i], &conf, tenant, &id);
        ptrs[i] = &m[i];
    }
    Crescent__Master__BatchPutStartRequest b = CRESCENT__MASTER__BATCH_PUT_START_REQUEST__INIT;
    b.n_requests = n;
    b.requests = ptrs;
    d->req->method = M(BATCH_PUT_START);
    d->req->entries = (uint32_t)n;
    rc = pack(&b.base, &d->req->body, &d->req->body_len);
out:
    free(keys), free(lens), free(m), free(ptrs);
    return rc;
}

/* PutEnd(client, ObjectMeta{key, optional checksum}, ReplicaType, tenant) and
 * PutRevoke(client, key, ReplicaType, tenant): crescent's PutEnd and
 * PutRevoke requests have the same fields (PutRevoke has no checksum). */
static void read_put_end(struct dec *d, bool revoke, Crescent__Master__PutEndRequest *m) {
    crescent__master__put_end_request__init(m);
    m->key = str(d, CR_MC_KEY_MAX);
    if (!revoke && cr_sp_bool(&d->r)) {
        m->has_checksum_xxh3 = 1;
        m->checksum_xxh3 = cr_sp_u64(&d->r);
    }
}

static int dec_put_end(struct dec *d, bool revoke) {
    struct cr_mc_uuid client = uuid(d);
    Crescent__Master__PutEndRequest m;
    read_put_end(d, revoke, &m);
    (void)cr_sp_u32(&d->r); /* ReplicaType: crescent's replicas are all memory */
    m.tenant_id = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    set_client(d, client);
    Crescent__Master__UUID id;
    m.client_id = pb_uuid(&id, &client);
    attach_secret(d, &m.has_client_secret, &m.client_secret);
    d->req->method = revoke ? M(PUT_REVOKE) : M(PUT_END);
    if (revoke) { /* the same fields, another message type */
        Crescent__Master__PutRevokeRequest r = CRESCENT__MASTER__PUT_REVOKE_REQUEST__INIT;
        r.key = m.key, r.tenant_id = m.tenant_id, r.client_id = m.client_id;
        r.has_client_secret = m.has_client_secret, r.client_secret = m.client_secret;
        return pack(&r.base, &d->req->body, &d->req->body_len);
    }
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

static int dec_batch_put_end(struct dec *d, bool revoke) {
    struct cr_mc_uuid client = uuid(d);
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, revoke ? 1 : 2);
    Crescent__Master__PutEndRequest *m = calloc(n + 1, sizeof(*m));
    Crescent__Master__PutRevokeRequest *rv = calloc(n + 1, sizeof(*rv));
    void **ptrs = calloc(n + 1, sizeof(*ptrs));
    int rc = m && rv && ptrs ? CR_OK : CR_ERR_NOMEM;
    for (size_t i = 0; rc == CR_OK && i < n; i++) read_put_end(d, revoke, &m[i]);
    (void)cr_sp_u32(&d->r); /* ReplicaType */
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (rc != CR_OK || !cr_sp_read_done(&d->r)) goto out;
    set_client(d, client);
    Crescent__Master__UUID id;
    pb_uuid(&id, &client);
    for (size_t i = 0; i < n; i++) {
        m[i].tenant_id = tenant;
        m[i].client_id = &id;
        attach_secret(d, &m[i].has_client_secret, &m[i].client_secret);
        crescent__master__put_revoke_request__init(&rv[i]);
        rv[i].key = m[i].key, rv[i].tenant_id = tenant, rv[i].client_id = &id;
        rv[i].has_client_secret = m[i].has_client_secret;
        rv[i].client_secret = m[i].client_secret;
        ptrs[i] = revoke ? (void *)&rv[i] : (void *)&m[i];
    }
    d->req->entries = (uint32_t)n;
    if (revoke) {
        Crescent__Master__BatchPutRevokeRequest b =
            CRESCENT__MASTER__BATCH_PUT_REVOKE_REQUEST__INIT;
        b.n_requests = n;
        b.requests = (Crescent__Master__PutRevokeRequest **)ptrs;
        d->req->method = M(BATCH_PUT_REVOKE);
        rc = pack(&b.base, &d->req->body, &d->req->body_len);
    } else {
        Crescent__Master__BatchPutEndRequest b = CRESCENT__MASTER__BATCH_PUT_END_REQUEST__INIT;
        b.n_requests = n;
        b.requests = (Crescent__Master__PutEndRequest **)ptrs;
        d->req->method = M(BATCH_PUT_END);
        rc = pack(&b.base, &d->req->body, &d->req->body_len);
    }
out:
    free(m), free(rv), free(ptrs);
    return rc;
}

/* (key, tenant): ExistKey, GetReplicaList, GetReplicaListByRegex. */
static int dec_key(struct dec *d, enum fn_id fn) {
    char *key = str(d, CR_MC_KEY_MAX);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    d->req->method = fns[fn].method;
    if (fn == FN_EXIST) {
        Crescent__Master__ExistKeyRequest m = CRESCENT__MASTER__EXIST_KEY_REQUEST__INIT;
        m.key = key, m.tenant_id = tenant;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    if (fn == FN_GET) {
        Crescent__Master__GetReplicaListRequest m =
            CRESCENT__MASTER__GET_REPLICA_LIST_REQUEST__INIT;
        m.key = key, m.tenant_id = tenant;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    assert(fn == FN_GET_REGEX);
    Crescent__Master__GetReplicaListByRegexRequest m =
        CRESCENT__MASTER__GET_REPLICA_LIST_BY_REGEX_REQUEST__INIT;
    m.key_regex = key, m.tenant_id = tenant;
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

/* (keys, [force,] tenant): BatchExistKey, BatchGetReplicaList, BatchRemove. */
static int dec_keys(struct dec *d, enum fn_id fn) {
    size_t n = cr_sp_len(&d->r, CR_MC_BATCH_MAX, 1);
    char **keys = calloc(n + 1, sizeof(*keys));
    if (keys == NULL) return CR_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) keys[i] = str(d, CR_MC_KEY_MAX);
    bool force = fn == FN_BATCH_REMOVE && cr_sp_bool(&d->r);
    char *tenant = str(d, CR_MC_NAME_MAX);
    int rc = CR_OK;
    if (!cr_sp_read_done(&d->r)) goto out;
    d->req->method = fns[fn].method;
    d->req->entries = (uint32_t)n;
    if (fn == FN_BATCH_EXIST) {
        Crescent__Master__BatchExistKeyRequest m = CRESCENT__MASTER__BATCH_EXIST_KEY_REQUEST__INIT;
        m.n_keys = n, m.keys = keys, m.tenant_id = tenant;
        rc = pack(&m.base, &d->req->body, &d->req->body_len);
    } else if (fn == FN_BATCH_GET) {
        Crescent__Master__BatchGetReplicaListRequest m =
            CRESCENT__MASTER__BATCH_GET_REPLICA_LIST_REQUEST__INIT;
        m.n_keys = n, m.keys = keys, m.tenant_id = tenant;
        rc = pack(&m.base, &d->req->body, &d->req->body_len);
    } else {
        assert(fn == FN_BATCH_REMOVE);
        Crescent__Master__BatchRemoveRequest m = CRESCENT__MASTER__BATCH_REMOVE_REQUEST__INIT;
        m.n_keys = n, m.keys = keys, m.tenant_id = tenant;
        m.has_force = 1, m.force = force;
        rc = pack(&m.base, &d->req->body, &d->req->body_len);
    }
out:
    free(keys);
    return rc;
}

/* Remove(key, force, tenant), RemoveByRegex(regex, force, tenant),
 * RemoveAll(force, tenant). */
static int dec_remove(struct dec *d, enum fn_id fn) {
    char *key = fn != FN_REMOVE_ALL ? str(d, CR_MC_KEY_MAX) : NULL;
    bool force = cr_sp_bool(&d->r);
    char *tenant = str(d, CR_MC_NAME_MAX);
    if (!cr_sp_read_done(&d->r)) return CR_OK;
    d->req->method = fns[fn].method;
    if (fn == FN_REMOVE) {
        Crescent__Master__RemoveRequest m = CRESCENT__MASTER__REMOVE_REQUEST__INIT;
        m.key = key, m.tenant_id = tenant, m.has_force = 1, m.force = force;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    if (fn == FN_REMOVE_REGEX) {
        Crescent__Master__RemoveByRegexRequest m = CRESCENT__MASTER__REMOVE_BY_REGEX_REQUEST__INIT;
        m.key_regex = key, m.tenant_id = tenant, m.has_force = 1, m.force = force;
        return pack(&m.base, &d->req->body, &d->req->body_len);
    }
    Crescent__Master__RemoveAllRequest m = CRESCENT__MASTER__REMOVE_ALL_REQUEST__INIT;
    m.tenant_id = tenant, m.has_force = 1, m.force = force;
    return pack(&m.base, &d->req->body, &d->req->body_len);
}

void cr_mc_request_free(struct cr_mc_request *req) {
    free(req->body);
    for (size_t i = 0; i < req->more_count; i++) free(req->more[i]);
    free(req->more);
    free(req->more_len);
    *req = (struct cr_mc_request){0};
}

int cr_mc_decode(const struct cr_mc_fn *fn, const uint8_t *body, size_t len,
                 struct cr_mc_state *st, struct cr_mc_request *req, char *err, size_t err_size) {
    assert(fn != NULL && st != NULL && req != NULL && err != NULL);
    *req = (struct cr_mc_request){0};
    struct dec d = {.st = st, .req = req, .cap = 2 * len + 64};
    if (fn->req.literal == NULL) { /* no arguments: an empty body */
        if (len != 0) goto bad;
        return CR_OK;
    }
    if (!cr_sp_read_begin(&d.r, body, len, &fn->req)) goto bad;
    d.scratch = malloc(d.cap);
    if (d.scratch == NULL) return CR_ERR_NOMEM;
    int rc = CR_OK;
    enum fn_id id = (enum fn_id)(fn - fns);
    switch (id) {
    case FN_PING: rc = dec_ping(&d); break;
    case FN_FETCH_TASKS:
        (void)uuid(&d), (void)cr_sp_u64(&d.r); /* answered here: no tasks */
        break;
    case FN_MOUNT: rc = dec_mount(&d, false); break;
    case FN_REMOUNT: rc = dec_mount(&d, true); break;
    case FN_UNMOUNT: rc = dec_unmount(&d); break;
    case FN_PUT_START: rc = dec_put_start(&d); break;
    case FN_PUT_END: rc = dec_put_end(&d, false); break;
    case FN_PUT_REVOKE: rc = dec_put_end(&d, true); break;
    case FN_BATCH_PUT_START: rc = dec_batch_put_start(&d); break;
    case FN_BATCH_PUT_END: rc = dec_batch_put_end(&d, false); break;
    case FN_BATCH_PUT_REVOKE: rc = dec_batch_put_end(&d, true); break;
    case FN_EXIST:
    case FN_GET:
    case FN_GET_REGEX: rc = dec_key(&d, id); break;
    case FN_BATCH_EXIST:
    case FN_BATCH_GET:
    case FN_BATCH_REMOVE: rc = dec_keys(&d, id); break;
    case FN_REMOVE:
    case FN_REMOVE_REGEX:
    case FN_REMOVE_ALL: rc = dec_remove(&d, id); break;
    default: assert(!"a call with arguments has a decoder");
    }
    free(d.scratch);
    if (rc != CR_OK) {
        cr_mc_request_free(req);
        snprintf(err, err_size, "out of memory decoding %s", fn->name);
        return rc;
    }
    if (cr_sp_read_done(&d.r)) return CR_OK;
    cr_mc_request_free(req);
bad:
    snprintf(err, err_size, "%s: the %zu-byte body is not its arguments (struct_pack, "
             "docs/mooncake.md) at byte %zu", fn->name, len, d.r.off);
    return CR_ERR_PROTOCOL;
}

/* ------------------------------------------------------------------------ */
/* Results */

int32_t cr_mc_error_code(int32_t s) {
    switch (s) {
    case CR_OK: return CR_MC_OK;
    case CR_ERR_OBJECT_NOT_READY: return CR_MC_REPLICA_IS_NOT_READY; /* crescent -707 */
    case CR_ERR_CHECKSUM: return CR_MC_CHECKSUM_MISMATCH;
    case CR_ERR_LEASE_EXPIRED: return CR_MC_LEASE_EXPIRED;
    case CR_ERR_TIMEOUT:
    case CR_ERR_AGAIN:
    case CR_ERR_SHUTDOWN: return CR_MC_RPC_FAIL;
    default:
        /* crescent keeps the reference's codes (-10 and below); its own
         * transport codes (-1 .. -8) are not Mooncake's. */
        return s <= -10 ? s : CR_MC_INTERNAL_ERROR;
    }
}

struct ans {
    const struct cr_mc_fn *fn;
    const ProtobufCMessage *pb; /* NULL: every entry is `code` */
    int32_t code;
    uint32_t entries;
    const struct cr_mc_state *st;
};

static void put_err(struct cr_sp_writer *w, int32_t code) {
    cr_sp_put_u8(w, 0);
    cr_sp_put_u32(w, (uint32_t)code);
}

/* Replicas Mooncake can describe: one buffer each (a Mooncake put is one
 * slice; a crescent object of several slices has no Mooncake descriptor). */
static size_t describable(size_t n, Crescent__Master__ReplicaInfo *const *list) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += list[i]->n_handles == 1;
    return k;
}

static void put_descs(struct cr_sp_writer *w, const struct cr_mc_state *st, size_t n,
                      Crescent__Master__ReplicaInfo *const *list) {
    cr_sp_put_len(w, describable(n, list));
    for (size_t i = 0; i < n; i++) {
        if (list[i]->n_handles != 1) continue;
        const Crescent__Master__BufHandle *h = list[i]->handles[0];
        /* crescent has no replica ids: the position, from 1, as Mooncake's
         * ids start at 1. */
        cr_sp_put_u64(w, i + 1);
        cr_sp_put_u8(w, 0); /* variant alternative 0: MemoryDescriptor */
        cr_sp_put_u64(w, h->size);
        cr_sp_put_u64(w, h->buffer);
        const char *proto = protocol_of(st, h->segment_name);
        cr_sp_put_str(w, proto, strlen(proto));
        const char *ep = h->transport_endpoint != NULL && h->transport_endpoint[0] != '\0'
                             ? h->transport_endpoint : h->segment_name;
        cr_sp_put_str(w, ep, strlen(ep));
        /* ReplicaStatus: the same numbering on both sides (UNDEFINED 0 ..
         * FAILED 5). */
        cr_sp_put_u32(w, (uint32_t)list[i]->status);
    }
}

/* expected<vector<Descriptor>>, from one PutStart response. */
static void put_put_start(struct cr_sp_writer *w, const struct cr_mc_state *st,
                          const Crescent__Master__PutStartResponse *r) {
    if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
    cr_sp_put_u8(w, 1);
    put_descs(w, st, r->n_replica_list, r->replica_list);
}

static void put_grlr(struct cr_sp_writer *w, const struct cr_mc_state *st,
                     const Crescent__Master__GetReplicaListResponse *r) {
    if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
    if (r->n_replica_list > 0 && describable(r->n_replica_list, r->replica_list) == 0)
        return put_err(w, CR_MC_INVALID_REPLICA);
    cr_sp_put_u8(w, 1);
    put_descs(w, st, r->n_replica_list, r->replica_list);
    cr_sp_put_u64(w, r->has_lease_ttl_ms ? r->lease_ttl_ms : 0);
    cr_sp_put_u8(w, r->has_checksum_xxh3);
    if (r->has_checksum_xxh3) cr_sp_put_u64(w, r->checksum_xxh3);
}

static void put_codes(struct cr_sp_writer *w, const struct ans *a, bool as_bool) {
    const Crescent__Master__BatchRemoveResponse *r = (const void *)a->pb;
    /* Batch*Response with status_codes share this layout (field 1 and 2). */
    bool whole = r->status_code != 0 && r->n_status_codes == 0;
    size_t n = whole ? a->entries : r->n_status_codes;
    cr_sp_put_len(w, n);
    for (size_t i = 0; i < n; i++) {
        int32_t c = whole ? r->status_code : r->status_codes[i];
        if (as_bool && (c == CR_OK || c == CR_ERR_OBJECT_NOT_FOUND ||
                        c == CR_ERR_OBJECT_NOT_READY)) {
            cr_sp_put_u8(w, 1);
            cr_sp_put_u8(w, c == CR_OK);
        } else if (c == CR_OK) {
            cr_sp_put_u8(w, 1);
        } else {
            put_err(w, cr_mc_error_code(c));
        }
    }
}

static void put_map(struct cr_sp_writer *w, const struct cr_mc_state *st,
                    const Crescent__Master__GetReplicaListByRegexResponse *r) {
    if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
    cr_sp_put_u8(w, 1);
    cr_sp_put_len(w, r->n_object_map);
    for (size_t i = 0; i < r->n_object_map; i++) {
        const Crescent__Master__GetReplicaListByRegexResponse__ObjectMapEntry *e =
            r->object_map[i];
        const char *key = e->key != NULL ? e->key : ""; /* a map entry's key is optional */
        cr_sp_put_str(w, key, strlen(key));
        if (e->value == NULL) cr_sp_put_len(w, 0);
        else put_descs(w, st, e->value->n_replica_list, e->value->replica_list);
    }
}

/* Every entry of fn's result is error `code`. */
static void fill_error(struct cr_sp_writer *w, const struct ans *a) {
    switch (a->fn->shape) {
    case R_PLAIN_LONG: cr_sp_put_u64(w, 0); return; /* RemoveAll has no error: 0 removed */
    case R_VEC_DESCS:
    case R_VEC_VOID:
    case R_VEC_BOOL:
    case R_VEC_GRLR:
        cr_sp_put_len(w, a->entries);
        for (uint32_t i = 0; i < a->entries; i++) put_err(w, a->code);
        return;
    default: put_err(w, a->code);
    }
}

static void fill_local(struct cr_sp_writer *w, const struct ans *a) {
    cr_sp_put_u8(w, 1);
    switch (a->fn->shape) {
    case R_STRING: /* ServiceReady: the version; GetFsdir: no storage dir */
        if (a->fn == &fns[FN_SERVICE_READY])
            cr_sp_put_str(w, CR_MC_STORE_VERSION, strlen(CR_MC_STORE_VERSION));
        else
            cr_sp_put_len(w, 0);
        return;
    case R_STORAGE: /* no storage dir, disk eviction on, no quota: the reference's defaults */
        cr_sp_put_len(w, 0);
        cr_sp_put_u8(w, 1);
        cr_sp_put_u64(w, 0);
        return;
    case R_TASKS: cr_sp_put_len(w, 0); return;
    case R_VOID: return;
    default: assert(!"only these are answered locally");
    }
}

static void fill(struct cr_sp_writer *w, const void *ctx) {
    const struct ans *a = ctx;
    if (a->pb == NULL) return a->code == CR_MC_OK ? fill_local(w, a) : fill_error(w, a);
    const ProtobufCMessage *pb = a->pb;
    switch (a->fn->shape) {
    case R_PING: {
        const Crescent__Master__PingResponse *r = (const void *)pb;
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        cr_sp_put_u8(w, 1);
        cr_sp_put_u64(w, 0); /* view_version_id: crescent has one master, no views */
        /* ClientStatus OK (1), or NEED_REMOUNT (2) for a client crescent does
         * not know: Mooncake's client then remounts its segments. */
        cr_sp_put_u32(w, r->has_client_known && !r->client_known ? 2 : 1);
        return;
    }
    case R_VOID: {
        /* Every crescent response starts with status_code (field 1). */
        const Crescent__Master__RemoveResponse *r = (const void *)pb;
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        return cr_sp_put_u8(w, 1);
    }
    case R_DESCS: return put_put_start(w, a->st, (const void *)pb);
    case R_VEC_DESCS: {
        const Crescent__Master__BatchPutStartResponse *r = (const void *)pb;
        if (r->n_responses == 0 && r->status_code != 0)
            return fill_error(w, &(struct ans){a->fn, NULL, cr_mc_error_code(r->status_code),
                                               a->entries, a->st});
        cr_sp_put_len(w, r->n_responses);
        for (size_t i = 0; i < r->n_responses; i++) put_put_start(w, a->st, r->responses[i]);
        return;
    }
    case R_VEC_VOID: return put_codes(w, a, false);
    case R_BOOL: {
        const Crescent__Master__ExistKeyResponse *r = (const void *)pb;
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        cr_sp_put_u8(w, 1);
        return cr_sp_put_u8(w, r->has_exists && r->exists);
    }
    case R_VEC_BOOL: return put_codes(w, a, true);
    case R_GRLR: return put_grlr(w, a->st, (const void *)pb);
    case R_VEC_GRLR: {
        const Crescent__Master__BatchGetReplicaListResponse *r = (const void *)pb;
        if (r->n_responses == 0 && r->status_code != 0)
            return fill_error(w, &(struct ans){a->fn, NULL, cr_mc_error_code(r->status_code),
                                               a->entries, a->st});
        cr_sp_put_len(w, r->n_responses);
        for (size_t i = 0; i < r->n_responses; i++) put_grlr(w, a->st, r->responses[i]);
        return;
    }
    case R_MAP: return put_map(w, a->st, (const void *)pb);
    case R_LONG:
    case R_PLAIN_LONG: {
        /* RemoveByRegexResponse and RemoveAllResponse: the same layout. */
        const Crescent__Master__RemoveAllResponse *r = (const void *)pb;
        if (a->fn->shape == R_PLAIN_LONG)
            return cr_sp_put_u64(w, r->status_code == 0 ? (uint64_t)r->removed_count : 0);
        if (r->status_code != 0) return put_err(w, cr_mc_error_code(r->status_code));
        cr_sp_put_u8(w, 1);
        return cr_sp_put_u64(w, (uint64_t)r->removed_count);
    }
    default: assert(!"no such shape from the store");
    }
}

bool cr_mc_answer_local(const struct cr_mc_fn *fn, struct cr_sp_writer *w) {
    struct ans a = {fn, NULL, CR_MC_OK, 0, NULL};
    return cr_sp_write_value(w, &fn->resp, fill, &a);
}

bool cr_mc_answer_error(const struct cr_mc_fn *fn, int32_t code, uint32_t entries,
                        struct cr_sp_writer *w) {
    assert(code != CR_MC_OK);
    struct ans a = {fn, NULL, code, entries, NULL};
    return cr_sp_write_value(w, &fn->resp, fill, &a);
}

static void learn_secret(const struct cr_mc_fn *fn, const ProtobufCMessage *pb,
                         const struct cr_mc_uuid *client, struct cr_mc_state *st) {
    if (client == NULL) return;
    if (fn->shape == R_PING) {
        const Crescent__Master__PingResponse *r = (const void *)pb;
        if (r->has_client_secret) secret_note(st, client, &r->client_secret);
    } else if (fn == &fns[FN_MOUNT] || fn == &fns[FN_REMOUNT]) {
        const Crescent__Master__MountSegmentResponse *r = (const void *)pb;
        if (r->has_client_secret) secret_note(st, client, &r->client_secret);
    }
}

bool cr_mc_answer(const struct cr_mc_fn *fn, int32_t status, const uint8_t *reply, size_t len,
                  uint32_t entries, const struct cr_mc_uuid *client, struct cr_mc_state *st,
                  struct cr_sp_writer *w) {
    assert(fn != NULL && fn->reply_desc != NULL && st != NULL && w != NULL);
    if (status != CR_OK) return cr_mc_answer_error(fn, cr_mc_error_code(status), entries, w);
    ProtobufCMessage *pb = protobuf_c_message_unpack(fn->reply_desc, NULL, len, reply);
    if (pb == NULL) /* crescent's own reply: cannot happen unless out of memory */
        return cr_mc_answer_error(fn, CR_MC_INTERNAL_ERROR, entries, w);
    learn_secret(fn, pb, client, st);
    struct ans a = {fn, pb, CR_MC_OK, entries, st};
    bool ok = cr_sp_write_value(w, &fn->resp, fill, &a);
    protobuf_c_message_free_unpacked(pb, NULL);
    return ok;
}

static void fill_string(struct cr_sp_writer *w, const void *ctx) {
    cr_sp_put_str(w, ctx, strlen(ctx));
}

bool cr_mc_error_body(const char *msg, struct cr_sp_writer *w) {
    /* struct_pack of a std::string: literal 80 0c (scripts/mooncake_wire.py) */
    static const uint8_t literal[] = {0x80, 0x0c};
    static const struct cr_sp_type string_type = {0x9dcffa76u, literal, sizeof(literal)};
    return cr_sp_write_value(w, &string_type, fill_string, msg);
}
