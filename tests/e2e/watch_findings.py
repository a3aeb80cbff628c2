"""Prints the open findings a Watch stream's initial state holds, one line each:
RULE NODE DEVICE SEVERITY START_UNIX_NANOS. Used by the e2e tests to read the Query API of a real
exporter without a generated gRPC stub (the message classes come from protoc --python_out).

Usage: watch_findings.py HOST:PORT [SECONDS] [--reports] [--ca CA --cert CERT --key KEY
[--server-name N]]
Waits at most SECONDS (default 5) for the stream's first events, then prints what it got. With
--reports it asks for reports too and watches for the whole SECONDS, printing each report as
"report NODE SEQUENCE recorded|unrecorded" (WatchEvent.unrecorded) before the findings. With
--ca, over TLS (mutual with --cert and --key). A refusal prints "watch failed: CODE: DETAILS" on
stderr and exits 1.
"""
import argparse
import sys
import threading

import grpc
from accelmon.v1 import diagnostics_pb2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("seconds", nargs="?", type=float, default=5.0)
    parser.add_argument("--ca")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--server-name")
    parser.add_argument("--reports", action="store_true")
    args = parser.parse_args()
    address, seconds = args.address, args.seconds
    if args.ca:
        read = lambda path: open(path, "rb").read() if path else None
        credentials = grpc.ssl_channel_credentials(read(args.ca), read(args.key), read(args.cert))
        options = [("grpc.ssl_target_name_override", args.server_name)] if args.server_name else []
        channel = grpc.secure_channel(address, credentials, options)
    else:
        channel = grpc.insecure_channel(address)
    watch = channel.unary_stream(
        "/accelmon.v1.Query/Watch",
        request_serializer=diagnostics_pb2.WatchRequest.SerializeToString,
        response_deserializer=diagnostics_pb2.WatchEvent.FromString)
    stream = watch(diagnostics_pb2.WatchRequest(initial_state=True, reports=args.reports),
                   timeout=seconds)
    findings = []
    reports = []
    # The initial state arrives at once; the stream then stays open for later events, so the
    # call's deadline ends it.
    timer = threading.Timer(seconds if args.reports else min(seconds, 1.0), stream.cancel)
    timer.start()
    try:
        for event in stream:
            if event.HasField("finding") and not event.finding.HasField("end"):
                findings.append(event.finding)
            elif event.HasField("report"):
                reports.append(event)
    except grpc.RpcError as e:
        if e.code() not in (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED):
            print(f"watch failed: {e.code()}: {e.details()}", file=sys.stderr)
            return 1
    finally:
        timer.cancel()
    for e in reports:
        state = "unrecorded" if e.unrecorded else "recorded"
        print(f"report {e.report.node} {e.report.sequence} {state}")
    for f in findings:
        start = f.start.seconds * 10**9 + f.start.nanos
        print(f"{f.rule} {f.node} {f.device or '-'} {f.severity} {start}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
