"""Stand-in for the scheduler side of vLLM's MooncakeStoreConnector (README.md
in this folder): the worker imports only this path helper from it."""


def get_zmq_rpc_path_lookup(vllm_config):
    return "ipc:///tmp/crescent-test-mooncake-lookup"
