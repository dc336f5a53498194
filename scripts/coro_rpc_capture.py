# loopback proxy logging coro_rpc frames: python3 proxy.py LISTEN_PORT TARGET_PORT LOGFILE
import socket, struct, sys, threading, json
lp, tp, logf = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
out = open(logf, "w")
def pump(src, dst, tag, cid):
    buf = b""
    while True:
        d = src.recv(65536)
        if not d:
            try: dst.shutdown(socket.SHUT_WR)
            except OSError: pass
            return
        dst.sendall(d)
        buf += d
        while True:
            hl = 20 if tag == "req" else 16
            if len(buf) < hl: break
            if tag == "req":
                m, v, st, mt, seq, fid, ln, al = struct.unpack("<BBBBIIII", buf[:20]); extra = dict(fid="%08x" % fid)
            else:
                m, v, ec, mt, seq, ln, al = struct.unpack("<BBBBIII", buf[:16]); extra = dict(err=ec)
            if len(buf) < hl + ln + al: break
            body = buf[hl:hl+ln]
            with lock:
                out.write(json.dumps(dict(c=cid, dir=tag, seq=seq, magic=m, ver=v, mt=mt, len=ln, att=al, body=body.hex(), **extra)) + "\n"); out.flush()
            buf = buf[hl+ln+al:]
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); ls.bind(("127.0.0.1", lp)); ls.listen(64)
n = 0
while True:
    c, _ = ls.accept(); n += 1
    s = socket.create_connection(("127.0.0.1", tp))
    threading.Thread(target=pump, args=(c, s, "req", n), daemon=True).start()
    threading.Thread(target=pump, args=(s, c, "resp", n), daemon=True).start()
