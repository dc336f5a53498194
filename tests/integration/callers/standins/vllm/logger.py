"""Stand-in for vllm.logger (README.md in this folder)."""
import logging


def init_logger(name):
    return logging.getLogger(name)
