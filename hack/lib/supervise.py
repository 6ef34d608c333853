#!/usr/bin/env python3
"""Holds a local cluster's lifetime for hack/control-plane.sh: one supervisor per cluster.

It keeps what the cluster holds for as long as the cluster lives, and stops the cluster
when that life ends:

- the API server's port: a TCP socket bound with SO_REUSEPORT to ADDRESS:0 and never
  listened on. The kernel picks the port and never hands it to another bind while the
  socket stays bound; kube-apiserver, run with --permit-port-sharing, binds the same port
  beside it (again after a restart). The port is written to STATE/run/supervisor.port.
- the machine's node lock (hack/lib/node-lock.sh), when the cluster has a real node: the
  start script opens and locks it, and this process inherits the descriptor and keeps it.
- the owner: with --owner PID:STARTTIME the cluster belongs to that process (a test binary,
  `make run`). When it exits, however it exits (Ctrl-C, a panic, SIGKILL), the supervisor
  runs `hack/control-plane.sh stop` itself, then exits. Without an owner the cluster lives
  until `hack/control-plane.sh stop`.

SIGTERM, SIGINT and SIGHUP also stop the cluster. `hack/control-plane.sh stop`, when it is
not run by this process, ends it with SIGUSR1 after it stopped everything else. Its status
(running, stopping) is in STATE/run/supervisor.status and, for a node, in the node lock's
record, so that a leftover check can wait for a stop in progress. Run by
hack/control-plane.sh start, never by hand; its output is STATE/logs/supervisor.log.
"""

import argparse
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time


def log(message):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(f"{stamp} supervisor: {message}", flush=True)


def write_atomically(path, text):
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def start_time(pid):
    """The start time of process PID (field 22 of /proc/PID/stat), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat[stat.rindex(")") + 2 :].split()[19]


def watch_owner(owner):
    """A pidfd of the owner, readable once it exits; None when it is already gone."""
    pid, started = owner.split(":", 1)
    try:
        fd = os.pidfd_open(int(pid))
    except ProcessLookupError:
        return None
    # The pid may have been reused between the start script reading it and now.
    if start_time(int(pid)) != started:
        os.close(fd)
        return None
    return fd


def set_record_status(record, status):
    """Rewrites the status= line of the node lock's record, if the record is this cluster's."""
    if not record:
        return
    try:
        with open(record, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    if f"supervisor={os.getpid()}" not in lines:
        return
    lines = [f"status={status}" if line.startswith("status=") else line for line in lines]
    # In place: the file is the lock itself, so it must stay the same inode.
    with open(record, "r+", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.truncate()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True, help="the cluster's state directory")
    parser.add_argument("--script", required=True, help="hack/control-plane.sh")
    parser.add_argument("--owner", help="PID:STARTTIME of the process the cluster belongs to")
    parser.add_argument("--reserve", help="the address whose port the API server gets")
    parser.add_argument("--record", help="the node lock's file, whose status= line this keeps")
    parser.add_argument(
        "--discard-state",
        action="store_true",
        help="remove the state directory after a stop this process ran (a test's)",
    )
    args = parser.parse_args()
    run = os.path.join(args.state, "run")

    # Signals arrive through a pipe, so that one select waits for them and for the owner.
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    received = []

    def on_signal(signum, _frame):
        received.append(signum)
        try:
            os.write(wake_write, b"s")
        except BlockingIOError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(signum, on_signal)

    reservation = None
    if args.reserve:
        reservation = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        reservation.bind((args.reserve, 0))
        port = reservation.getsockname()[1]
        write_atomically(os.path.join(run, "supervisor.port"), f"{port}\n")
        log(f"holding {args.reserve}:{port} for the API server")
    write_atomically(os.path.join(run, "supervisor.status"), "running\n")

    owner = None
    if args.owner:
        owner = watch_owner(args.owner)
        log(f"the cluster belongs to pid {args.owner.split(':')[0]}")
    watched = [wake_read] + ([owner] if owner is not None else [])
    owner_gone = args.owner is not None and owner is None
    while not owner_gone and not received:
        readable, _, _ = select.select(watched, [], [])
        owner_gone = owner is not None and owner in readable
        if wake_read in readable:
            os.read(wake_read, 64)

    if signal.SIGUSR1 in received and not owner_gone:
        log("the cluster was stopped; exiting")
        return 0
    why = "its owner exited" if owner_gone else f"signal {signal.Signals(received[0]).name}"
    log(f"{why}: stopping the cluster")
    write_atomically(os.path.join(run, "supervisor.status"), "stopping\n")
    set_record_status(args.record, "stopping")
    env = dict(os.environ, CONTROL_PLANE_DIR=args.state, CONTROL_PLANE_TEARDOWN="1")
    env.pop("CONTROL_PLANE_OWNER", None)
    status = subprocess.run([args.script, "stop"], env=env, check=False).returncode
    log(f"{args.script} stop exited {status}")
    if args.discard_state and owner_gone:
        shutil.rmtree(args.state, ignore_errors=True)
        log(f"removed {args.state}")
    del reservation
    return status


if __name__ == "__main__":
    sys.exit(main())
