"""The HTTP front over raw sockets (src/http/front.c, request_head.c: heads
parsed by Debian's http_parser): pipelining, keep-alive, requests split
across reads, Expect: 100-continue, and every refusal with its status."""
import json
import socket

QUERY = json.dumps({"model": "m", "block_size": 16, "token_ids": list(range(32))}).encode()


def _connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _read_answer(s, pending=b""):
    """Reads one answer; returns (status, headers dict, body, bytes left over)."""
    data = pending
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, f"closed before an answer's head: {data!r}"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = s.recv(65536)
        assert chunk, "closed in the middle of a body"
        rest += chunk
    return status, headers, rest[:length], rest[length:]


def _closed(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _post_query(length=len(QUERY), extra=b""):
    return (b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n" % length + extra + b"\r\n")


def test_pipelined_requests_are_answered_in_order(daemon):
    d = daemon()
    with _connect(d.port) as s:
        s.sendall(b"GET /health HTTP/1.1\r\n\r\n" + _post_query() + QUERY
                  + b"GET /no/such/route HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        left = b""
        statuses = []
        for _ in range(4):
            status, _, body, left = _read_answer(s, left)
            statuses.append(status)
        assert statuses == [200, 200, 404, 200]


def test_a_request_split_into_single_bytes_is_one_request(daemon):
    d = daemon()
    with _connect(d.port) as whole:
        whole.sendall(_post_query() + QUERY)
        want = _read_answer(whole)
    with _connect(d.port) as s:
        for b in _post_query() + QUERY:
            s.sendall(bytes([b]))
        got = _read_answer(s)
    assert got[0] == 200 and got[2] == want[2], (got, want)


def test_keep_alive_follows_the_version_and_connection_header(daemon):
    d = daemon()
    with _connect(d.port) as s:  # HTTP/1.1: kept, until Connection: close
        for _ in range(3):
            s.sendall(b"GET /health HTTP/1.1\r\n\r\n")
            status, headers, _, _ = _read_answer(s)
            assert status == 200 and "connection" not in headers
        s.sendall(b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        status, headers, _, _ = _read_answer(s)
        assert headers.get("connection") == "close" and _closed(s)
    with _connect(d.port) as s:  # HTTP/1.0: closed unless asked to keep it
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        assert _read_answer(s)[1].get("connection") == "close" and _closed(s)
    with _connect(d.port) as s:
        s.sendall(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        assert "connection" not in _read_answer(s)[1]
        s.sendall(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        assert _read_answer(s)[0] == 200


def test_expect_100_continue_is_answered_before_the_body(daemon):
    d = daemon()
    with _connect(d.port) as s:
        s.sendall(_post_query(extra=b"Expect: 100-continue\r\n"))
        status, _, _, left = _read_answer(s)
        assert status == 100 and left == b""
        s.sendall(QUERY)
        assert _read_answer(s)[0] == 200


def test_malformed_requests_are_refused_and_the_connection_closed(daemon):
    d = daemon()
    cases = [
        (b"GET / HTTP/2.0\r\n\r\n", 400, "HTTP/1.x"),
        (b"G@T /health HTTP/1.1\r\n\r\n", 400, "invalid HTTP method"),
        (b"GET http://x/health HTTP/1.1\r\n\r\n", 400, "must be a path"),
        (b"GET /health HTTP/1.1\r\nNo colon here\r\n\r\n", 400, "malformed request"),
        (_post_query(extra=b"Content-Length: 3\r\n"), 400, "given twice"),
        (b"POST /query HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "chunked"),
        (_post_query(16 * 1024 * 1024 + 1), 413, "16 MiB"),
        (b"GET /health HTTP/1.1\r\nX: " + b"a" * 16400 + b"\r\n\r\n", 431, "16384"),
    ]
    for request, status, why in cases:
        with _connect(d.port) as s:
            try:
                s.sendall(request)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused before all of it was read
            got, headers, body, _ = _read_answer(s)
            assert got == status, (request[:40], got, body)
            assert why in json.loads(body)["detail"], (request[:40], body)
            assert headers.get("connection") == "close" and _closed(s)
    with _connect(d.port) as s:  # and the front still serves
        s.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        assert _read_answer(s)[0] == 200
