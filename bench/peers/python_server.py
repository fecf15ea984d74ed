"""Python's standard-library peer: ThreadingHTTPServer answering "Hello, World!" on GET /.
Usage: python3 python_server.py PORT"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b"Hello, World!"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hello).serve_forever()
