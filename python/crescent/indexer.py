"""Indexer: crescentd's prefix indexer over HTTP (docs/http-api.md), for
routers: register engines' KV-event publishers, ask which instance holds the
longest cached prefix of a prompt, and which one to route it to."""
import json
import urllib.error
import urllib.request


class IndexerError(Exception):
    """An HTTP answer other than 2xx: status (e.g. 400), error and detail as
    crescentd wrote them ("invalid registration", "field 'modelname' is required")."""

    def __init__(self, route, status, error, detail):
        self.route = route
        self.status = status
        self.error = error
        self.detail = detail
        super().__init__(f"{route}: HTTP {status}: {error}: {detail}")


class Indexer:
    def __init__(self, address="127.0.0.1:13333", timeout=5.0):
        """`address`: crescentd's HTTP front, "host:port" or "http://host:port"."""
        self.base = address if "://" in address else f"http://{address}"
        self.timeout = timeout

    def register(self, instance_id, endpoint, modelname, block_size, **optional):
        """Registers an engine's KV-event publisher (ZMQ PUB `endpoint`).
        Optional: replay_endpoint, type ("vLLM", "SGLang", ...), lora_name,
        tenant_id, additionalsalt, dp_rank.  Returns crescentd's answer."""
        body = {"instance_id": instance_id, "endpoint": endpoint, "modelname": modelname,
                "block_size": block_size, **optional}
        return self._post("/register", body)

    def unregister(self, instance_id, **optional):
        """Removes a registration (optional tenant_id, dp_rank) and its blocks."""
        return self._post("/unregister", {"instance_id": instance_id, **optional})

    def query(self, model, block_size, token_ids, **optional):
        """{tenant: {instance: {"longest_matched", "GPU", "CPU", "DISK", "DP"}}}
        for the prompt `token_ids`; {} when nothing matches.  Optional:
        tenant_id, instance_id, lora_name, cache_salt."""
        body = {"model": model, "block_size": block_size, "token_ids": list(token_ids),
                **optional}
        return self._post("/query", body)

    def query_by_hash(self, seq_hashes, **optional):
        """As query, for a prompt already hashed into block hashes."""
        return self._post("/query_by_hash", {"seq_hashes": list(seq_hashes), **optional})

    def route(self, model, block_size, token_ids, **optional):
        """The instance to send the prompt to: {"instance_id", "longest_matched",
        "cost", ...}; instance_id is None when there is no candidate."""
        body = {"model": model, "block_size": block_size, "token_ids": list(token_ids),
                **optional}
        return self._post("/route", body)

    def load(self, instance_id, **metrics):
        """Reports an instance's load (kv_active_blocks, kv_total_blocks, ...) for route."""
        return self._post("/load", {"instance_id": instance_id, **metrics})

    def services(self):
        return self._get("/services")

    def _get(self, route):
        return self._send(urllib.request.Request(self.base + route), route)

    def _post(self, route, body):
        data = json.dumps(body).encode()
        request = urllib.request.Request(self.base + route, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        return self._send(request, route)

    def _send(self, request, route):
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"error": raw.decode(errors="replace"), "detail": ""}
            raise IndexerError(route, e.code, body.get("error"), body.get("detail")) from None
