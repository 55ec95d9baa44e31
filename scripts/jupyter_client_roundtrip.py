#!/usr/bin/python3
"""Peer baseline for `envforge bench interpreter`: the execute("1+1") round trip of Jupyter's own
Python client (jupyter_client, Debian's python3-jupyter-client) against a local ipykernel, no
sandbox. Prints one JSON object. Run with /usr/bin/python3.

    /usr/bin/python3 scripts/jupyter_client_roundtrip.py [--executes 400] [--envforge-flags]

--envforge-flags starts the kernel with the flags envforge gives its kernels
(--HistoryManager.enabled=False), which alone saves about 2 ms per execute.
"""

import argparse
import json
import time

import jupyter_client


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executes", type=int, default=400)
    parser.add_argument("--envforge-flags", action="store_true")
    args = parser.parse_args()
    extra = ["--HistoryManager.enabled=False"] if args.envforge_flags else []
    manager = jupyter_client.KernelManager(kernel_name="python3")
    manager.start_kernel(extra_arguments=extra)
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    samples = []
    try:
        for _ in range(args.executes):
            start = time.perf_counter()
            msg_id = client.execute("1+1")
            client.get_shell_msg(timeout=10)
            while True:  # the request is done when the kernel reports idle for it
                message = client.get_iopub_msg(timeout=10)
                if (message["msg_type"] == "status" and message["content"]["execution_state"] == "idle"
                        and message["parent_header"].get("msg_id") == msg_id):
                    break
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    samples = sorted(samples[len(samples) // 4:])  # the first quarter warms the kernel up
    pick = lambda q: round(samples[min(len(samples) - 1, round(q * (len(samples) - 1)))], 3)
    print(json.dumps({"client": "jupyter_client " + jupyter_client.__version__, "envforge_flags": args.envforge_flags,
                      "execute_round_trip_ms": {"p50": pick(0.5), "p99": pick(0.99), "n": len(samples)}}))


if __name__ == "__main__":
    main()
