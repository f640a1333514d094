"""Every relative link in README.md and docs/ resolves: the file exists, and so does the heading it names."""

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    seen, out = Counter(), set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        out.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return out


def test_every_link_in_the_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked here
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_anchors_follow_githubs_rule(tmp_path):
    page = tmp_path / "p.md"
    lines = ["# How vcl is built", "### `gal_uci_quick.json`", "## On a GPU", "## On a GPU"]
    lines += ["```", "# not a heading", "```"]
    page.write_text("\n".join(lines) + "\n")
    assert anchors(page) == {"how-vcl-is-built", "gal_uci_quickjson", "on-a-gpu", "on-a-gpu-1"}
