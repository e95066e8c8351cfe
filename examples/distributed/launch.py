"""Data-parallel training of the MLP across 2 processes on this machine, with ONE command:

    python examples/distributed/launch.py [--processes 2] [--devices-per-process 2]

starts the processes (``train.py``, each with its own CPU devices, talking over
loopback), waits for them (each bounded in time, every one stopped if one fails),
prints their losses and checks them against the same training in one process on one
device (``examples/data_parallel.py``). The step time across processes, ferrax against
JAX, is measured by bench/ (``bench/sharding_bench.py`` with ``bench/dp_worker.py``).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(processes, devices_per_process, steps, timeout):
    """Runs ``train.py`` (``steps`` training steps) in ``processes`` processes; returns
    their RESULT records."""
    address = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, JAX_NUM_CPU_DEVICES=str(devices_per_process), PYTHONUNBUFFERED="1")
    env.pop("XLA_FLAGS", None)
    procs = []
    try:
        for rank in range(processes):
            cmd = [sys.executable, os.path.join(HERE, "train.py"), "--coordinator", address,
                   "--num-processes", str(processes), "--process-id", str(rank), "--steps", str(steps)]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in procs):
            failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
            if failed:
                raise SystemExit(f"process {failed[0]} failed (exit code {procs[failed[0]].returncode}); "
                                 "stopping the others (see the output above)")
            if time.monotonic() > deadline:
                raise SystemExit(f"the processes did not finish within {timeout} s; stopping them")
            time.sleep(0.05)
        results = []
        for rank, p in enumerate(procs):
            if p.returncode != 0:
                raise SystemExit(f"process {rank} failed (exit code {p.returncode}); see its output above")
            out = p.stdout.read()
            records = [json.loads(ln[7:]) for ln in out.splitlines() if ln.startswith("RESULT ")]
            results.append(records[-1])
        return results
    finally:
        for p in procs:  # every process stops with the launcher, whatever happened
            if p.poll() is None:
                p.kill()
                p.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--devices-per-process", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()

    results = launch(args.processes, args.devices_per_process, args.steps, args.timeout)
    for r in results:
        ms = 1000 * sorted(r["step_seconds"][1:] or r["step_seconds"])[0]
        print(f"process {r['process']} (devices {r['devices']}):", " ".join(f"{v:.6f}" for v in r["losses"]),
              f"  (best step {ms:.2f} ms)")

    # The reference: the same training in this process, on one device.
    sys.path.insert(0, os.path.dirname(HERE))
    os.environ.pop("XLA_FLAGS", None)
    from data_parallel import train

    import numpy as np

    reference, _ = train(1, steps=args.steps)
    print("1 process, 1 device:", " ".join(f"{v:.6f}" for v in reference))
    for r in results:
        np.testing.assert_allclose(r["losses"], reference, rtol=1e-5)
    print(f"same losses on {args.processes} processes x {args.devices_per_process} devices as on 1 device")


if __name__ == "__main__":
    main()
