"""One engine process for the MooncakeDistributedStore tests: it imports
`from mooncake.store import MooncakeDistributedStore` (crescent's compat
package, or Mooncake's real module when PYTHONPATH says so) and runs the
calls it reads on stdin, one JSON line each, answering one JSON line each.

    {"call": "setup", "args": [...], "kwargs": {...}}   -> {"ok": result}
    {"exec": "python statements"}  (names: store, ctypes, mooncake, bufs)
                                                        -> {"ok": value of `result`}

Bytes travel as {"b64": "..."}; an exception comes back as {"error": "..."}.
"""
import base64
import ctypes
import json
import sys
import traceback


def decode(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def encode(value):
    if isinstance(value, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    return {"type": type(value).__name__, "len": len(value) if hasattr(value, "__len__") else None,
            "bytes": encode(bytes(memoryview(value))) if hasattr(value, "__len__") else None}


def main():
    import mooncake.store
    store = mooncake.store.MooncakeDistributedStore()
    env = {"store": store, "ctypes": ctypes, "mooncake": mooncake, "bufs": {}}
    print(json.dumps({"ok": mooncake.store.__file__}), flush=True)  # ready
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if "exec" in request:
                env.pop("result", None)
                exec(request["exec"], env)
                result = env.get("result")
            else:
                result = getattr(store, request["call"])(*decode(request.get("args", [])),
                                                         **decode(request.get("kwargs", {})))
            print(json.dumps({"ok": encode(result)}), flush=True)
        except Exception as e:  # noqa: BLE001  (the test reads it)
            print(json.dumps({"error": f"{type(e).__name__}: {e}",
                              "trace": traceback.format_exc()}), flush=True)


if __name__ == "__main__":
    main()
