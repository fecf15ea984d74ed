#!/usr/bin/env python3
"""Checks HTTP/2 in a real browser: headless Chromium loads a page with 50 assets (images,
stylesheets, scripts) from `saker serve --tls-self-signed`, and the page itself reports the
protocol each one came over (`performance.getEntriesByType('resource')[i].nextHopProtocol`, and
the navigation's own). Every one must be "h2", and every asset must have loaded.

Usage: tests/browser/h2_assets.py
Installs Debian's chromium when it is missing. Only loopback addresses are used. Exit status 0
when every check passed; otherwise the failure is printed and the status is 1.
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSETS = 50
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--ignore-certificate-errors",
                  "--virtual-time-budget=10000"]
# A 1x1 PNG.
PIXEL = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                      "0000000d4944415478da63f8cfc0f01f0005000201a5f1d9a20000000049454e44ae426082")


def ensure_chromium():
    if not shutil.which("chromium"):
        print("browser: installing chromium from Debian", file=sys.stderr)
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "chromium"], check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    return shutil.which("chromium")


def make_site(site):
    os.makedirs(os.path.join(site, "assets"))
    tags = []
    for i in range(ASSETS):
        kind = i % 3
        if kind == 0:
            name = f"img{i}.png"
            with open(os.path.join(site, "assets", name), "wb") as f:
                f.write(PIXEL)
            tags.append(f'<img src="assets/{name}" alt="">')
        elif kind == 1:
            name = f"style{i}.css"
            with open(os.path.join(site, "assets", name), "w") as f:
                f.write(f".c{i} {{ color: #{i:06x}; }}\n")
            tags.append(f'<link rel="stylesheet" href="assets/{name}">')
        else:
            name = f"script{i}.js"
            with open(os.path.join(site, "assets", name), "w") as f:
                f.write(f"window.loaded = (window.loaded || 0) + 1; // {i}\n")
            tags.append(f'<script src="assets/{name}"></script>')
    report = """<script>
window.addEventListener("load", () => {
  const resources = performance.getEntriesByType("resource");
  const navigation = performance.getEntriesByType("navigation")[0];
  const out = document.getElementById("report");
  out.textContent = "navigation=" + navigation.nextHopProtocol + " resources=" + resources.length +
    " protocols=" + [...new Set(resources.map(r => r.nextHopProtocol))].join(",") +
    " scripts=" + window.loaded;
});
</script>"""
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write("<!doctype html><html><head><meta charset=utf-8><title>h2</title></head><body>\n"
                + "\n".join(tags) + '\n<pre id="report">pending</pre>\n' + report + "\n</body></html>\n")


def main():
    chromium = ensure_chromium()
    if not chromium:
        sys.exit("chromium is not available")
    subprocess.run([os.path.join(ROOT, "zigw"), "build"], cwd=ROOT, check=True)
    saker = os.path.join(ROOT, "zig-out", "bin", "saker")
    with tempfile.TemporaryDirectory() as tmp:
        site = os.path.join(tmp, "site")
        make_site(site)
        server = subprocess.Popen([saker, "serve", site, "--port", "0", "--tls-self-signed", "--access-log", "off"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            line = server.stdout.readline().strip()
            prefix = "listening on https://"
            if not line.startswith(prefix):
                print(f"FAILED: unexpected first line from saker: {line!r}", file=sys.stderr)
                return 1
            url = "https://" + line[len(prefix):] + "/index.html"
            profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp)
            dom = subprocess.run([chromium] + CHROMIUM_FLAGS + [f"--user-data-dir={profile}", "--dump-dom", url],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120, check=True).stdout.decode()
            scripts = len([i for i in range(ASSETS) if i % 3 == 2])
            expected = f"navigation=h2 resources={ASSETS} protocols=h2 scripts={scripts}"
            if expected not in dom:
                start = dom.find('id="report"')
                print(f"FAILED: the page reported {dom[start:start + 200]!r}, expected {expected!r}", file=sys.stderr)
                return 1
        finally:
            server.send_signal(2)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
    print(f"ok: {expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
