"""Parse one release body (Markdown) into bug-fix entries with a real Markdown parser.

A fix section opens at a heading that matches one of the configured patterns ("Bug Fixes" at any
level, PyTorch's patch-release "Critical Fixes" ...) and closes at the next heading of the same or a
higher level. Inside it, bullets are entries and the nearest sub-heading is their area; a release
that writes its fixes as headings (v1.5.1) has heading entries, recognised because they cite a
reference or are not followed by a list. Code blocks and raw HTML never produce entries.
"""
import hashlib
import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

DEFAULT_SECTION_PATTERNS = (
    r"\bbug\s*-?\s*fix(es)?\b",
    r"^critical fixes$",
    r"^crashes and error fixes$",
    r"^other fixes$",
)

_PULL_HREF = re.compile(r"github\.com/[^/\s]+/[^/\s]+/pull/(\d+)")
_BARE_REFS = re.compile(r"\((#\d+(?:\s*,\s*#\d+)*)\)")


@dataclass
class Entry:
    release: str
    section: str
    area: str
    text: str
    prs: list = field(default_factory=list)
    url: str = ""
    kind: str = "bullet"  # bullet or heading
    id: str = ""


def _inline_text(inline):
    parts = []
    for child in inline.children or ():
        if child.type in ("text", "html_inline"):
            parts.append(child.content)
        elif child.type == "code_inline":
            parts.append(f"`{child.content}`")
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def _inline_refs(inline):
    """PR numbers and their URLs, in order of appearance, without duplicates.

    Link targets decide (a link's text may differ from its target); issue links are not PRs; bare
    ``(#N)`` counts only in text outside links, since ``[#N](.../issues/N)`` renders as ``(#N)``.
    """
    refs, urls, in_link = [], {}, 0
    for child in inline.children or ():
        if child.type == "link_open":
            in_link += 1
            match = _PULL_HREF.search(child.attrGet("href") or "")
            if match:
                number = int(match.group(1))
                if number not in refs:
                    refs.append(number)
                    urls[number] = child.attrGet("href")
        elif child.type == "link_close":
            in_link -= 1
        elif child.type == "text" and not in_link:
            for group in _BARE_REFS.findall(child.content):
                for number in (int(n) for n in re.findall(r"\d+", group)):
                    if number not in refs:
                        refs.append(number)
    return refs, urls, any(c.type == "link_open" for c in inline.children or ())


class NotesParser:
    def __init__(self, section_patterns=DEFAULT_SECTION_PATTERNS, repo="pytorch/pytorch"):
        self.patterns = [re.compile(p, re.IGNORECASE) for p in section_patterns]
        self.repo = repo
        self.md = MarkdownIt("commonmark")

    def is_fix_heading(self, text):
        text = text.strip().strip("*_ ").strip()
        return any(p.search(text) for p in self.patterns)

    def parse(self, body, release, release_url=""):
        tokens = self.md.parse(body or "")
        entries = []
        fix_level = None  # heading level of the open fix section
        section = area = ""
        in_heading_entry = False  # bullets under a heading entry describe it
        list_depth = 0
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.type == "heading_open":
                level = int(tok.tag[1])
                inline = tokens[i + 1]
                text = _inline_text(inline)
                following = tokens[i + 3].type if i + 3 < len(tokens) else None
                if fix_level is not None and level <= fix_level and not self.is_fix_heading(text):
                    fix_level = None
                if self.is_fix_heading(text):
                    if fix_level is None or level <= fix_level:
                        fix_level, section = level, text
                    area, in_heading_entry = text, False
                elif fix_level is not None:
                    refs, _, has_link = _inline_refs(inline)
                    if refs or has_link or following not in ("bullet_list_open", "ordered_list_open"):
                        entries.append(self._entry(release, section, area, inline, "heading", release_url))
                        in_heading_entry = True
                    else:
                        area, in_heading_entry = text, False
                i += 3
                continue
            if tok.type in ("bullet_list_open", "ordered_list_open"):
                list_depth += 1
            elif tok.type in ("bullet_list_close", "ordered_list_close"):
                list_depth -= 1
            elif (tok.type == "list_item_open" and list_depth == 1 and fix_level is not None
                  and not in_heading_entry):
                i, inlines = self._collect_item(tokens, i)
                if inlines:
                    entries.append(self._entry(release, section, area, inlines, "bullet", release_url))
                continue
            i += 1
        return entries

    @staticmethod
    def _collect_item(tokens, start):
        """Inline tokens of one top-level list item (nested lists included); index after it."""
        depth, inlines, i = 0, [], start
        while i < len(tokens):
            tok = tokens[i]
            if tok.type == "list_item_open":
                depth += 1
            elif tok.type == "list_item_close":
                depth -= 1
                if depth == 0:
                    return i + 1, inlines
            elif tok.type == "inline":
                inlines.append(tok)
            i += 1
        return i, inlines

    def _entry(self, release, section, area, inlines, kind, release_url):
        if not isinstance(inlines, list):
            inlines = [inlines]
        text = " ".join(t for t in (_inline_text(x) for x in inlines) if t)
        prs, urls = [], {}
        for inline in inlines:
            refs, found, _ = _inline_refs(inline)
            for ref in refs:
                if ref not in prs:
                    prs.append(ref)
            for key, value in found.items():
                urls.setdefault(key, value)
        url = ""
        if prs:
            url = urls.get(prs[0]) or f"https://github.com/{self.repo}/pull/{prs[0]}"
        else:
            url = release_url
        return Entry(release=release, section=section, area=area, text=text, prs=prs, url=url,
                     kind=kind)


def text_hash_id(release, text):
    """Stable id for an entry that cites no PR: the same release and wording give the same id."""
    norm = re.sub(r"\s+", " ", text.strip().lower())
    return "h" + hashlib.sha256(f"{release}\n{norm}".encode("utf-8")).hexdigest()[:10]


def assign_ids(entries):
    """``pr<N>`` from the first PR, ``h<hash>`` without one; repeats get ``-2``, ``-3`` ..."""
    seen = {}
    for entry in entries:
        base = f"pr{entry.prs[0]}" if entry.prs else text_hash_id(entry.release, entry.text)
        seen[base] = seen.get(base, 0) + 1
        entry.id = base if seen[base] == 1 else f"{base}-{seen[base]}"
    return entries
