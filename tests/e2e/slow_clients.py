#!/usr/bin/env python3
"""Holds slow HTTP(S) clients against an exporter while scraping /metrics.

Each slow client connects (and finishes the TLS handshake on an https URL), then sends a request
header one byte a second and never finishes it; when the server closes it, it connects again, as
a scanner or a broken proxy would. Meanwhile /metrics is scraped every 200 ms. Exits 1 when a
scrape fails or takes longer than --max-scrape-seconds, and prints what it saw.
"""
import argparse
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import urllib.request

HEADER = b"GET /metrics HTTP/1.1\r\nHost: slow.test\r\nUser-Agent: slowloris\r\nX-Padding: " + b"a" * 4096


def connect(url, context):
    sock = socket.create_connection((url.hostname, url.port), timeout=5)
    if url.scheme == "https":
        sock = context.wrap_socket(sock, server_hostname=url.hostname)
    return sock


def slow_client(url, context, stop, stats):
    while not stop.is_set():
        try:
            sock = connect(url, context)
        except OSError:
            stats["connect_failures"] += 1
            stop.wait(0.5)
            continue
        stats["connections"] += 1
        try:
            for i in range(len(HEADER)):
                if stop.is_set():
                    break
                sock.sendall(HEADER[i : i + 1])
                stop.wait(1.0)
        except OSError:
            stats["closed_by_server"] += 1  # the read timeout did its job
        finally:
            sock.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url", help="the /metrics URL (http or https)")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=12)
    parser.add_argument("--max-scrape-seconds", type=float, default=1.0)
    parser.add_argument("--cafile")
    parser.add_argument("--scrapes", type=int, default=0,
                        help="stop after this many scrapes instead of after --seconds")
    parser.add_argument("--expect", default="accelmon_exporter_",
                        help="text every scrape's body must hold")
    parser.add_argument("--connect-seconds", type=float, default=20,
                        help="how long the slow clients may take to connect")
    args = parser.parse_args()
    url = urllib.parse.urlparse(args.url)
    context = ssl.create_default_context(cafile=args.cafile) if url.scheme == "https" else None

    stop = threading.Event()
    stats = {"connections": 0, "closed_by_server": 0, "connect_failures": 0}
    threads = [threading.Thread(target=slow_client, args=(url, context, stop, stats), daemon=True)
               for _ in range(args.clients)]
    for t in threads:
        t.start()
    # Every slow client holds its connection before the first scrape that counts.
    deadline = time.monotonic() + args.connect_seconds
    while stats["connections"] < args.clients and time.monotonic() < deadline:
        time.sleep(0.05)
    if stats["connections"] < args.clients:
        print(f"only {stats['connections']} of {args.clients} slow clients connected", file=sys.stderr)
        return 1

    scrapes, worst, failures = 0, 0.0, []
    end = time.monotonic() + args.seconds
    while (scrapes < args.scrapes) if args.scrapes else (time.monotonic() < end):
        began = time.monotonic()
        try:
            with urllib.request.urlopen(args.url, timeout=10, context=context) as answer:
                body = answer.read()
                if answer.status != 200 or args.expect.encode() not in body:
                    failures.append(f"status {answer.status}, {len(body)} bytes")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failures.append(repr(e))
        took = time.monotonic() - began
        worst = max(worst, took)
        scrapes += 1
        if took > args.max_scrape_seconds:
            failures.append(f"a scrape took {took:.2f}s")
        time.sleep(0.2)
    stop.set()
    print(f"{args.clients} slow clients ({stats['connections']} connections, "
          f"{stats['closed_by_server']} closed by the server): {scrapes} scrapes, "
          f"slowest {worst:.3f}s, {len(failures)} failed")
    for f in failures[:10]:
        print("  " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
