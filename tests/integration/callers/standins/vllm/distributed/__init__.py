"""Stand-in for vllm.distributed's parallel-group queries (README.md in
this folder): one process, no tensor, pipeline or context parallelism."""
from types import SimpleNamespace


def get_tensor_model_parallel_rank():
    return 0


def get_tensor_model_parallel_world_size():
    return 1


def get_pcp_group():
    return SimpleNamespace(world_size=1, rank_in_group=0)


def get_dcp_group():
    return SimpleNamespace(world_size=1, rank_in_group=0)
