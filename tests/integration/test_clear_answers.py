"""Clear answers: a deprecated lora_id is refused with the reason (never
silently matched against the base model), and /register validates as strictly
as the config file: unknown fields and unknown engine types are refused, and
a config file holding them stops crescentd with the entry and the field."""
import json
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import binary, free_port, http_get


def post(d, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{d.port}{path}",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


QUERY = {"model": "m", "block_size": 16, "token_ids": [1, 2, 3]}
REG = {"instance_id": "vllm-0", "endpoint": "tcp://127.0.0.1:1", "modelname": "m",
       "block_size": 16}


@pytest.mark.parametrize("path", ["/query", "/route"])
def test_deprecated_lora_id_is_refused_with_the_reason(daemon, path):
    d = daemon()
    status, answer = post(d, path, {**QUERY, "lora_id": 3})
    assert status == 400
    assert "lora_id" in answer["detail"] and "lora_name" in answer["detail"]
    assert post(d, path, {**QUERY, "lora_id": None})[0] == 200  # null: not given


def test_register_refuses_unknown_fields_and_types(daemon):
    d = daemon()
    status, answer = post(d, "/register", {**REG, "model": "m"})
    assert status == 400 and "unknown field 'model'" in answer["detail"]
    status, answer = post(d, "/register", {**REG, "type": "tgi"})
    assert status == 400 and "type 'tgi'" in answer["detail"]
    status, answer = post(d, "/register", {**REG, "type": "sglang"})
    assert status == 200
    _, body = http_get(d.port, "/services")
    assert json.loads(body)["services"][0]["type"] == "SGLang"  # the usual spelling


def run_with_config(tmp_path, entry, event=None):
    """Runs crescentd with a conductor config holding entry as vllm-0."""
    conf = tmp_path / "conductor_config.json"
    conf.write_text(json.dumps({"kvevent_instance": {"vllm-0": entry}}))
    return subprocess.run([binary("crescentd"), "--no-pin", "--indexer-config", str(conf),
                           "--http-address", f"127.0.0.1:{free_port()}", "--metrics-port", "0",
                           "--rpc-address", f"tcp://127.0.0.1:{free_port()}",
                           "--rpc-tcp-address", f"127.0.0.1:{free_port()}",
                           "--event-address", f"tcp://127.0.0.1:{event or free_port()}",
                           "--replay-address", f"tcp://127.0.0.1:{free_port()}"],
                          capture_output=True, text=True, timeout=20)


def test_config_file_refuses_the_same(tmp_path):
    r = run_with_config(tmp_path, {**REG, "blocksize": 16})
    assert r.returncode == 2
    assert "vllm-0" in r.stderr and "unknown field 'blocksize'" in r.stderr, r.stderr


def test_register_refuses_link_local_and_crescentds_own_ports(daemon):
    rpc = free_port()
    d = daemon("--rpc-address", f"tcp://127.0.0.1:{rpc}")
    refused = [
        ({"endpoint": "tcp://169.254.169.254:80"}, "link-local"),
        ({"replay_endpoint": "tcp://[fe80::1]:5557"}, "link-local"),
        ({"endpoint": f"tcp://127.0.0.1:{d.port}"}, "--http-address"),
        ({"endpoint": f"tcp://localhost:{d.port}"}, "--http-address"),
        ({"replay_endpoint": f"tcp://0.0.0.0:{rpc}"}, "--rpc-address"),
    ]
    for fields, why in refused:
        status, answer = post(d, "/register", {**REG, **fields})
        assert status == 400, (fields, answer)
        assert why in answer["detail"] and "crescent" in answer["detail"], answer
    _, body = http_get(d.port, "/services")
    assert json.loads(body)["services"] == []
    assert post(d, "/register", {**REG, "endpoint": "tcp://169.255.0.1:5557"})[0] == 200


def test_config_file_refuses_crescentds_own_port(tmp_path):
    event = free_port()
    r = run_with_config(tmp_path, {**REG, "endpoint": f"tcp://127.0.0.1:{event}"},
                        event=event)
    assert r.returncode == 2
    assert "vllm-0" in r.stderr and "--event-address" in r.stderr, r.stderr
