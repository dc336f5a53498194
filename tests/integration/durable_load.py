"""A put load for test_durable.py, run as its own process so the test can
kill crescentd under it: puts random bytes under fresh keys through the
Python client (libcrescent: PutStart, the bytes to a crescent-store, PutEnd)
and removes every fifth key after its put.  Each call the master
acknowledged is appended to the journal file given as argv[2] only after it
returned: "P key sha256" or "R key"; "T key" before a removal is sent (a
removal the master applied but whose answer the kill cut off leaves the key
either way).  Runs until a call fails (the master
was killed), then exits 0."""
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from crescent import CrescentError, Store  # noqa: E402


def main():
    rpc, journal_path, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc, timeout_ms=3000)
    with open(journal_path, "a", buffering=1) as journal:
        i = 0
        while True:
            key = f"{prefix}-{i}"
            value = os.urandom(1 + (i * 7919) % 65536)
            try:
                s.put(key, value)
                journal.write(f"P {key} {hashlib.sha256(value).hexdigest()}\n")
                if i % 5 == 4:
                    journal.write(f"T {key}\n")
                    s.remove(key)
                    journal.write(f"R {key}\n")
            except CrescentError:
                return 0
            i += 1


if __name__ == "__main__":
    sys.exit(main())
