"""Stand-in for vllm.utils.network_utils (README.md in this folder)."""
import os

import zmq


def get_ip():
    """vLLM's: this host's address, VLLM_HOST_IP when set (here: loopback)."""
    return os.environ.get("VLLM_HOST_IP", "127.0.0.1")


def make_zmq_socket(ctx, path, socket_type, bind=False):
    sock = ctx.socket(socket_type)
    (sock.bind if bind else sock.connect)(path)
    return sock
