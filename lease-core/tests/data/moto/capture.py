"""Re-captures the canned S3 responses in this folder from moto.

The files were captured from moto 5.2.1 (`moto_server`, Werkzeug 3.1.8).
Each `.http` file is one raw response: status line, headers as sent, a blank
line, then the body bytes verbatim.

Usage (two fresh servers on free loopback ports):
    moto_server -H 127.0.0.1 -p A &                                 # no auth
    INITIAL_NO_AUTH_ACTION_COUNT=2 moto_server -H 127.0.0.1 -p B &  # auth on
    python3 capture.py A B
"""

import hashlib
import http.client
import os
import sys

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

HERE = os.path.dirname(os.path.abspath(__file__))


def send(port, method, path, body=b"", headers=None, key=("AKIDEXAMPLE", "secret")):
    r = AWSRequest(method=method, url=f"http://127.0.0.1:{port}{path}", data=body,
                   headers=dict(headers or {}))
    r.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
    SigV4Auth(Credentials(*key), "s3", "us-east-1").add_auth(r)
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request(method, path, body=body, headers=dict(r.headers.items()))
    return conn.getresponse()


def save(name, resp):
    body = resp.read()
    head = f"HTTP/1.1 {resp.status} {resp.reason}\n"
    head += "".join(f"{k}: {v}\n" for k, v in resp.getheaders())
    with open(os.path.join(HERE, name + ".http"), "wb") as f:
        f.write(head.encode() + b"\n" + body)
    return resp


def main(a, b):
    json_ct = {"Content-Type": "application/json"}
    send(a, "PUT", "/locks").read()
    save("get_no_such_key", send(a, "GET", "/locks/leases/a"))
    save("get_no_such_bucket", send(a, "GET", "/nobucket/leases/a"))
    save("put_created", send(a, "PUT", "/locks/leases/a", b'{"x":1}',
                             {**json_ct, "If-None-Match": "*"}))
    save("put_if_none_match_exists", send(a, "PUT", "/locks/leases/a", b'{"x":2}',
                                          {**json_ct, "If-None-Match": "*"}))
    save("get_found", send(a, "GET", "/locks/leases/a"))
    save("put_if_match_stale", send(a, "PUT", "/locks/leases/a", b'{"x":3}',
                                    {**json_ct, "If-Match": '"deadbeef"'}))
    save("put_if_match_missing_key", send(a, "PUT", "/locks/leases/zz", b'{"x":3}',
                                          {**json_ct, "If-Match": '"deadbeef"'}))
    save("delete_if_match_stale", send(a, "DELETE", "/locks/leases/a", b"",
                                       {"If-Match": '"deadbeef"'}))
    send(a, "PUT", "/locks/odd/a%20b%26c%2B%C3%A9%3Cx%3E", b'{"y":1}', json_ct).read()
    save("list_truncated", send(a, "GET", "/locks?list-type=2&prefix=&max-keys=1"))
    save("list_odd_keys", send(a, "GET", "/locks?list-type=2&prefix=odd%2F"))
    save("list_empty", send(a, "GET", "/locks?list-type=2&prefix=none%2F"))
    save("list_no_such_bucket", send(a, "GET", "/nobucket?list-type=2&prefix=leases%2F"))
    save("delete_ok", send(a, "DELETE", "/locks/leases/a"))
    save("delete_missing", send(a, "DELETE", "/locks/leases/a"))

    iam = boto3.client("iam", endpoint_url=f"http://127.0.0.1:{b}", region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")
    iam.create_user(UserName="u")
    k = iam.create_access_key(UserName="u")["AccessKey"]
    save("denied_invalid_access_key", send(b, "GET", "/locks/leases/a"))
    save("denied_signature_mismatch", send(b, "GET", "/locks/leases/a",
                                           key=(k["AccessKeyId"], "wrong-secret")))
    save("denied_access_denied", send(b, "GET", "/locks/leases/a",
                                      key=(k["AccessKeyId"], k["SecretAccessKey"])))
    # With auth on, moto answers a request without Authorization with an HTML 500.
    conn = http.client.HTTPConnection("127.0.0.1", b)
    conn.request("GET", "/locks/leases/a")
    save("unsigned_html_500", conn.getresponse())


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
