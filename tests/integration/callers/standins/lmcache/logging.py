"""Stand-in for lmcache.logging (README.md in this folder)."""
import logging


def init_logger(name):
    return logging.getLogger(name)
