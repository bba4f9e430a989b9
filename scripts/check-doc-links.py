#!/usr/bin/env python3
"""Check that every relative link in the repository's Markdown resolves.

For each tracked *.md file, every inline link or image [text](target) whose
target is not a URL must name an existing file or directory, relative to the
Markdown file; a #fragment must match a heading of the target file, slugged as
GitHub slugs it (lower case, punctuation dropped, spaces to hyphens, -1, -2 for
repeats). Links inside code blocks and inline code are not links, and a code
fence left open (which would swallow the rest of the file) is an error too.

    scripts/check-doc-links.py          check, print each broken link, exit 1 if any

scripts/test.sh runs it.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")


def prose_lines(text):
    """Yield (line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else "%s-%d" % (base, n))
        cache[path] = found
    return cache[path]


def check(md):
    broken = []
    text = md.read_text(encoding="utf-8")
    fences = [n for n, line in enumerate(text.split("\n"), 1) if FENCE.match(line)]
    if len(fences) % 2:
        broken.append("%s:%d: code fence never closed" % (md.relative_to(ROOT), fences[-1]))
    for number, line in prose_lines(text):
        for m in LINK.finditer(INLINE_CODE.sub("", line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            path_part, _, fragment = target.partition("#")
            dest = (md.parent / path_part).resolve() if path_part else md
            where = "%s:%d: %s" % (md.relative_to(ROOT), number, target)
            if not dest.exists():
                broken.append(where + ": no such file")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(where + ": no heading #" + fragment)
    return broken


def main():
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split("\0")
    broken = []
    for name in filter(None, files):
        path = ROOT / name
        if path.exists():
            broken += check(path)
    for b in broken:
        print(b)
    print("doc links: %d files, %s" % (len([f for f in files if f]), "%d broken" % len(broken) if broken else "all resolve"))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
