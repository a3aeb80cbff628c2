#!/usr/bin/env python3
"""A stand-in for Alertmanager in the e2e tests: takes what a rule engine (vmalert, Prometheus)
POSTs to /api/v2/alerts and appends each alert to a JSON Lines file, one line per alert per
notification, so a test can say which alerts were sent and how often.

    alert_receiver.py OUT.jsonl     # listens on 127.0.0.1, a port the kernel picks;
                                    # prints "listening on port N" once it accepts

Standard library only.
"""
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            alerts = json.loads(body)
        except ValueError:
            self.send_response(400)
            self.end_headers()
            return
        with open(self.server.out, "a", encoding="utf-8") as f:
            for alert in alerts if isinstance(alerts, list) else [alerts]:
                f.write(json.dumps({"path": self.path, "alert": alert}, sort_keys=True) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def main():
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    server.out = sys.argv[1]
    print("listening on port %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
