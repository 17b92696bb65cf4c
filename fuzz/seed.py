#!/usr/bin/env python3
"""Writes the starting inputs of every fuzz target into fuzz/seeds/<target>/
(not kept: `make fuzz` fuzzes from them and the kept corpus, then keeps the
minimised corpus in fuzz/corpus/<target>/). The formats are those of
fuzz/harness/mod.rs: a canned response is "<status> [<delay ms>]\\n<headers>\\n\\n<body>".
The S3 replies are moto's, captured in lease-core/tests/data/moto/."""

import hashlib
import pathlib
import sys

FUZZ = pathlib.Path(__file__).resolve().parent
MOTO = FUZZ.parent / "lease-core" / "tests" / "data" / "moto"
OUT = FUZZ / "seeds"

DATE = "Sun, 22 Nov 2026 03:10:47 GMT"


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def canned(status, headers=(), body="", delay=None):
    first = f"{status}" if delay is None else f"{status} {delay}"
    head = "".join(f"{k}: {v}\n" for k, v in headers)
    return f"{first}\n{head}\n{body}"


def from_capture(path):
    """moto's raw response as a canned one."""
    raw = path.read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n") if b"\r\n\r\n" in raw else raw.partition(b"\n\n")
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    status = lines[0].split(b" ")[1]
    # Only the headers the dialects read: every byte of a seed is carried
    # by each input derived from it, and the corpus is kept in git.
    read = (b"date:", b"etag:", b"retry-after:")
    kept = [line for line in lines[1:] if line.lower().startswith(read)]
    return status + b"\n" + b"\n".join(kept) + b"\n\n" + body


RECORD = ('{"v":1,"token":7,"expires_at":1790000030.0,"holder":"worker-a","session":"s1",'
          '"nonce":"n1","acquired_at":1790000000.0,"ttl_ms":30000,"released":false,'
          '"meta":{"job":"nightly"},"protocol":"cas"}')
RECORDS = [
    RECORD,
    '{"expires_at": 1790000000.5, "token": 3}',
    '{"v":1,"token":2,"expires_at":1790000010.25,"holder":"h","session":"s","nonce":"n","released":true,"protocol":"epochs"}',
    '{"v":1,"token":1,"expires_at":1790000010,"holder":"h","session":"s","nonce":"n","protocol":"mutex","strays":true}',
    '{"expires_at":1,"token":1,"future":[1,{"a":null}],"meta":null,"holder":null}',
    '{"expires_at":1790000000,"token":18446744073709551615}',
    '{"expires_at":1,"token":1,"holder":"\\u00e9\\ud83d\\ude00\\u0000"}',
    '{"v":2,"expires_at":1,"token":1}',
    '{"expires_at":-3,"token":1.5}',
    '[1,2]',
    '{not json',
    '<html><body>403 Forbidden</body></html>',
    '{"fence_token":3,"nonce":"n1"}\npayload bytes',
    # Other tools' locks (lease_core::record::ForeignLock), and near misses.
    '{"generation":7,"expires_at":"2026-09-21T14:13:50.000000123Z","owner":"db-1:4242"}',
    '{"token":7,"expires_at":"2026-09-21T16:13:50+02:00"}',
    '{"generation":7,"expires_at":"2026-02-30T14:13:50Z","owner":"a"}',
    '{"ID":"08887bf0-8171-6457-9f43-9375d2070577","Operation":"OperationTypeApply","Info":"",'
    '"Who":"ci@runner-4","Version":"1.10.2","Created":"2026-09-21T13:56:40.01334311Z","Path":"s.tfstate"}',
    '{"ID":"x","Operation":"OperationTypeApply","Created":"yesterday"}',
]

S3_CODES = ["NoSuchKey", "NoSuchBucket", "PreconditionFailed", "ConditionalRequestConflict",
            "OperationAborted", "SlowDown", "InternalError", "AccessDenied", "ExpiredToken",
            "NotImplemented", "InvalidArgument", "InvalidRequest", "PermanentRedirect"]
AZURE_CODES = ["BlobNotFound", "ContainerNotFound", "BlobAlreadyExists", "ConditionNotMet",
               "AuthenticationFailed", "InvalidAuthenticationInfo", "UnsupportedHeader",
               "InvalidHeaderValue", "ServerBusy", "InternalError"]


def error_xml(code, message="m"):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f'<Message>{message}</Message><RequestId>r</RequestId></Error>')


S3_LISTING = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
              '<Name>locks</Name><Prefix>locks/fuzz/</Prefix><KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>'
              '<Contents><Key>locks/fuzz/00000000000000000007.json</Key><ETag>&quot;e1&quot;</ETag><Size>12</Size></Contents>'
              '<Contents><Key><![CDATA[locks/fuzz/<c> &amp;]]></Key><Size>0</Size></Contents>'
              '<NextContinuationToken>tok+/= &#x41;</NextContinuationToken></ListBucketResult>')
GCS_LISTING = ('<?xml version=\'1.0\' encoding=\'UTF-8\'?>\n<ListBucketResult xmlns="http://doc.s3.amazonaws.com/2006-03-01">'
               '<Name>locks</Name><Prefix>locks/fuzz/</Prefix><IsTruncated>false</IsTruncated>'
               '<Contents><Key>locks/fuzz/00000000000000000003.json</Key><Generation>1790000000123456</Generation>'
               '<MetaGeneration>1</MetaGeneration><ETag>"abc"</ETag><Size>120</Size></Contents></ListBucketResult>')
AZURE_LISTING = ('\ufeff<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/devstoreaccount1" ContainerName="locks">'
                 '<Prefix>locks/fuzz/</Prefix><MaxResults>5000</MaxResults><Blobs>'
                 '<Blob><Name>locks/fuzz/00000000000000000002.json</Name><Properties><Etag>0x8DC1</Etag><Content-Length>120</Content-Length></Properties></Blob>'
                 '<Blob><Name>locks/fuzz/b &amp; c</Name><Properties><Etag>"0x8DC2"</Etag><Content-Length>7</Content-Length></Properties></Blob>'
                 '</Blobs><NextMarker>2!72!MDAw</NextMarker></EnumerationResults>')


def replies():
    s3, gcs, azure = [], [], []
    ops = {"get": 0, "put": 1, "delete": 5, "list": 6, "denied": 0, "unsigned": 0}
    for path in sorted(MOTO.glob("*.http")):
        op = ops[path.stem.split("_")[0]]
        if path.stem.startswith("put_if_match") or path.stem.startswith("delete_if_match"):
            op = 2 if op == 1 else 5
        s3.append(bytes([op]) + from_capture(path))
    for code in S3_CODES:
        for status in (400, 403, 404, 409, 412, 500, 503):
            s3.append(bytes([1]) + canned(status, [("Date", DATE)], error_xml(code)).encode())
    s3.append(bytes([0]) + canned(503, [("Date", DATE), ("Retry-After", "Sun, 22 Nov 2026 03:11:17 GMT")]).encode())
    s3.append(bytes([0]) + canned(429, [("Retry-After", " 7 ")]).encode())
    s3.append(bytes([7]) + canned(200, [], S3_LISTING).encode())
    gcs.append(bytes([0]) + canned(200, [("x-goog-generation", "1790000000123456"), ("ETag", '"abc"'), ("Date", DATE)], RECORD).encode())
    gcs.append(bytes([1]) + canned(200, [("x-goog-generation", "1790000000123457")]).encode())
    gcs.append(bytes([2]) + canned(412, [], error_xml("PreconditionFailed")).encode())
    gcs.append(bytes([1]) + canned(429, [("Retry-After", "1")], error_xml("SlowDown")).encode())
    gcs.append(bytes([6]) + canned(200, [], GCS_LISTING).encode())
    gcs.append(bytes([0]) + canned(404, [], error_xml("NoSuchKey")).encode())
    for code in AZURE_CODES:
        for status in (400, 403, 404, 409, 412, 500, 503):
            azure.append(bytes([1]) + canned(status, [("x-ms-error-code", code), ("Date", DATE)],
                                             "\ufeff" + error_xml(code, "The condition\nRequestId:0")).encode())
    azure.append(bytes([0]) + canned(200, [("ETag", '"0x8DC1"'), ("Date", DATE)], RECORD).encode())
    azure.append(bytes([1]) + canned(201, [("ETag", '"0x8DC2"')]).encode())
    azure.append(bytes([5]) + canned(202, []).encode())
    azure.append(bytes([6]) + canned(200, [], AZURE_LISTING).encode())
    return s3, gcs, azure


SETTINGS = [
    "LEASE_BUCKET=locks\nAWS_REGION=eu-west-1\nAWS_ACCESS_KEY_ID=AKIDEXAMPLE\nAWS_SECRET_ACCESS_KEY=secret\nAWS_SESSION_TOKEN=token\nLEASE_KEY=jobs/nightly\nLEASE_TTL=30s",
    "LEASE_PROVIDER=r2\nLEASE_ACCOUNT=0123456789abcdef\nLEASE_BUCKET=locks\nAWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\nLEASE_KEY=k\nLEASE_PROTOCOL=epochs",
    "LEASE_PROVIDER=minio\nLEASE_ENDPOINT=http://127.0.0.1:9000/\nLEASE_BUCKET=locks\nLEASE_UNSIGNED=true\nLEASE_PATH_STYLE=false\nLEASE_ETAG_QUOTING=unquoted\nLEASE_KEY=k\nLEASE_TTL=1500ms",
    "LEASE_PROVIDER=gcs\nLEASE_BUCKET=lease_bucket.example\nAWS_ACCESS_KEY_ID=GOOG1\nAWS_SECRET_ACCESS_KEY=s\nLEASE_KEY=k\nLEASE_TTL=5m\nLEASE_PROBE=off",
    "LEASE_PROVIDER=azure\nAZURE_STORAGE_ACCOUNT=devstoreaccount1\nAZURE_STORAGE_KEY=ZnV6ei1rZXktbm90LWEtc2VjcmV0\nLEASE_BUCKET=locks\nLEASE_ENDPOINT=http://127.0.0.1:10000/devstoreaccount1\nLEASE_KEY=k\nLEASE_PROTOCOL=mutex",
    "LEASE_PROVIDER=azure\nAZURE_STORAGE_ACCOUNT=acct\nAZURE_STORAGE_SAS_TOKEN=?sv=2023-11-03&sr=c&sp=rwdl&sig=abc%2Bdef\nLEASE_BUCKET=locks\nLEASE_KEY=k",
    "LEASE_PROVIDER=tigris\nAWS_ENDPOINT_URL_S3=https://fly.storage.tigris.dev\nAWS_DEFAULT_REGION=auto\nLEASE_BUCKET=locks\nLEASE_UNSIGNED=1\nLEASE_KEY=k\nLEASE_TTL=2h",
    "LEASE_PROVIDER=generic\nAWS_ENDPOINT_URL=http://[::1]:9000\nLEASE_BUCKET=locks\nLEASE_UNSIGNED=yes\nLEASE_KEY=k\nAWS_LAMBDA_LOG_LEVEL=debug\nRUST_LOG=warn",
    "LEASE_BUCKET=\nAWS_REGION=\xff\nLEASE_TTL=1e300s\nLEASE_PROVIDER=AWS",
]

CLI = [
    ["--bucket", "locks", "--region", "us-east-1", "--unsigned", "--key", "jobs/a", "inspect"],
    ["--endpoint", "http://127.0.0.1:9000", "--bucket", "locks", "--unsigned", "--key", "k", "acquire", "--ttl", "10m", "--json"],
    ["--provider", "azure", "--account", "devstoreaccount1", "--endpoint", "http://127.0.0.1:10000/devstoreaccount1",
     "--bucket", "locks", "--unsigned", "--key", "k", "--protocol", "mutex", "renew", "--etag", '"0x8DC1"'],
    ["--provider", "gcs", "--bucket", "locks", "--access-key-id", "GOOG1", "--secret-access-key", "s",
     "--key", "k", "release", "--etag", "1790000000123456"],
    ["--bucket", "locks", "--region", "eu-west-1", "--unsigned", "--key", "k", "break", "--etag", "abc", "--token-floor", "41"],
    ["--bucket", "locks", "--region", "r", "--unsigned", "--key", "k", "--ttl", "30s", "run", "--grace", "5s",
     "--busy-exit", "0", "--lost-exit", "9", "--", "/bin/true", "x"],
    ["--bucket", "locks", "--region", "r", "--unsigned", "--path-style", "false", "--etag-quoting", "unquoted",
     "--key", "k", "--protocol", "epochs", "--holder", "h", "--no-probe", "probe"],
    ["--help"],
    ["run", "--help"],
    ["--version"],
    ["--ttl", "soon", "inspect"],
    ["--provider", "r2", "--ttl", "30s", "plan", "--leases", "20", "--contenders", "1", "--json"],
    ["--protocol", "mutex", "--ttl", "3s", "plan", "--renew-every", "900ms"],
]


# Listings as the protocol check and the epochs protocol read them.
SHORT_LISTINGS = [
    "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>",
    "<ListBucketResult><Contents><Key>locks/fuzz/00000000000000000005.json</Key>"
    "<Generation>17</Generation></Contents></ListBucketResult>",
    "<EnumerationResults><Blobs><Blob><Name>locks/fuzz/00000000000000000005.json</Name>"
    "<Properties><Etag>0x1</Etag></Properties></Blob></Blobs><NextMarker/></EnumerationResults>",
]


def lease_ops():
    """protocol, operation, dialect bytes, then canned responses."""
    sep = "\n~~~\n"
    found = canned(200, [("ETag", '"e0"')], '{"token":5,"expires_at":1790000010,"holder":"fuzz-a","session":"s0"}')
    garbage = canned(200, [("ETag", '"e0"')], "<html>")
    seeds = []
    for protocol in range(3):
        for operation in range(8):
            for which in range(3):
                version = [("ETag", '"e1"')] if which != 1 else [("x-goog-generation", "17")]
                replies = [
                    canned(404, [("Date", DATE)]),
                    canned(200, version + [("Date", DATE)], "", delay=20),
                    canned(200, [], SHORT_LISTINGS[which]),
                ]
                if operation in (1, 2, 4, 5, 6):
                    replies = [garbage if operation in (4, 5) else found] + replies
                seeds.append(bytes([protocol, operation, which]) + sep.join(replies).encode())
    seeds.append(bytes([0, 0, 0]) + sep.join([
        canned(503, [("Retry-After", "1")]), canned(0), canned(500, [], "", delay=99999),
        found, canned(412), found]).encode())
    return seeds


def main():
    for body in RECORDS:
        write("record", body)
    s3, gcs, azure = replies()
    for data in s3:
        write("s3_reply", data)
    for data in gcs:
        write("gcs_reply", data)
    for data in azure:
        write("azure_reply", data)
    for selector, body in enumerate([S3_LISTING, GCS_LISTING, AZURE_LISTING]):
        write("listing", bytes([selector]) + body.encode())
        write("listing", bytes([selector + 3]) + body.encode())
    for path in sorted(MOTO.glob("list_*.http")):
        write("listing", bytes([0]) + from_capture(path).split(b"\n\n", 1)[1])
    for date, retry in [(DATE, "120"), (DATE, "Sun, 22 Nov 2026 03:11:17 GMT"), ("Sunday, 22-Nov-26 03:10:47 GMT", "0"),
                        ("Sun Nov 22 03:10:47 2026", "Sun Nov 22 03:09:47 2026"), ("", "99999999999999999999"),
                        ("Thu, 01 Jan 1970 00:00:00 GMT", " 7 "), ("Fri, 31 Dec 9999 23:59:59 GMT", "soon")]:
        write("http_dates", f"{date}\n{retry}")
    for raw in ['"ac3ef48caa08fa3ed5e025da69edc645"', 'W/"abc"', "0x8DC1", '"0x8DC2"', "1790000000123456",
                ' "a b" ', '""', '"', 'W/', '"\\"x\\""', "é\u0001\x7f", "abc-1"]:
        write("etag", raw)
    for env in SETTINGS:
        write("settings_env", env.encode("utf-8", "surrogateescape") if "\xff" not in env else env.encode("latin-1"))
    for args in CLI:
        write("cli_flags", "\0".join(args))
    for data in lease_ops():
        write("lease_ops", data)


if __name__ == "__main__":
    sys.exit(main())
