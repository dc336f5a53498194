"""Stand-in for vllm.config (README.md in this folder)."""


class VllmConfig:
    pass
