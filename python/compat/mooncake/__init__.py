"""A stand-in `mooncake` package that hands crescent's client to engines
written against Mooncake's: put python/compat on PYTHONPATH (README.md,
"Engines written for Mooncake").  Only `mooncake.store` is provided."""
