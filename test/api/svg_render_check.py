#!/usr/bin/env python3
"""Prove that a node's SVG draws in a real browser (headless Chromium).

    svg_render_check.py CHROMIUM FILE.svg OUT_DIR

1. The SVG is well-formed XML (xml.etree) with an <svg> root.
2. Chromium loads an HTML page with the SVG inline and dumps its DOM: every
   rect, text, line and path of the source is in the DOM.
3. Chromium screenshots the SVG file; the PNG (decoded here with zlib, no
   imaging library) must be large, not one colour, and show the colours the
   picture promises: the NVLink green and the fill of a held unit.

Only the Python standard library is used; exit status 1 on any failure.
"""
import collections
import os
import pathlib
import re
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
NVLINK = (0x76, 0xB9, 0x00)
KINDS = ("rect", "text", "line", "path")


def chromium(binary, *args):
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run([binary, *FLAGS, "--user-data-dir=" + profile, *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if run.returncode != 0:
        sys.stderr.write(run.stderr.decode(errors="replace")[-2000:])
        raise SystemExit("chromium exited with %d" % run.returncode)
    return run.stdout.decode(errors="replace")


def check_xml(svg_text):
    root = ET.fromstring(svg_text.encode())
    if root.tag != "{http://www.w3.org/2000/svg}svg":
        raise SystemExit("root element is %s, not svg" % root.tag)
    return collections.Counter(el.tag.split("}")[1] for el in root.iter())


def check_dom(binary, svg_text, counts, out_dir):
    body = re.sub(r"^<\?xml[^>]*>\s*", "", svg_text)
    page = out_dir / "page.html"
    page.write_text("<!DOCTYPE html><html><body>%s</body></html>" % body)
    dom = chromium(binary, "--dump-dom", page.as_uri())
    for kind in KINDS:
        seen = len(re.findall(r"<%s[\s>/]" % kind, dom))
        if seen != counts[kind]:
            raise SystemExit("DOM has %d <%s>, the SVG %d" % (seen, kind, counts[kind]))
    print("dom: %s" % ", ".join("%d %s" % (counts[k], k) for k in KINDS))


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def decode_png(data):
    """8-bit RGB or RGBA, non-interlaced: rows of (r, g, b) tuples."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise SystemExit("unsupported PNG: depth %d colour %d" % (depth, colour))
    bpp = 3 if colour == 2 else 4
    raw, stride, prev, rows = zlib.decompress(idat), width * bpp, None, []
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        up = prev or bytearray(stride)
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            c = up[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + (0, a, up[i], (a + up[i]) // 2, paeth(a, up[i], c))[kind]) & 0xFF
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def held_fill(svg_text):
    """The fill of the first core, GPU, MIG instance or shared-GPU replicas a pod holds."""
    fills = [m for m in re.findall(r'class="(?:core|gpu|mig|replicas)"[^>]*fill="#([0-9a-f]{6})"',
                                   svg_text)
             if m not in ("ffffff", "9e9e9e", "eceff1")]
    if not fills:
        raise SystemExit("the SVG shows no held unit")
    return tuple(int(fills[0][i:i + 2], 16) for i in (0, 2, 4))


def check_png(binary, svg_path, svg_text, out_dir):
    png = out_dir / "render.png"
    chromium(binary, "--screenshot=%s" % png, "--window-size=1200,900", svg_path.as_uri())
    width, height, rows = decode_png(png.read_bytes())
    pixels = collections.Counter(p for row in rows for p in row)
    total = width * height
    white = pixels.get((255, 255, 255), 0)
    if (width, height) != (1200, 900):
        raise SystemExit("screenshot is %dx%d" % (width, height))
    if len(pixels) < 16 or white > total * 0.98:
        raise SystemExit("the render looks blank: %d colours, %.1f%% white"
                         % (len(pixels), 100.0 * white / total))
    for name, colour in (("NVLink green", NVLINK), ("held unit", held_fill(svg_text))):
        if pixels.get(colour, 0) < 20:
            raise SystemExit("%s #%02x%02x%02x is not drawn" % ((name,) + colour))
    print("png: %dx%d, %d colours, %.1f%% non-white, NVLink and owner colours drawn"
          % (width, height, len(pixels), 100.0 * (total - white) / total))


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    binary, svg_path, out_dir = sys.argv[1], pathlib.Path(sys.argv[2]).resolve(), pathlib.Path(sys.argv[3])
    out_dir.mkdir(parents=True, exist_ok=True)
    svg_text = svg_path.read_text()
    counts = check_xml(svg_text)
    check_dom(binary, svg_text, counts, out_dir)
    check_png(binary, svg_path, svg_text, out_dir)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DBUS_SESSION_BUS_ADDRESS", "disabled:")
    sys.exit(main())
