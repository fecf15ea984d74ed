#!/usr/bin/env python3
"""Checks `saker serve`'s directory listing in headless Chromium, as a person would see it.

Builds saker, makes a small tree (nested directories, names with spaces, unicode, HTML and URL
characters, sizes from bytes to gigabytes via sparse files, dates years apart), serves it on a
free loopback port, then:

- reads each listing page's DOM as Chromium built it (--dump-dom) and checks it: rows in the
  right order (parent link, then directories, then files, case-insensitively by name), every
  name shown as its exact text (no markup from a name survives), every link -- rows, parent,
  breadcrumbs -- resolving to the right file or directory with the right size, sizes and dates
  as the file system has them, the footer's counts, no script, image or external reference;
- takes PNG screenshots (root light and dark, nested, narrow window) and checks their size and
  background colour (light page white, dark page dark).

Usage: tests/browser/listing_screenshot.py [OUT_DIR]   (default: zig-out/screenshots)
Installs Debian's `chromium` (and a CJK font) when missing. Exit status 0 when every check
passed; otherwise the first failed check is printed and the status is 1.
"""
import calendar
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--hide-scrollbars"]


class CheckFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CheckFailed(message)


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


def at(text):
    """Seconds since the epoch of a UTC "YYYY-MM-DD HH:MM"."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M"))


# (path, content or None for a sparse file, size, modified) -- directories end in "/".
TREE = [
    ("assets/", None, 0, "2026-03-02 10:15"),
    ("assets/css/", None, 0, "2026-03-02 10:15"),
    ("docs/", None, 0, "2026-10-30 17:02"),
    ("docs/guides/", None, 0, "2026-11-20 08:45"),
    ("Downloads/", None, 0, "2025-12-24 19:30"),
    ("ünïcödé 目录/", None, 0, "2026-01-05 12:00"),
    ("empty folder/", None, 0, "2024-07-01 00:00"),
    ("README.md", b"# Project\n" * 40, None, "2026-11-21 09:12"),
    ("index.htm.bak", b"<html></html>", None, "2023-02-28 23:59"),
    ("notes with spaces.txt", b"hello " * 300, None, "2026-06-15 14:30"),
    ("<img src=x onerror=alert(1)>.html", b"<b>not run</b>", None, "2026-11-22 03:21"),
    ("report & summary \"2026\".pdf", None, 3_400_000, "2026-09-09 09:09"),
    ("100% #1?.txt", b"percent\n", None, "2026-08-01 08:00"),
    ("backup.tar.gz", None, 5 * 1024 ** 3, "2025-11-11 11:11"),
    ("photo-001.jpg", None, 2_350_000, "2026-05-17 18:42"),
    ("data.json", b'{"a": 1}\n', None, "2026-11-23 22:05"),
    ("Zebra.txt", b"z\n", None, "2026-04-01 07:00"),
    (".hidden-config", b"secret", None, "2026-01-01 00:00"),
    ("docs/guides/getting-started.md", b"# Start\n", None, "2026-11-20 08:40"),
    ("docs/guides/deploying on linux.md", b"# Deploy\n" * 100, None, "2026-11-19 16:20"),
    ("docs/guides/日本語のガイド.txt", b"guide\n", None, "2026-11-18 10:00"),
    ("docs/changelog.txt", b"v1\n" * 5000, None, "2026-10-30 17:01"),
]


def make_tree(base):
    for path, data, size, modified in TREE:
        full = os.path.join(base, path)
        if path.endswith("/"):
            os.makedirs(full, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            if data is not None:
                f.write(data)
            else:
                f.truncate(size)
    # Directory times last: creating entries inside changes them. Deepest first.
    for path, _, _, modified in sorted(TREE, key=lambda entry: -entry[0].count("/")):
        os.utime(os.path.join(base, path), (at(modified), at(modified)))


def human_size(size):
    """The listing's size format: "0 B", "1023 B", "1.5 KiB", "10 KiB", "5.0 GiB"."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    unit = 0
    while value >= 1024 and unit + 1 < len(units):
        value /= 1024
        unit += 1
    return f"{value:.1f} {units[unit]}" if value < 10 else f"{value:.0f} {units[unit]}"


def expected_rows(tree_dir, relative):
    """What a listing of `relative` must show: directories first, then ASCII case-insensitive
    order, then bytewise; dotfiles hidden."""
    directory = os.path.join(tree_dir, relative)
    rows = []
    for name in os.listdir(directory):
        if name.startswith("."):
            continue
        st = os.stat(os.path.join(directory, name))
        is_dir = os.path.isdir(os.path.join(directory, name))
        rows.append({"name": name, "dir": is_dir, "size": st.st_size,
                     "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime(st.st_mtime))})
    rows.sort(key=lambda r: (not r["dir"], r["name"].encode().lower(), r["name"].encode()))
    return rows


class ListingParser(html.parser.HTMLParser):
    """Breadcrumbs, table rows (cells' text and links), footer, and anything active."""

    def __init__(self):
        super().__init__()
        self.crumbs = []  # (text, href or None)
        self.rows = []  # {"class", "cells": [text...], "href"}
        self.footer = ""
        self.title = ""
        self.active = []  # script/img/iframe/object/embed/link tags, src= attributes
        self.stack = []
        self.in_h1 = False
        self.crumb = None
        self.row = None
        self.cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe", "object", "embed", "link", "base", "form"):
            self.active.append(tag)
        if "src" in attrs or any(name.startswith("on") for name in attrs):
            self.active.append(f"{tag} with {sorted(attrs)}")
        self.stack.append(tag)
        if tag == "h1":
            self.in_h1 = True
        elif self.in_h1 and tag in ("a", "span") and attrs.get("class") not in ("sep", "label"):
            self.crumb = [attrs.get("href"), ""]
        elif tag == "tr" and "tbody" in self.stack:
            self.row = {"class": attrs.get("class", ""), "cells": [], "href": None}
        elif tag == "td" and self.row is not None:
            self.cell = ""
        elif tag == "a" and self.row is not None:
            self.row["href"] = attrs.get("href")

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass
        if tag == "h1":
            self.in_h1 = False
        elif self.in_h1 and tag in ("a", "span") and self.crumb is not None:
            self.crumbs.append((self.crumb[1], self.crumb[0]))
            self.crumb = None
        elif tag == "td" and self.row is not None:
            self.row["cells"].append(self.cell.strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.rows.append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.crumb is not None:
            self.crumb[1] += data
        if self.cell is not None:
            self.cell += data
        if self.stack and self.stack[-1] == "footer":
            self.footer += data
        if self.stack and self.stack[-1] == "title":
            self.title += data


def chromium_run(chromium, profile_root, args, timeout=120):
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=profile_root)
    return subprocess.run([chromium] + CHROMIUM_FLAGS + [f"--user-data-dir={profile}"] + args,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=timeout, check=True)


def decoded_path(url):
    """The percent-decoded path of `url`; None when it has a query or a fragment (a name's
    '?' or '#' left unencoded in a link)."""
    parts = urllib.parse.urlsplit(url)
    if parts.query or parts.fragment:
        return None
    return urllib.parse.unquote(parts.path)


def head(url):
    request = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.headers


def get_text(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read().decode()


def check_listing(chromium, tmp, base, tree_dir, relative):
    """The DOM of the listing of `relative` ("" or "a/b/"), as Chromium parsed it."""
    page_url = base + "/" + urllib.parse.quote(relative)
    dom = chromium_run(chromium, tmp, ["--dump-dom", page_url]).stdout.decode()
    parser = ListingParser()
    parser.feed(dom)
    where = f"listing of /{relative}"
    check(not parser.active, f"{where}: active content in the page: {parser.active}")
    check(parser.title == f"Index of /{relative}", f"{where}: title {parser.title!r}")

    # Breadcrumbs: "/" then each segment; each links to its directory, the last is not a link.
    segments = [s for s in relative.split("/") if s]
    check([text for text, _ in parser.crumbs] == ["/"] + segments,
          f"{where}: breadcrumbs {parser.crumbs}")
    for depth, (text, href) in enumerate(parser.crumbs):
        if depth == len(segments):
            check(href is None, f"{where}: the current directory's crumb {text!r} is a link")
            continue
        target = urllib.parse.urljoin(page_url, href)
        wanted = "/" + "".join(s + "/" for s in segments[:depth])
        check(decoded_path(target) == wanted, f"{where}: crumb {text!r} -> {target}, wanted {wanted}")
        status, body = get_text(target)
        check(status == 200 and "Index of /" in body, f"{where}: crumb {text!r} does not load")

    rows = parser.rows
    if relative:
        parent = rows.pop(0)
        check(parent["cells"][0] == "Parent directory", f"{where}: first row {parent}")
        parent_path = "/" + "".join(s + "/" for s in segments[:-1])
        check(decoded_path(urllib.parse.urljoin(page_url, parent["href"])) == parent_path,
              f"{where}: parent link {parent['href']}")
    expected = expected_rows(tree_dir, relative)
    shown = [row["cells"][0] for row in rows]
    wanted = [r["name"] + ("/" if r["dir"] else "") for r in expected]
    check(shown == wanted, f"{where}: rows\n  shown  {shown}\n  wanted {wanted}")
    for row, entry in zip(rows, expected):
        name = entry["name"]
        check(("dir" in row["class"].split()) == entry["dir"], f"{where}: {name!r} row class {row['class']!r}")
        check(row["cells"][1] == ("—" if entry["dir"] else human_size(entry["size"])),
              f"{where}: {name!r} size {row['cells'][1]!r}, file has {entry['size']} bytes")
        check(row["cells"][2] == entry["date"], f"{where}: {name!r} date {row['cells'][2]!r}, wanted {entry['date']}")
        target = urllib.parse.urljoin(page_url, row["href"])
        wanted_path = "/" + relative + name + ("/" if entry["dir"] else "")
        check(decoded_path(target) == wanted_path, f"{where}: {name!r} links to {target}, wanted {wanted_path}")
        status, headers = head(target)
        check(status == 200, f"{where}: {name!r} link answers {status}")
        if not entry["dir"]:
            check(int(headers["Content-Length"]) == entry["size"],
                  f"{where}: {name!r} link serves {headers['Content-Length']} bytes, file has {entry['size']}")
    dirs = sum(1 for r in expected if r["dir"])
    files = len(expected) - dirs
    footer = f"{dirs} director{'y' if dirs == 1 else 'ies'}, {files} file{'' if files == 1 else 's'}"
    check(parser.footer.strip() == footer, f"{where}: footer {parser.footer!r}, wanted {footer!r}")
    print(f"ok: {where}: {len(expected)} rows, links, sizes, dates, breadcrumbs")


def png_info(path):
    """Width, height and the RGB colour of pixel (4, 4) of an 8-bit RGB/RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG")
    offset, idat, width = 8, b"", 0
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        chunk = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            check(depth == 8 and colour in (2, 6) and interlace == 0, f"{path}: unexpected PNG format")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        offset += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(5):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, up_left = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(line)
        previous = line
    pixel = tuple(rows[4][4 * channels:4 * channels + 3])
    return width, height, pixel


def take_screenshots(chromium, tmp, base, out_dir):
    shots = [
        ("listing-root.png", "/", "1100,760", [], "light"),
        ("listing-nested.png", "/docs/guides/", "1100,500", [], "light"),
        ("listing-root-dark.png", "/", "1100,760", ["--force-dark-mode", "--blink-settings=preferredColorScheme=0"], "dark"),
        ("listing-narrow.png", "/", "420,900", [], "light"),
    ]
    for name, path, size, extra, scheme in shots:
        out = os.path.join(out_dir, name)
        if os.path.exists(out):
            os.remove(out)
        chromium_run(chromium, tmp, [f"--window-size={size}", f"--screenshot={out}"] + extra + [base + path])
        check(os.path.exists(out) and os.path.getsize(out) > 5000, f"screenshot {out} is missing or empty")
        width, height, pixel = png_info(out)
        check(f"{width},{height}" == size, f"{out}: {width}x{height}, asked for {size}")
        if scheme == "light":
            check(min(pixel) >= 245, f"{out}: light page background is {pixel}")
        else:
            check(max(pixel) <= 40, f"{out}: dark page background is {pixel}")
        print(f"wrote {out} ({os.path.getsize(out)} bytes, background {pixel})")


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
            check(line.startswith(prefix), f"unexpected first line from saker: {line!r}")
            base = line[len(prefix):]
            for relative in ["", "docs/", "docs/guides/", "ünïcödé 目录/"]:
                check_listing(chromium, tmp, base, tree, relative)
            take_screenshots(chromium, tmp, base, out_dir)
        except (CheckFailed, urllib.error.URLError, subprocess.SubprocessError) as failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            return 1
        finally:
            server.send_signal(2)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
        if server.returncode != 0:
            print(f"FAILED: saker exited with {server.returncode} after SIGINT", file=sys.stderr)
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
