#!/usr/bin/env python3
"""Screenshots `saker serve`'s directory listing in headless Chromium, to look at it as a person
would. Builds saker, makes a small tree (nested directories, names with spaces, unicode, HTML
characters, sizes from bytes to gigabytes via sparse files), serves it on a free loopback port
and writes PNGs of the root and a nested listing, in light and dark mode.

Usage: tests/browser/listing_screenshot.py [OUT_DIR]   (default: zig-out/screenshots)
Installs Debian's `chromium` when it is missing. Exits non-zero if a screenshot is missing or
empty, or if the page does not carry the expected escaped names.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ensure_chromium():
    """Chromium, and a font with CJK glyphs so unicode names render as text, not boxes."""
    missing = []
    if not shutil.which("chromium"):
        missing.append("chromium")
    if not os.path.exists("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"):
        missing.append("fonts-wqy-zenhei")
    if missing:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq"] + missing, check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return shutil.which("chromium")


def make_tree(base):
    def write(path, data=b"x", size=None):
        full = os.path.join(base, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
            if size is not None:
                f.truncate(size)
    for d in ["assets/css", "assets/img", "docs/guides", "Downloads", "ünïcödé 目录", "empty"]:
        os.makedirs(os.path.join(base, d), exist_ok=True)
    write("README.md", b"# Project\n" * 40)
    write("index.htm.bak", b"<html></html>")
    write("notes with spaces.txt", b"hello " * 300)
    write("<img src=x onerror=alert(1)>.html", b"<b>not run</b>")
    write("report & summary \"2026\".pdf", size=3_400_000)
    write("backup.tar.gz", size=5 * 1024 ** 3)
    write("photo-001.jpg", size=2_350_000)
    write("data.json", b'{"a": 1}\n')
    write(".hidden-config", b"secret")
    write("docs/guides/getting-started.md", b"# Start\n")
    write("docs/guides/deploying on linux.md", b"# Deploy\n" * 100)
    write("docs/guides/日本語のガイド.txt", b"guide\n")
    write("docs/changelog.txt", b"v1\n" * 5000)


def main():
    out_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "zig-out", "screenshots"))
    os.makedirs(out_dir, exist_ok=True)
    chromium = ensure_chromium()
    if not chromium:
        sys.exit("chromium is not available")
    subprocess.run([os.path.join(ROOT, "zigw"), "build"], cwd=ROOT, check=True)
    saker = os.path.join(ROOT, "zig-out", "bin", "saker")
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "site")
        make_tree(tree)
        server = subprocess.Popen([saker, "serve", tree, "--port", "0", "--access-log", "off"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            line = server.stdout.readline().strip()
            prefix = "listening on "
            if not line.startswith(prefix):
                sys.exit(f"unexpected first line from saker: {line!r}")
            base = line[len(prefix):]
            html = urllib.request.urlopen(base + "/").read().decode()
            for needle in ["&lt;img src=x onerror=alert(1)&gt;.html", "5.0 GiB", "ünïcödé 目录/",
                           "report &amp; summary &quot;2026&quot;.pdf"]:
                if needle not in html:
                    sys.exit(f"listing is missing {needle!r}")
            if "hidden-config" in html:
                sys.exit("listing shows a dotfile")
            shots = [("listing-root.png", base + "/", []),
                     ("listing-nested.png", base + "/docs/guides/", []),
                     ("listing-root-dark.png", base + "/", ["--force-dark-mode", "--blink-settings=preferredColorScheme=0"])]
            for name, url, extra in shots:
                path = os.path.join(out_dir, name)
                if os.path.exists(path):
                    os.remove(path)
                profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp)
                subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                "--disable-background-networking", "--disable-component-update",
                                "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                                "--hide-scrollbars", "--window-size=1100,760",
                                f"--screenshot={path}"] + extra + [url],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
                if not os.path.exists(path) or os.path.getsize(path) < 5000:
                    sys.exit(f"screenshot {path} is missing or empty")
                print(f"wrote {path} ({os.path.getsize(path)} bytes)")
        finally:
            server.send_signal(2)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
        if server.returncode != 0:
            sys.exit(f"saker exited with {server.returncode} after SIGINT")
    print("ok")


if __name__ == "__main__":
    main()
