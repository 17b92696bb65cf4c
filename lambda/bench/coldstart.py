#!/usr/bin/env python3
"""Size and cold start of Lambda binaries, side by side.

Cold start is the time from spawning the process to its first Runtime API
request (`GET /2018-06-01/runtime/invocation/next`), read off a listening
socket that stands in for the Runtime API. Binaries are run interleaved,
round after round, in a rotating order, so that a busy moment on the machine
falls on all of them alike; medians are reported, with the 10th and 90th
percentiles. The first binary named is the baseline of the ratios.

    coldstart.py [--runs N] NAME=PATH [NAME=PATH ...]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NEXT = b"GET /2018-06-01/runtime/invocation/next"


def environment(runtime_api, home):
    # What the Lambda service sets, plus each binary's settings. Endpoint
    # and credentials are never used: nothing is invoked.
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "AWS_LAMBDA_FUNCTION_NAME": "coldstart",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_RUNTIME_API": runtime_api,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDCOLDSTART",
        "AWS_SECRET_ACCESS_KEY": "not-a-secret",
        "LEASE_BUCKET": "coldstart",
        "LEASE_KEY": "coldstart/lease",
        "LEASE_ENDPOINT": "http://127.0.0.1:9",
    }


def once(path, home):
    """Seconds from spawn to the first Runtime API request."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)
        port = listener.getsockname()[1]
        env = environment(f"127.0.0.1:{port}", home)
        start = time.perf_counter()
        proc = subprocess.Popen(
            [path], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                first = conn.recv(len(NEXT))
                elapsed = time.perf_counter() - start
                if not first.startswith(NEXT[: len(first)]) or not first:
                    raise SystemExit(f"{path}: unexpected first request {first!r}")
        except socket.timeout:
            proc.kill()
            _, err = proc.communicate()
            raise SystemExit(f"{path}: no Runtime API request within 10 s\n{err.decode()}")
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("binaries", nargs="+", metavar="NAME=PATH")
    args = parser.parse_args()
    binaries = []
    for spec in args.binaries:
        name, sep, path = spec.partition("=")
        if not sep or not os.access(path, os.X_OK):
            raise SystemExit(f"{spec}: expected NAME=PATH to an executable")
        binaries.append((name, path))

    times = {name: [] for name, _ in binaries}
    with tempfile.TemporaryDirectory() as home:
        for _, path in binaries:  # warm the page cache; not counted
            once(path, home)
        for run in range(args.runs):
            shift = run % len(binaries)
            for name, path in binaries[shift:] + binaries[:shift]:
                times[name].append(once(path, home))

    base_name = binaries[0][0]
    base_size = os.path.getsize(binaries[0][1])
    base_start = statistics.median(times[base_name])
    print(f"{args.runs} interleaved runs each; ratios against {base_name}")
    print(f"{'binary':<22}{'size':>12}{'ratio':>8}{'cold start p50':>16}{'p10':>9}{'p90':>9}{'ratio':>8}")
    for name, path in binaries:
        size = os.path.getsize(path)
        q = statistics.quantiles(times[name], n=10)
        p50 = statistics.median(times[name])
        print(
            f"{name:<22}{size / 1e6:>9.2f} MB{size / base_size:>8.2f}"
            f"{p50 * 1e3:>13.2f} ms{q[0] * 1e3:>6.2f} ms{q[-1] * 1e3:>6.2f} ms{p50 / base_start:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
