"""Stand-in for vllm.utils.math_utils (README.md in this folder)."""


def cdiv(a, b):
    return -(a // -b)
